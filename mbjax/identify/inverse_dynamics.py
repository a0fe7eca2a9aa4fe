"""The inverse-dynamics regressor: ``tau = Y(q, qd, qdd) theta``, exactly.

Built directly from the quantities of :func:`mbjax.rnea` (Atkeson, An & Hollerbach 1986;
Khalil & Dombre, Sec. 12.4). In world coordinates the net force on body j,
``f_j = I_j a_j + v_j x* I_j v_j``, is linear in its world inertia ``I_j``, which is linear in
its inertial parameters ``pi_j`` (:func:`world_inertia_from_parameters`). So with ``E_jp`` the
world inertia of the p-th unit parameter vector,

    K_j[:, p] = E_jp a_j + v_j x* E_jp v_j                    (6 x 10 per body)
    tau_k = S_k . sum_{j in subtree(body(k))} K_j pi_j         (RNEA backward pass)

and the joint columns are ``diag(qdd)`` (armature), ``diag(qd)`` (viscous) and
``diag(sign(qd))`` (Coulomb). External wrenches do not depend on theta and are left out:
``rnea(q, qd, qdd, f_ext) = Y theta - J^T f_ext``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from ..checks import check_state
from ..dynamics.bodies import body_terms
from ..dynamics.rnea import body_accelerations
from ..kinematics import tree_kinematics
from ..model.model import Model
from .parameters import ParameterLayout, world_inertia_from_parameters


def check_layout(model: Model, layout: ParameterLayout | None) -> ParameterLayout:
    if layout is None:
        return ParameterLayout.of(model)
    if not isinstance(layout, ParameterLayout):
        raise TypeError(f"layout must be a ParameterLayout (ParameterLayout.of(model, ...)), not {type(layout)}")
    if layout.nbodies != model.nbodies or layout.nv != model.nv:
        raise ValueError(f"the layout was built for {layout.nbodies} bodies and nv = {layout.nv}; model "
                         f"{model.name!r} has {model.nbodies} bodies and nv = {model.nv}. "
                         "Build it with ParameterLayout.of(model)")
    return layout


def regressor_from(model: Model, layout: ParameterLayout, q, qd, qdd):
    """:func:`regressor` without input checks (for library code and large vmapped programs)."""
    tk = tree_kinematics(model, q)
    t = body_terms(model, tk, q, qd)
    a = body_accelerations(model, tk, t.c, qdd)
    eye = jnp.eye(10, dtype=qd.dtype)
    # world inertias of the ten unit parameter vectors of every body: (nb, 10) leading dims
    E = world_inertia_from_parameters(eye, tk.R[:, None], tk.p[:, None])
    v = t.v[:, None]
    K = spatial.inertia_apply(*E, a[:, None]) + spatial.cross_force(v, spatial.inertia_apply(*E, v))  # (nb, 10, 6)
    topo = model.topology
    # moves[j, k] = 1 if coordinate k moves body j, i.e. body j is in the subtree of body(k)
    moves = jnp.asarray(topo.dof_ancestors, qd.dtype)
    Y = jnp.einsum("kd,jpd,jk->kjp", tk.S, K, moves).reshape(model.nv, 10 * model.nbodies)
    columns = {"armature": qdd, "viscous": qd, "coulomb": jnp.sign(qd)}
    return jnp.concatenate([Y] + [jnp.diag(columns[g]) for g in layout.groups], axis=1)


@eqx.filter_jit
def regressor(model: Model, q, qd, qdd, layout: ParameterLayout | None = None):
    """The joint-torque regressor ``Y`` (nv, layout.size): ``tau = Y theta`` for every
    ``theta`` of the layout, where ``tau`` is the torque that produces ``qdd`` at ``(q, qd)``.

    With ``theta = layout.pack(dynamic_parameters(model))`` and the default layout (inertial
    parameters and armature), ``Y theta == rnea(model, q, qd, qdd)``.
    Only the kinematics of ``model`` (joint placements, axes, gravity) enter ``Y``.

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``qdd`` (nv,); ``layout``: a
    :class:`ParameterLayout` (default ``ParameterLayout.of(model)``).

    **Returns:** ``Y`` (nv, layout.size).
    """
    layout = check_layout(model, layout)
    q, qd, qdd = check_state(model, q, qd=qd, qdd=qdd)
    return regressor_from(model, layout, q, qd, qdd)


@eqx.filter_jit
def stacked_regressor(model: Model, q, qd, qdd, layout: ParameterLayout | None = None):
    """The regressors of N samples stacked into one observation matrix ``W`` (N nv, size):
    rows ``k nv .. (k + 1) nv`` belong to sample k, matching ``tau.reshape(-1)`` for ``tau``
    (N, nv).

    **Arguments:** ``q`` (N, nq), ``qd`` (N, nv), ``qdd`` (N, nv).
    """
    layout = check_layout(model, layout)
    q, qd, qdd = (jnp.asarray(x) for x in (q, qd, qdd))
    if q.ndim != 2 or qd.ndim != 2 or qdd.ndim != 2 or not q.shape[0] == qd.shape[0] == qdd.shape[0]:
        raise ValueError(f"q, qd, qdd must be (N, nq), (N, nv), (N, nv) with one N; got {q.shape}, {qd.shape}, "
                         f"{qdd.shape}. For one state use mbjax.identify.regressor")
    q, qd, qdd = jax.vmap(lambda a, b, c: check_state(model, a, qd=b, qdd=c))(q, qd, qdd)
    Y = jax.vmap(lambda a, b, c: regressor_from(model, layout, a, b, c))(q, qd, qdd)
    return Y.reshape(-1, layout.size)
