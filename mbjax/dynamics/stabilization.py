"""Baumgarte stabilisation of constraint drift (Mufti 1983, Remark 4; Baumgarte 1972).

A constraint imposed only at acceleration level, ``Phi_ddot = 0``, lets numerical error in Phi
and Phi_dot grow without bound. Remark 4 replaces it by the asymptotically stable

    Phi_ddot + alpha Phi_dot + beta Phi = 0            (alpha, beta > 0),

and a velocity-level constraint ``v_dot = 0`` by ``v_dot + alpha v = 0``. With
``Phi_ddot = Phi_q qdd - gamma`` this only changes the right-hand side gamma.

Choosing (alpha, beta): the error obeys a damped oscillator; ``critical(time_constant)``
returns the critically damped pair alpha = 2/tau, beta = 1/tau^2, which removes drift in a few
tau without overshoot. tau should be long against the integrator's step (stiffness) and short
against the motion of interest; tau of 10-100 steps is a common choice.
"""

from __future__ import annotations

from ..checks import check_nonnegative

_NEGATIVE_GAINS = (
    "Baumgarte gains alpha and beta must be >= 0 (negative gains make the constraint error grow "
    "exponentially); mbjax.constraints.critical(time_constant) with time_constant > 0 gives a critically "
    "damped pair"
)


def baumgarte(gamma, phi_dot, phi=None, alpha=0.0, beta=0.0):
    """Stabilised right-hand side of ``Phi_q qdd = gamma``: ``gamma - alpha Phi_dot - beta Phi``.

    **Arguments:** ``gamma`` (m,), the acceleration-level right-hand side; ``phi_dot`` (m,), the
    velocity-level residual; ``phi`` (m,) or None for a velocity-only constraint (Remark 4's
    ``v_dot + alpha v = 0``); ``alpha``, ``beta`` >= 0.
    """
    alpha, beta = check_nonnegative(alpha, _NEGATIVE_GAINS), check_nonnegative(beta, _NEGATIVE_GAINS)
    rhs = gamma - alpha * phi_dot
    return rhs if phi is None else rhs - beta * phi


def critical(time_constant):
    """Critically damped ``(alpha, beta) = (2/tau, 1/tau^2)`` for an error time constant tau."""
    return 2.0 / time_constant, 1.0 / time_constant**2
