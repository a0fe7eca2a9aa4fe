"""A minimum-effort point-to-point motion of panda, rest to rest, by direct shooting (mbjax.trajopt).

The arm starts at rest in one configuration and must be at rest in another after T seconds,
under gravity, with the least control effort ``integral |tau(t)|^2 dt``, inside the URDF's
limits:

- torques: 87 N m on joints 1-4, 12 N m on joints 5-7 (exactly, at every time: the torques are
  linear between K knots, the decision variables);
- joint speeds: 95 % of 2.175 rad/s (joints 1-4) and 2.61 rad/s (joints 5-7), and the joint
  ranges, at every step of the integration grid (the 5 % margin covers the speed between
  grid points);
- the terminal state: an equality constraint.

Model: the gripper is locked (the two 15 g fingers become part of the hand), and each joint gets
the rotor inertia 0.1 kg m^2 that MuJoCo Menagerie's panda uses and the URDF lacks (without it
the 0.007 kg m^2 wrist makes the open-loop motion hypersensitive to its torques).

Method: multiple shooting (2 or 4 segments, whose start states are variables too, joined by
continuity constraints) on 8 (quick: 0.5 s intervals) or 6 (0.25 s) fixed Dopri8 steps per knot
interval (the speed limits hold on that grid; 4 steps on the quick run's intervals let FDDP's
optimum pass a limit by 0.5 % between them); an augmented
Lagrangian around Levenberg–Marquardt (20 steps per multiplier update) with forward-mode
Jacobians through the simulation. The initial guess follows a minimum-jerk joint-space line
from start to goal: its inverse dynamics (rnea) at the knots and its states at the segment
boundaries. (Single shooting from that guess stalls on the large move: the open-loop arm falls
away from the line within a second, so the first simulation misses the goal by metres.)
With ``--solver fddp``, feasibility-driven DDP (``trajopt.FDDP``) instead of
Levenberg–Marquardt, with a shooting node at every knot (8 segments), started on the same line:
it closes the gaps on the way and finds a motion of about 20 % less effort.

Check: an independent re-simulation of the optimal torques (adaptive Dopri8 at rtol = atol =
1e-12) must end within 1e-3 rad and 1e-3 rad/s of the goal and respect the speed limits.

Run ``python examples/panda_point_to_point.py [--quick] [--float32] [--solver lm|fddp] [--out DIR]`` (``--quick``: a
0.3 rad move of every joint in 1 s with 3 knots, instead of a large move in 2 s with 9 knots;
``--float32``: single precision, as JAX does by default: ``jax_enable_x64`` stays off, so the
model and every computation are float32, and the solver's and the re-simulation's tolerances
take their float32 defaults, 1.2e-4 and 1.2e-5 instead of 1e-8 and 1e-12). With matplotlib it
saves a plot, ``panda_point_to_point.png`` (``panda_point_to_point_float32.png`` with
``--float32``, ``panda_point_to_point_fddp.png`` with FDDP).
"""

import re
import time

from _common import Example, convergence  # first: float64 (unless --float32) before any JAX array exists

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import trajopt

example = Example(__doc__, quick="a 0.3 rad move of every joint in 1 s with 3 knots and 2 segments, instead of a large "
                                 "move in 2 s with 9 knots and 4 segments", float32=True,
                  options=lambda p: p.add_argument("--solver", choices=["lm", "fddp"], default="lm",
                                                   help="the inner solver: Levenberg-Marquardt or FDDP"))
FDDP = example.args.solver == "fddp"

# lock the gripper: the fingers (prismatic joints) become part of the hand
urdf = mbjax.example_robot_path("panda").read_text()
urdf = re.sub(r'(<joint name="panda_finger_joint\d" type=)"prismatic"', r'\1"fixed"', urdf)
model = mbjax.load_urdf(urdf, mimic="independent")
model = eqx.tree_at(lambda m: m.armature, model, jnp.full(model.nv, 0.1))

Q_START = jnp.array([0.0, -0.6, 0.0, -2.2, 0.0, 1.6, 0.8])
Q_GOAL = Q_START + 0.3 if example.quick else jnp.array([1.2, 0.2, -0.4, -1.6, 0.5, 1.9, 0.0])
DURATION, KNOTS, SEGMENTS, SUBSTEPS = (1.0, 3, 2, 8) if example.quick else (2.0, 9, 8 if FDDP else 4, 6)
SPEED = 0.95 * model.velocity_limit  # the limit holds on the grid; keep a margin for between steps
# rad and rad/s, of the independent re-simulation. In float32 its adaptive Dopri8 runs at
# rtol 1.2e-5, and this open-loop motion doubles a deviation every 0.125 s (256x over the
# --quick run's 1 s): 3e-3 is what the re-simulation itself can resolve
TOLERANCE = 1e-3 if model.dtype == jnp.float64 else 3e-3
rest = jnp.zeros(model.nv)

