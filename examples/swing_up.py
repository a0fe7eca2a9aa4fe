"""Swing-up of a torque-limited double pendulum by direct collocation (mbjax.trajopt).

The bundled ``acrobot`` model (Spong's geometry: two 1 kg links of 1 m and 2 m), here with
both joints driven with at most 10 N m — less than half the 24.5 N m that holds the arm out
horizontally, so it has to pump energy — goes from hanging at rest to upright at rest in 3 s,
with the least control effort ``integral |tau|^2 dt``.

Hermite–Simpson collocation (:class:`mbjax.trajopt.HermiteSimpson`) on 600 intervals: the
states, torques and accelerations at the knots and midpoints are the variables, the inverse
dynamics (RNEA) hold at each of them, the torques are quadratic on each interval. The
program is solved by :class:`mbjax.trajopt.InteriorPoint`, whose Newton steps factor the
block-tridiagonal KKT system in time linear in the number of intervals, from the straight
path from down to up at constant speed with zero torques.

The motion is chaotic, so the discretisation error matters: the solution's interval error
estimate says how far the collocated motion is from the true one, and the result is accepted
only after an independent re-simulation of the optimal torques with adaptive Dopri8 at
rtol = atol = 1e-12 ends within 1e-3 rad and 1e-3 rad/s of upright at rest (200 intervals
end 4e-3 rad and 3e-2 rad/s off; the error falls as the fourth power of the interval).

Run ``python examples/swing_up.py [--quick] [--out DIR]`` (``--quick``: swings up a single
pendulum on 100 intervals instead, same pipeline). With matplotlib it saves a plot,
``swing_up.png``.
"""

import time

from _common import Example, convergence  # first: float64 before any JAX array exists

import jax.numpy as jnp
import numpy as np

import mbjax
from mbjax import trajopt

example = Example(__doc__, quick="a single pendulum on 100 intervals instead of the double one on 600")
TOLERANCE = 1e-3  # rad and rad/s at the horizon, in the re-simulation


def pendulum():
    """One 1 kg link of 1 m; 3 N m holds it out at 38 degrees at most, so it too has to pump."""
    b = mbjax.ModelBuilder("pendulum")
    b.add_body("link", joint="revolute", joint_name="shoulder", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5),
               inertia=np.diag([0.083, 0.083, 1e-3]))
    return b.build()


model, limit, duration, intervals = (pendulum(), 3.0, 3.0, 100) if example.quick else (
    mbjax.load_bundled("acrobot"), 10.0, 3.0, 600)
upright = jnp.zeros(model.nq).at[0].set(jnp.pi)
rest = jnp.zeros(model.nv)
problem = trajopt.TrajectoryProblem(model, jnp.zeros(model.nq), rest, duration, intervals + 1,
                                    costs=[trajopt.Effort(weight=1e-3)],
                                    constraints=[trajopt.TerminalState(upright, rest), trajopt.TorqueLimits(-limit, limit)])
print(f"{model.name}: swing-up in {duration} s with |tau| <= {limit} N m, Hermite-Simpson on {intervals} intervals")

t0 = time.perf_counter()
solution = trajopt.solve(problem, transcription=trajopt.HermiteSimpson())
solution.cost.block_until_ready()
elapsed = time.perf_counter() - t0
estimate = np.asarray(solution.interval_errors).sum(axis=0)
print(f"solved in {elapsed:.1f} s (compilation included); {solution.summary()}")
print(f"interval error estimate, summed over the intervals: {estimate[0]:.1e} rad, {estimate[1]:.1e} rad/s")

check = solution.resimulate(problem)  # adaptive Dopri8, rtol = atol = 1e-12
position = np.abs(np.asarray(mbjax.difference(model, upright, check.q[-1]))).max()
velocity = np.abs(np.asarray(check.qd[-1])).max()
peak = np.abs(np.asarray(solution.u)).max()
print(f"re-simulated (adaptive Dopri8, tol 1e-12): |q(T) - upright| = {position:.2e} rad, |qd(T)| = "
      f"{velocity:.2e} rad/s; peak torque {peak:.3f} N m")
example.record(model=model.name, **convergence(solution, elapsed), position_error=position, velocity_error=velocity,
               peak_torque=peak, torque_limit=limit, seconds=elapsed, error_estimate=estimate.tolist())
assert bool(solution.converged), solution.summary()
assert position <= TOLERANCE and velocity <= TOLERANCE, (position, velocity)
assert peak <= limit + 1e-6
example.figure("swing_up.png", dpi=100, draw=lambda plt: solution.plot(
    problem, title=f"{model.name} swing-up: re-simulated end error {position:.1e} rad, {velocity:.1e} rad/s"))
