"""Recursive Newton-Euler algorithm: inverse dynamics tau = M(q) qdd + h(q, qd) - J^T f_ext."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .. import spatial
from ..checks import check_state
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .bodies import body_terms, gravity_acceleration


def rnea_from(model: Model, tk, q, qd, qdd, f_ext=None):
    """RNEA on precomputed tree kinematics (no input checks).

    In world coordinates (Featherstone, RBDA Sec. 5.3, absolute form):
      a_i = a_0 + sum_{k moves i} (S_k qdd_k) + sum_{j <= i} c_j      (A @ ...: root paths)
      f_i = I_i a_i + v_i x* I_i v_i - f_ext,i
      F_i = sum_{j in subtree(i)} f_j                                  (A^T @ f)
      tau_k = S_k . F_{body(k)} + armature_k qdd_k
    """
    topo = model.topology
    t = body_terms(model, tk, q, qd, f_ext)
    a = body_accelerations(model, tk, t.c, qdd)
    f = spatial.inertia_apply(*t.inertia, a) + t.p
    F = jnp.asarray(topo.ancestors, qd.dtype).T @ f
    return jnp.sum(tk.S * take(F, topo.dof_body), axis=-1) + model.armature * qdd


def body_accelerations(model: Model, tk, c, qdd):
    """World-frame spatial accelerations (nb, 6) of the bodies, gravity included as an upward
    acceleration of the world: a_i = a_0 + sum_{k moves i} S_k qdd_k + sum_{j <= i} c_j."""
    topo = model.topology
    A = jnp.asarray(topo.ancestors, qdd.dtype)
    return jnp.asarray(topo.dof_ancestors, qdd.dtype) @ (tk.S * qdd[:, None]) + A @ c + gravity_acceleration(model)


@eqx.filter_jit
def rnea(model: Model, q, qd, qdd, f_ext=None):
    """Joint torques (nv,) that produce the accelerations ``qdd`` at state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``qdd`` (nv,); ``f_ext`` (nbodies, 6): optional
    external wrench on each body, ``(force, moment about the body origin)`` in body axes.
    """
    q, qd, qdd = check_state(model, q, qd=qd, qdd=qdd)
    return rnea_from(model, tree_kinematics(model, q), q, qd, qdd, f_ext)