problem = trajopt.TrajectoryProblem(
    model, Q_START, rest, DURATION, KNOTS, substeps=SUBSTEPS, solver=diffrax.Dopri8(),
    costs=[trajopt.Effort(weight=1e-3)],
    constraints=[trajopt.TerminalState(Q_GOAL, rest), trajopt.TorqueLimits(), trajopt.VelocityLimits(-SPEED, SPEED),
                 trajopt.PositionLimits()])


def minimum_jerk(t):
    """The straight joint-space line from start to goal, rest to rest: q(t)."""
    s = t / DURATION
    return Q_START + (10 * s**3 - 15 * s**4 + 6 * s**5) * (Q_GOAL - Q_START)


def velocity(t):
    return jax.jvp(minimum_jerk, (t,), (jnp.ones_like(t),))[1]


def inverse_dynamics(t):
    return mbjax.rnea(model, minimum_jerk(t), velocity(t), jax.jvp(velocity, (t,), (jnp.ones_like(t),))[1])


# the guess: knot torques and shooting-node states along the minimum-jerk line
shooting = trajopt.MultipleShooting(SEGMENTS)
nodes = shooting.node_times(problem)
guess = shooting.initial_guess(problem, jax.vmap(inverse_dynamics)(problem.controls.ts), jax.vmap(minimum_jerk)(nodes),
                               jax.vmap(velocity)(nodes))
print(f"{model}\n{KNOTS} knots x {model.nv} joints over {DURATION} s, {SEGMENTS} shooting segments, {SUBSTEPS} "
      "Dopri8 steps per knot interval")

start = time.perf_counter()
# feasible to 1e-8, and the effort changing by less than 0.1 % per multiplier update: not yet the
# least effort (200-step inner solves reach 0.633 instead of 1.013, in 900 steps; docs/trajopt.md)
solution = trajopt.solve(problem, guess, transcription=shooting, inner_steps=20,
                         constraints=trajopt.AugmentedLagrangian(iterations=30, cost_tolerance=1e-3),
                         optimiser=trajopt.FDDP() if FDDP else None)
jax.block_until_ready(solution.u)
wall = time.perf_counter() - start
print(f"solved in {wall:.1f} s (compilation included): {solution.summary()}")

check = solution.resimulate(problem)
q_err = float(jnp.max(jnp.abs(mbjax.difference(model, Q_GOAL, check.q[-1]))))
qd_err = float(jnp.max(jnp.abs(check.qd[-1])))
print(f"independent re-simulation (adaptive Dopri8, {model.dtype}): final position error {q_err:.2e} rad, "
      f"final velocity error {qd_err:.2e} rad/s")

limit = np.asarray(model.effort_limit)
peak = np.max(np.abs(np.asarray(solution.u)), axis=0)
print("peak torque / limit: " + ", ".join(f"{p:.1f}/{lim:.0f}" for p, lim in zip(peak, limit)) + " N m")
speed = np.max(np.abs(np.asarray(check.qd)), axis=0)
print("peak speed (re-simulated) / limit: " + ", ".join(
    f"{v:.2f}/{lim:.2f}" for v, lim in zip(speed, np.asarray(model.velocity_limit))) + " rad/s")
example.record(**convergence(solution, wall), position_error=q_err, velocity_error=qd_err, peak_torque=peak,
               torque_limit=limit, peak_speed=speed, speed_limit=model.velocity_limit)

assert bool(solution.converged), "the optimiser did not converge"
assert np.all(peak <= limit + float(solution.violation)), "torque limits violated"
assert np.all(speed <= np.asarray(model.velocity_limit)), "speed limits violated"
assert q_err <= TOLERANCE and qd_err <= TOLERANCE, "the re-simulation misses the goal"
example.figure("panda_point_to_point_fddp.png" if FDDP else "panda_point_to_point.png", dpi=100, draw=lambda plt: solution.plot(
    problem, title=f"panda rest to rest in {DURATION} s: {int(solution.iterations)} steps, final error "
                   f"{max(q_err, qd_err):.1e}"))
