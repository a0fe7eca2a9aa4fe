"""A satellite turns itself by moving only its arm: minimum-effort reorientation, rest to rest.

The bundled ``space_robot`` (150 kg bus on a free joint, 7-joint arm, zero gravity) starts at
rest and must end at rest with its bus pitched by ANGLE about the y axis. Nothing acts on the
bus: only the arm joints are actuated (``actuated=`` the seven arm joints), so the system's
momentum stays zero and the bus turns by reaction to the arm (Wilde et al. 2018, Eq. 21). The arm may end
anywhere. mbjax.trajopt finds the arm torques (linear between K knots, within the 50 N m
limits) that minimise the effort integral of |tau(t)|^2 subject to

- ``TerminalState(q_goal, dofs=(3, 4, 5))``: the bus attitude, as the rotation vector from the
  target attitude to the final one (the manifold difference of the free joint);
- ``TerminalState(qd=0, dofs=arm)``: the arm at rest at the end. The bus velocity is not
  asked for: with zero momentum and the arm at rest the bus is at rest too (asking for it as
  well makes the constraint Jacobian rank deficient, which stalls the solver).

Checked by an independent re-simulation (adaptive Dopri8 at rtol = atol = 1e-12): its final
attitude error and all its velocities, the bus's included, must be below 1e-3, and its momentum
must stay zero along the whole motion (a conservation law the optimiser never sees).

Solver: single shooting, an augmented Lagrangian around feasibility-driven DDP
(``trajopt.FDDP``, default: 60 iterations, the lower optimum), or with ``--solver lm``
around Levenberg–Marquardt (a smaller program to compile, about 220 cheaper steps, an optimum
12 % costlier). The motion is integrated by 4 Tsit5 steps per knot interval (0.19 s): the
re-simulation ends within 1e-8 rad and 5e-7 rad/s of the goal; 8 steps end within 2e-10 rad
and 8e-9 rad/s at the same optimum and take 1.2-1.3x as long.

Run ``python examples/free_floating_reorientation.py [--quick] [--solver fddp|lm] [--out DIR]``
(``--quick``: a smaller turn with fewer knots). With matplotlib it saves a plot,
``free_floating_reorientation.png`` (``free_floating_reorientation_lm.png`` with
Levenberg–Marquardt).
"""

import time

from _common import Example, convergence  # first: float64 before any JAX array exists

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import trajopt
from mbjax.spatial import quat_conjugate, quat_exp, quat_log, quat_multiply

example = Example(__doc__, quick="a 10 degree turn in 4 s with 5 knots instead of 25 degrees in 6 s with 9",
                  options=lambda p: p.add_argument("--solver", choices=["fddp", "lm"], default="fddp",
                                                   help="the inner solver: FDDP or Levenberg-Marquardt"))
FDDP = example.args.solver == "fddp"
ANGLE = np.radians(10.0 if example.quick else 25.0)  # pitch of the bus (rad)
DURATION, KNOTS, SUBSTEPS = (4.0, 5, 4) if example.quick else (6.0, 9, 4)
TOLERANCE = 1e-3  # rad and rad/s (m/s), of the independent re-simulation
# rotor inertia of geared joint motors (0.1 kg m^2 reflected): without it the light wrist (1 kg) spins
# up to hundreds of rad/s under trial torques of the optimiser and the fixed-step simulation diverges
model = mbjax.load_bundled("space_robot")
model = eqx.tree_at(lambda m: m.armature, model, model.armature.at[6:].set(0.1))
arm = [name for name, kind in zip(model.joint_names, model.joint_types) if kind != "free"]
arm_dofs = trajopt.actuated_dofs(model, arm)
PHI0 = jnp.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.6, 0.0])
q0 = jnp.concatenate([jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), PHI0])
attitude_goal = quat_exp(jnp.array([0.0, ANGLE, 0.0]))
q_goal = q0.at[3:7].set(attitude_goal)  # only its attitude is asked for
qd_zero = jnp.zeros(model.nv)

problem = trajopt.TrajectoryProblem(
    model, q0, qd_zero, DURATION, KNOTS, substeps=SUBSTEPS, actuated=arm, costs=[trajopt.Effort(weight=1e-2)],
    constraints=[trajopt.TerminalState(q_goal, dofs=(3, 4, 5)), trajopt.TerminalState(qd=qd_zero, dofs=arm_dofs),
                 trajopt.TorqueLimits()])
print(f"{model}\nbus pitch {np.degrees(ANGLE):.0f} deg in {DURATION} s: {KNOTS} knots x {len(arm)} arm joints, "
      f"{SUBSTEPS} Tsit5 steps per knot interval")

start = time.perf_counter()
# short inexact inner solves between multiplier updates (FDDP: 5 iterations, 12 updates; 10
# iterations take 9 updates and as long; Levenberg-Marquardt needs 20 steps: with 10 its
# penalty grows without the violation falling); stop once feasible to 1e-8 with the effort
# settled to 0.1 % per update (Levenberg-Marquardt's creeps down by ~0.07 % per update after
# that on the 25 degree turn)
outer = trajopt.AugmentedLagrangian(iterations=20, cost_tolerance=1e-3)
solution = trajopt.solve(problem, jnp.zeros(problem.controls.shape), constraints=outer, inner_steps=5 if FDDP else 20,
                         optimiser=trajopt.FDDP() if FDDP else None)
jax.block_until_ready(solution.u)
wall = time.perf_counter() - start
print(f"solved in {wall:.1f} s (compilation included): {solution.summary()}")

check = solution.resimulate(problem)
attitude_error = float(jnp.linalg.norm(quat_log(quat_multiply(quat_conjugate(attitude_goal), check.q[-1, 3:7]))))
qd_err = float(jnp.max(jnp.abs(check.qd[-1])))
momentum = np.max(np.abs(np.asarray(jax.vmap(lambda q, qd: mbjax.momentum(model, q, qd))(check.q, check.qd))))
print(f"independent re-simulation (Dopri8, rtol = atol = 1e-12): bus attitude {attitude_error:.2e} rad from the "
      f"target, final velocities {qd_err:.2e}; goal missed by {max(attitude_error, qd_err):.2e}")
print(f"momentum along the re-simulated motion: max |h(t)| = {momentum:.2e} (zero at the start)")
turned = np.degrees(np.linalg.norm(quat_log(check.q[-1, 3:7])))
peak = np.max(np.abs(np.asarray(solution.u)), axis=0)
print(f"bus turned {turned:.3f} deg; arm moved by {np.round(np.asarray(check.q[-1, 7:] - PHI0), 3).tolist()} rad; "
      f"peak torques {np.round(peak, 2).tolist()} N m (limit 50)")
example.record(**convergence(solution, wall), attitude_error=attitude_error, velocity_error=qd_err,
               max_momentum=momentum, bus_turn_deg=turned, peak_torque=peak)

assert bool(solution.converged), "the optimiser did not converge"
assert attitude_error <= TOLERANCE and qd_err <= TOLERANCE, "the re-simulation misses the target"
assert momentum <= 1e-9, "momentum is not conserved"
example.figure("free_floating_reorientation.png" if FDDP else "free_floating_reorientation_lm.png", dpi=100,
               draw=lambda plt: solution.plot(
                   problem, title=f"space robot turns its bus by {turned:.1f} deg with its arm: "
                                  f"{int(solution.iterations)} iterations, attitude error {attitude_error:.1e} rad"))
