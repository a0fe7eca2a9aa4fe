"""Forward dynamics in maximal coordinates by any of Mufti's methods, and the vector field
for integrating a maximal state (with the Baumgarte stabilisation of Remark 4)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..checks import check_external_forces, check_state
from ..dynamics.bodies import external_forces_or_zero
from ..model.model import Model
from .barycentric import solve_barycentric
from .kkt import solve_kkt
from .maximal import (
    MaximalState,
    PrescribedBase,
    base_or_fixed,
    joint_tables,
    maximal_state_with_rotation_from,
    state_derivative,
)
from .newton_euler import MaximalSolution, newton_euler, solution
from .schur import solve_schur
from .sparse_kkt import solve_sparse_kkt

METHODS = ("kkt", "sparse_kkt", "schur", "barycentric")


def _check_model(model: Model, tau):
    """Unsupported joint types: an error at trace time; armature: at run time (through tau)."""
    joint_tables(model)
    return eqx.error_if(
        tau, jnp.any(model.armature != 0),
        "the maximal-coordinate methods model rigid bodies only: joint armature (rotor inertia) "
        "is not supported. Set model.armature to zero, or use method='aba' or 'crba'",
    )


def solve(model: Model, state: MaximalState, tau, f_ext=None, base=None, method="sparse_kkt", alpha=0.0, beta=0.0,
          rotation=None):
    """:func:`maximal_dynamics` without input checks (``rotation``: see ``newton_euler``)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
    tau = _check_model(model, tau)
    base = base_or_fixed(base, state.r.dtype)
    ne = newton_euler(model, state, tau, f_ext, base, alpha, beta, rotation)
    if method == "kkt":
        x, lam = solve_kkt(ne)
    elif method == "sparse_kkt":
        x, lam = solve_sparse_kkt(model, ne)
    elif method == "schur":
        x, lam = solve_schur(ne)
    else:
        x, lam = solve_barycentric(model, ne, state, base)
    return solution(ne, state, base, x, lam)


def _check_maximal(model: Model, state: MaximalState, tau, f_ext):
    nb = model.nbodies
    for name, x, shape in (("r", state.r, (nb, 3)), ("quat", state.quat, (nb, 4)),
                           ("r_dot", state.r_dot, (nb, 3)), ("omega", state.omega, (nb, 3))):
        if jnp.shape(x) != shape:
            raise ValueError(f"MaximalState.{name} has shape {jnp.shape(x)}; model {model.name!r} expects {shape}")
    tau = check_state(model, tau=tau)
    state = jax.tree_util.tree_map(lambda x: jnp.asarray(x, model.dtype), state)
    return state, tau, check_external_forces(model, f_ext)


@eqx.filter_jit
def maximal_dynamics(model: Model, state: MaximalState, tau, f_ext=None, base: PrescribedBase | None = None,
                     method: str = "sparse_kkt", alpha=0.0, beta=0.0) -> MaximalSolution:
    """Accelerations and hinge forces of a tree in maximal coordinates (Mufti 1983).

    **Arguments:**

    - ``state``: a :class:`MaximalState` (see :func:`maximal_state`).
    - ``tau`` (nv,): joint torques/forces, applied along each joint's motion subspace.
    - ``f_ext`` (nb, 6): optional external wrench on each body, ``(force, moment about the
      body origin)`` in body axes, as for ``aba``.
    - ``base``: :class:`PrescribedBase`, the prescribed motion of the body the root joints
      hang from (Remark 3); ``None``: the fixed world.
    - ``method``: ``"kkt"`` (dense KKT, Eq. 10/49), ``"sparse_kkt"`` (tree-ordered block
      elimination, O(n)), ``"schur"`` (hinge forces first, Eq. 14), ``"barycentric"``
      (K = I + D~ M D~^T by Cholesky, Eqs. 26-38, 58-61; ball, universal and pin joints
      and free roots only).
    - ``alpha``, ``beta``: Baumgarte gains (Remark 4), for integration in maximal
      coordinates; see ``mbjax.constraints.critical``.

    **Returns:** a :class:`MaximalSolution`.
    """
    state, tau, f_ext = _check_maximal(model, state, tau, f_ext)
    return solve(model, state, tau, f_ext, base, method, alpha, beta)


@eqx.filter_jit
def maximal_state_derivative(model: Model, state: MaximalState, tau, f_ext=None, base: PrescribedBase | None = None,
                             method: str = "sparse_kkt", alpha=0.0, beta=0.0) -> MaximalState:
    """d/dt of a maximal state (a vector field for ``diffrax``): (r_dot, quat_dot, r_ddot,
    omega_dot), with the Baumgarte-stabilised constraints of Remark 4 when alpha, beta > 0.
    Arguments as for :func:`maximal_dynamics`."""
    state, tau, f_ext = _check_maximal(model, state, tau, f_ext)
    sol = solve(model, state, tau, f_ext, base, method, alpha, beta)
    return state_derivative(state, sol.r_ddot, sol.omega_dot)


@eqx.filter_jit
def constraint_violation(model: Model, state: MaximalState, base: PrescribedBase | None = None):
    """How far a maximal state is off the constraint manifold, per joint.

    **Returns:** ``(position, velocity)``, each (nb,): the distance between the hinge point
    on the child and on the parent along the joint's locked translations (Eq. 7, Remark 5),
    and the norm of the relative spatial velocity at the hinge along its locked directions
    (Eqs. 8, 47).
    """
    dtype = state.r.dtype
    ne = newton_euler(model, state, jnp.zeros(model.nv, dtype), None, base_or_fixed(base, dtype))
    v = jnp.einsum("nik,ni->nk", ne.Q, ne.v_hinge)
    return jnp.linalg.norm(ne.xi, axis=-1), jnp.linalg.norm(v, axis=-1)


def forward_dynamics_maximal(model: Model, q, qd, tau, f_ext, method):
    """Joint accelerations by a maximal-coordinate method, from a joint-space state."""
    state, R = maximal_state_with_rotation_from(model, q, qd)
    f_ext = None if f_ext is None else external_forces_or_zero(model, f_ext, tau.dtype)
    return solve(model, state, tau, f_ext, None, method, rotation=R).qdd
