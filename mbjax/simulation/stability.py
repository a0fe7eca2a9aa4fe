"""Whether an explicit solver with a fixed step is stable on a formulation's fastest motions.

An explicit Runge–Kutta method with Butcher tableau (A, b) multiplies the solution of the test
equation y' = lambda y by R(z) = 1 + z b^T (I - z A)^-1 1 per step, z = lambda dt; it is stable
where |R(z)| <= 1 (Hairer & Wanner, *Solving ODEs II*, Sec. IV.2). Stiff contact springs, their
dampers, regularised friction and joint stops put eigenvalues far out on the left half plane;
a formulation estimates them (:meth:`mbjax.Dynamics.fast_rates`) and :func:`check` refuses a
fixed step that would amplify them, before any step is taken.
"""

from __future__ import annotations

import diffrax
import numpy as np


def stability_function(solver):
    """R(z) of an explicit solver (numpy, vectorised over z), or None when it has none here
    (implicit solvers, solvers without a Butcher tableau)."""
    if isinstance(solver, diffrax.Euler):
        return lambda z: 1.0 + z
    tableau = getattr(solver, "tableau", None)
    if isinstance(solver, diffrax.AbstractImplicitSolver) or not isinstance(tableau, diffrax.ButcherTableau):
        return None
    s = len(tableau.b_sol)
    A = np.zeros((s, s))
    for i, row in enumerate(tableau.a_lower):
        A[i + 1, :i + 1] = np.asarray(row)
    b = np.asarray(tableau.b_sol)

    def R(z):
        z = np.asarray(z, complex)[..., None, None]
        stages = np.linalg.solve(np.eye(s) - z * A, np.ones((s, 1)))  # (I - zA)^-1 1
        return 1.0 + z[..., 0, 0] * (b @ stages)[..., 0]

    return R


def largest_stable_step(R, rates, dt) -> float:
    """The largest step (at most ``dt``) at which every eigenvalue in ``rates`` is stable
    (bisection on the step)."""
    def stable(h):
        return np.all(np.abs(R(np.asarray(rates) * h)) <= 1 + 1e-12)

    lo, hi = 0.0, float(dt)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if stable(mid) else (lo, mid)
    return lo


def check(solver, dt, rates: dict) -> None:
    """Raise a ValueError when the explicit ``solver`` at the fixed step ``dt`` is unstable on
    one of ``rates`` (name -> complex eigenvalues, 1/s)."""
    R = stability_function(solver)
    if R is None or not rates:
        return
    for name, values in rates.items():
        values = np.asarray(values, complex).ravel()
        if values.size == 0:
            continue
        growth = np.abs(R(values * dt))
        if np.all(growth <= 1 + 1e-12):
            continue
        worst = values[np.argmax(growth)]
        safe = largest_stable_step(R, values, dt)
        raise ValueError(
            f"simulate: {type(solver).__name__} at the fixed step dt0 = {dt:g} s is unstable on the {name} (an "
            f"eigenvalue {worst.real:.3g}{worst.imag:+.3g}j 1/s: each step multiplies its motion by "
            f"{growth.max():.3g}). Take dt0 <= {0.9 * safe:.3g} s, or an adaptive step (leave "
            f"stepsize_controller out), or an implicit solver (diffrax.Kvaerno5()), or a softer law")
