"""Swing-up of a torque-limited double pendulum by direct multiple shooting (mbjax.trajopt).

The bundled ``acrobot`` model (Spong's geometry: two 1 kg links of 1 m and 2 m), here with
both joints driven with at most 10 N m — less than half the 24.5 N m that holds the arm out
horizontally, so it has to pump energy — goes from hanging at rest to upright at rest in 3 s,
with the least control effort ``integral |tau|^2 dt``. Torques are linear between 11 knots; the horizon is cut into 5
shooting segments whose node states start on the straight line from down to up.

The motion is chaotic, so the optimiser's integration error matters: a solution found with
coarse steps ends far from upright when simulated accurately. The solve therefore runs twice:

1. coarse: 4 Tsit5 steps per knot interval, four random initial guesses as one vmapped program;
2. fine: 16 Dopri8 steps per interval, warm-started from the best coarse solution.

The result is accepted only after an independent re-simulation of the optimal torques with
adaptive Dopri8 at rtol = atol = 1e-12 ends within 1e-3 rad and 1e-3 rad/s of upright at rest.

Run ``python examples/swing_up.py [--quick] [--out DIR]`` (``--quick``: swings up a single
pendulum instead, same pipeline, seconds instead of minutes). With matplotlib it saves a plot,
``swing_up.png``.
"""

import time

from _common import Example, convergence  # first: float64 before any JAX array exists

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

import mbjax
from mbjax import trajopt

example = Example(__doc__, quick="a single pendulum instead of the double one (one coarse guess, 8 fine steps)")
TOLERANCE = 1e-3  # rad and rad/s at the horizon, in the re-simulation


def pendulum():
    """One 1 kg link of 1 m; 3 N m holds it out at 38 degrees at most, so it too has to pump."""
    b = mbjax.ModelBuilder("pendulum")
    b.add_body("link", joint="revolute", joint_name="shoulder", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5),
               inertia=np.diag([0.083, 0.083, 1e-3]))
    return b.build()


model, limit, duration, knots, segments, restarts, fine_steps = (
    (pendulum(), 3.0, 3.0, 11, 5, 1, 8) if example.quick
    else (mbjax.load_bundled("acrobot"), 10.0, 3.0, 11, 5, 4, 16))
upright = jnp.zeros(model.nq).at[0].set(jnp.pi)
rest = jnp.zeros(model.nv)


def swing_up(substeps, solver):
    return trajopt.TrajectoryProblem(
        model, jnp.zeros(model.nq), rest, duration, knots, substeps=substeps, solver=solver,
        costs=[trajopt.Effort(weight=1e-3)],
        constraints=[trajopt.TerminalState(upright, rest), trajopt.TorqueLimits(-limit, limit)])


coarse, fine = swing_up(4, diffrax.Tsit5()), swing_up(fine_steps, diffrax.Dopri8())
shooting = trajopt.MultipleShooting(segments)
optimiser = optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6)
# feasible to 1e-8, and the effort settled to 1e-4 (relative) between multiplier updates
outer = trajopt.AugmentedLagrangian(iterations=15, tolerance=1e-8, cost_tolerance=1e-4)
print(f"{model.name}: swing-up in {duration} s with |tau| <= {limit} N m, {knots} knots, {segments} segments")

# node states on the straight line from hanging to upright, at constant speed
s = np.asarray(shooting.node_times(coarse))[:, None] / duration
nodes_q, nodes_qd = s * np.asarray(upright), np.tile(np.asarray(upright) / duration, (segments - 1, 1))
u0 = limit * jax.random.uniform(jax.random.PRNGKey(0), (restarts, knots, model.nv), minval=-1, maxval=1)
guesses = jax.vmap(lambda u: shooting.initial_guess(coarse, u, nodes_q, nodes_qd))(u0)

t0 = time.perf_counter()
best, everything = trajopt.solve_restarts(coarse, guesses, transcription=shooting, optimiser=optimiser,
                                          constraints=outer, inner_steps=30)
t1 = time.perf_counter()
print(f"1. coarse ({restarts} restarts, 4 Tsit5 steps per interval): {t1 - t0:.1f} s; costs "
      f"{np.round(np.asarray(everything.cost), 4)}, violations {np.asarray(everything.violation)}")
solution = trajopt.solve(fine, best.variables, transcription=shooting, optimiser=optimiser, constraints=outer,
                         inner_steps=30)
t2 = time.perf_counter()
print(f"2. fine ({fine_steps} Dopri8 steps per interval): {t2 - t1:.1f} s; {solution.summary()}")

check = solution.resimulate(fine)  # adaptive Dopri8, rtol = atol = 1e-12
position = np.abs(np.asarray(mbjax.difference(model, upright, check.q[-1]))).max()
velocity = np.abs(np.asarray(check.qd[-1])).max()
peak = np.abs(np.asarray(solution.u)).max()
print(f"re-simulated (adaptive Dopri8, tol 1e-12): |q(T) - upright| = {position:.2e} rad, |qd(T)| = "
      f"{velocity:.2e} rad/s; peak torque {peak:.3f} N m; total {t2 - t0:.1f} s")
coarse_end = best.resimulate(coarse).q[-1]
coarse_error = np.abs(np.asarray(mbjax.difference(model, upright, coarse_end))).max()
print(f"   (the coarse solution, re-simulated, ends {coarse_error:.2e} rad from upright)")
example.record(model=model.name, **convergence(solution), position_error=position, velocity_error=velocity,
               peak_torque=peak, torque_limit=limit, coarse_position_error=coarse_error)
assert position <= TOLERANCE and velocity <= TOLERANCE, (position, velocity)
assert peak <= limit + 1e-6
example.figure("swing_up.png", dpi=100, draw=lambda plt: solution.plot(
    fine, title=f"{model.name} swing-up: re-simulated end error {position:.1e} rad, {velocity:.1e} rad/s"))
