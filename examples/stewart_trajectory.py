"""Minimum-effort motion of Huang's 3-leg Stewart platform, rest to rest, by mbjax.trajopt.

**The mechanism.** ``mbjax.stewart_platform()`` (Huang et al. 2000, Fig. 10, as repaired in
:mod:`mbjax.constraints.huang_models`): three motors ``motor1..3`` at the ground turn the
cranks, knees join cranks and legs, and the 10 kg platform hangs on a free joint; three cut
ball joints close the loops (9 constraint rows on 12 velocity coordinates: 3 degrees of
freedom, those of a 3-RRS parallel mechanism: heave, roll and pitch of the platform).

**The goal.** The platform is raised by RAISE and tilted by TILT about the world x axis. A
3-RRS platform cannot reach an arbitrary 6-D pose, so the goal is assembled from those three
coordinates: a one-off weld cut joint from the goal frame to the platform keeps only its rows
("z", "rx", "ry"), and ``mbjax.assemble`` closes the ball joints and it together (12 rows on 12
coordinates). That fixes the goal's motor angles, and with them the whole mechanism.

**The optimisation.** Starting and ending at rest, the three motor torques (linear between K
knots) minimise the effort integral of |tau(t)|^2 subject to ``TerminalState`` on the motor
angles and rates (dofs 0, 2, 4): with the loops closed they determine the configuration and
the velocity of every body near the goal, and asking for more (e.g. the platform's six
coordinates as well) makes the constraint Jacobian rank deficient. The dynamics are the closed
chain's, ``mbjax.ClosedChainDynamics(closures, alpha=alpha, beta=beta)``: the tree's equations with the
loop constraints at acceleration level (Mufti's Eq. 73, a KKT solve per evaluation) and
critically damped Baumgarte stabilisation (``mbjax.constraints.critical``), integrated with
fixed Tsit5 steps (the problem runs it without its rank check: a trial step of the optimiser
may drive a crank and its leg collinear, a singular configuration, which the optimiser then
rejects). Levenberg-Marquardt inside an augmented Lagrangian with a stiff initial penalty finds
the torques, starting from the static torques that hold the start pose at every knot (the
solution of ``g(q0) = S^T u + Phi_q^T lam``, motor torques and loop reactions together).

**The check.** ``solution.resimulate`` integrates the optimal torques again with adaptive
Dopri8 at rtol = atol = 1e-12. Its final platform pose (position and rotation vector, the
manifold difference) and all final velocities must be within 1e-3 (m, rad, m/s, rad/s) of the
goal, and the loop residual |Phi(q(t))| is reported along the whole re-simulated motion.

Run ``python examples/stewart_trajectory.py [--quick] [--out DIR]`` (``--quick``: a smaller,
shorter move with fewer knots). With matplotlib it saves a plot, ``stewart_trajectory.png``.
"""

import time

# first: float64 before any JAX array exists, and OpenBLAS on one thread (the solves here are
# small, 21 x 21: worker threads only add wake-up latency, ~8 ms per call on a busy machine)
from _common import Example, convergence

import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import trajopt
from mbjax.constraints import LoopClosureBuilder, LoopClosures

example = Example(__doc__, quick="raise 2 cm and tilt 2 degrees in 0.3 s with 6 knots, instead of 4 cm and 3 degrees "
                                 "in 0.5 s with 11")
RAISE, TILT = (0.02, np.radians(2.0)) if example.quick else (0.04, np.radians(3.0))  # m, rad
DURATION, KNOTS, SUBSTEPS = (0.3, 6, 4) if example.quick else (0.5, 11, 4)
TOLERANCE = 1e-3  # m, rad, m/s, rad/s in the re-simulation
EFFORT_WEIGHT = 1e-2  # the objective is EFFORT_WEIGHT * integral |tau|^2 dt
MOTORS = ["motor1", "motor2", "motor3"]

model, closures, q0, _ = mbjax.stewart_platform()
motor_dofs = trajopt.actuated_dofs(model, MOTORS)
platform = np.arange(model.nv)[model.v_slice("platform")]
PLATFORM_Q = model.q_slice("platform")  # free joint: position (3), quaternion (4)
qd_zero = jnp.zeros(model.nv)


def goal_pose(raise_by, tilt):
    """The assembled configuration with the platform raised by ``raise_by`` and tilted by
    ``tilt`` about x: the ball joints plus a weld to the goal frame on its rows z, rx, ry."""
    R = mbjax.spatial.rotation_exp(jnp.array([tilt, 0.0, 0.0]))
    p = q0[PLATFORM_Q][:3] + jnp.array([0.0, 0.0, raise_by])
    lock = LoopClosureBuilder(model).add_loop("goal", "weld", None, "platform", rotation_a=R, translation_a=p,
                                              directions=("z", "rx", "ry")).build()
    both = LoopClosures(closures.names + lock.names, closures.joint_types + lock.joint_types,
                        closures.bodies + lock.bodies, closures.directions + lock.directions,
                        *(jnp.concatenate([getattr(closures, f), getattr(lock, f)])
                          for f in ("rotation_a", "translation_a", "rotation_b", "translation_b")))
    return mbjax.assemble(model, both, q0)


def holding_torques(q):
    """Motor torques u (3,) that hold the mechanism at rest at q: M qdd + h = S^T u + Phi_q^T lam
    with qdd = qd = 0 is ``g(q) = [S^T, Phi_q^T] (u, lam)``, 12 equations in 3 + 9 unknowns."""
    S = np.zeros((model.nv, len(motor_dofs)))
    S[motor_dofs, np.arange(len(motor_dofs))] = 1.0
    A = np.asarray(mbjax.loop_jacobian(model, closures, q))
    g = np.asarray(mbjax.generalized_gravity(model, q))
    return np.linalg.lstsq(np.concatenate([S, A.T], 1), g, rcond=None)[0][:len(motor_dofs)]


q_goal = goal_pose(RAISE, TILT)
alpha, beta = mbjax.constraints.critical(0.05)  # loop errors decay in ~0.05 s, without overshoot
dynamics = mbjax.ClosedChainDynamics(closures, alpha=alpha, beta=beta)
problem = trajopt.TrajectoryProblem(
    model, q0, qd_zero, DURATION, KNOTS, substeps=SUBSTEPS, actuated=MOTORS, method=dynamics,
    costs=[trajopt.Effort(weight=EFFORT_WEIGHT)], constraints=[trajopt.TerminalState(q_goal, qd_zero, dofs=motor_dofs)])
print(f"{model.name}: {model.nv} velocity coordinates, {closures.nc} loop constraints, motors {MOTORS}")
print(f"goal: platform raised {RAISE * 100:.0f} cm and tilted {np.degrees(TILT):.0f} deg in {DURATION} s; motor "
      f"angles {np.round(np.asarray(q_goal[motor_dofs]), 4).tolist()} rad; {KNOTS} knots, {SUBSTEPS} Tsit5 steps "
      f"per knot interval")

hold_start, hold_goal = holding_torques(q0), holding_torques(q_goal)
print(f"static holding torques: start {np.round(hold_start, 3).tolist()}, goal {np.round(hold_goal, 3).tolist()} N m")
guess = jnp.tile(jnp.asarray(hold_start), (KNOTS, 1))

start = time.perf_counter()
# a stiff initial penalty (the constraints in rad and rad/s against an effort of ~1 with weight 1e-2)
# takes the violation below 1e-8 in a few multiplier updates of 20 Levenberg-Marquardt steps each
outer = trajopt.AugmentedLagrangian(penalty=1e3, iterations=20, cost_tolerance=1e-4)
solution = trajopt.solve(problem, guess, optimiser=trajopt.LevenbergMarquardt(rtol=1e-6, atol=1e-6),
                         constraints=outer, inner_steps=20)
jax.block_until_ready(solution.u)
wall = time.perf_counter() - start
print(f"solved in {wall:.1f} s (compilation included): {solution.summary()}; effort "
      f"{float(solution.cost) / EFFORT_WEIGHT:.6g} N^2 m^2 s")

start = time.perf_counter()
check = solution.resimulate(problem)  # adaptive Dopri8, rtol = atol = 1e-12
jax.block_until_ready(check.q)
resimulation_wall = time.perf_counter() - start
error = np.abs(np.asarray(mbjax.difference(model, q_goal, check.q[-1])))
pose_error, motor_error = error[platform].max(), error[motor_dofs].max()
qd_error = np.abs(np.asarray(check.qd[-1])).max()
residual = np.abs(np.asarray(jax.vmap(lambda q: mbjax.loop_residual(model, closures, q))(check.q))).max()
print(f"independent re-simulation (Dopri8, rtol = atol = 1e-12, {resimulation_wall:.1f} s): platform pose "
      f"{pose_error:.2e} (m, rad) from the goal, motors {motor_error:.2e} rad, final velocities {qd_error:.2e}; "
      f"loop residual max |Phi(t)| = {residual:.2e} m along the motion")
end = np.asarray(check.q[-1, PLATFORM_Q])
tilt = np.degrees(np.linalg.norm(np.asarray(mbjax.spatial.quat_log(end[3:]))))
peak = np.abs(np.asarray(solution.u)).max(0)
print(f"platform height {end[2]:.4f} m (start {float(q0[PLATFORM_Q][2]):.4f} m), turned {tilt:.2f} deg; peak "
      f"motor torques {np.round(peak, 3).tolist()} N m")
example.record(**convergence(solution, wall), effort=float(solution.cost) / EFFORT_WEIGHT, pose_error=pose_error,
               motor_error=motor_error, velocity_error=qd_error, max_loop_residual=residual,
               platform_height=end[2], tilt_deg=tilt, peak_torque=peak)

assert bool(solution.converged), "the optimiser did not converge"
assert pose_error <= TOLERANCE and qd_error <= TOLERANCE, "the re-simulation misses the goal"
assert residual <= 1e-6, "the loops opened"
example.figure("stewart_trajectory.png", dpi=100, draw=lambda plt: solution.plot(
    problem, title=f"Stewart platform raised {RAISE * 100:.0f} cm, tilted {np.degrees(TILT):.0f} deg: "
                   f"{int(solution.iterations)} iterations, re-simulated pose error {pose_error:.1e}"))
