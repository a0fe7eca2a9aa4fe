"""Recursive Newton-Euler algorithm: inverse dynamics tau = M(q) qdd + h(q, qd) - J^T f_ext."""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial
from ..checks import checked
from ..compilation import jit
from ..kinematics import tree_kinematics
from ..model.model import Model
from ..model.tree import take
from .bodies import body_terms, gravity_acceleration
from .levels import (T, coordinates, dot, gather, inertia_apply, joints, level_bodies, mv, parent_rows, routed,
                     sweep_down, sweep_up, to_parents)


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


def rnea_kernel(model: Model, q, qd, qdd, f_ext=None):
    """RNEA for C states in the last axis (q (nq, C), qd and qdd (nv, C), f_ext (nb, 6, C)),
    level by level (:mod:`.levels`, RBDA Table 5.1 in world coordinates):

      a_i = a_parent + S_i qdd_i + c_i,   f_i = I_i a_i + v_i x* I_i v_i - f_ext,i   (root to leaves)
      F_i = f_i + sum_{children} F_j,     tau_i = S_i^T F_i + armature qdd_i           (leaves to root)
    """
    sw = model.topology.sweep
    if sw is None:  # nothing moves
        return jnp.zeros((0,) + qdd.shape[1:], qdd.dtype)
    b0, rest = level_bodies(model, joints(model, q, qd, f_ext), qd)
    C, dtype = qdd.shape[-1], qdd.dtype
    qdd = jnp.pad(qdd, ((0, 1), (0, 0)))
    arm = jnp.pad(model.armature, (0, 1))[:, None]  # each level's rows taken once per call
    root = sw.root

    def force(b, a_parent, dofs):
        a = a_parent + b.c + mv(T(b.S), gather(qdd, dofs))
        return a, inertia_apply(*b.inertia, a) + b.p_bias

    def torque(b, F, dofs, armature):
        return dot(b.S, F[:, None]) + armature * gather(qdd, dofs)

    a0, f0 = force(b0, gravity_acceleration(model)[None, :, None], root.dofs)
    rest = [b._replace(R=None, p=None, v=None) for b in rest]  # not needed below: keep them out of the loops
    f = sweep_down(model, lambda a_prev, b, dofs, P: force(b, parent_rows(P, a_prev), dofs), a0,
                   [(b, seg.dofs) for b, seg in zip(rest, sw.segments)])

    def backward(acc, b, f, dofs, armature, P):
        F = f + acc
        return to_parents(P, F), torque(b, F, dofs, armature)

    zero = lambda W: jnp.zeros((W, 6, C), dtype)  # noqa: E731
    acc, taus = sweep_up(model, backward, zero, [(b, x, seg.dofs, arm[seg.dofs])
                                                 for b, x, seg in zip(rest, f, sw.segments)])
    return coordinates(model, torque(b0, f0 + (acc if rest else 0.0), root.dofs, arm[root.dofs]), taus)


def _rnea_plain(model: Model, q, qd, qdd, f_ext=None):
    return rnea_from(model, tree_kinematics(model, q), q, qd, qdd, f_ext)


#: rnea without input checks (``f_ext`` (nb, 6) or None): batch-minor kernel for values,
#: derivatives through ``rnea_from``
rnea_fast = routed(rnea_kernel, _rnea_plain)


@jit(one_state=True)
def rnea(model: Model, q, qd, qdd, f_ext=None):
    """Joint torques (nv,) that produce the accelerations ``qdd`` at state (q, qd).

    **Arguments:** ``q`` (nq,), ``qd`` (nv,), ``qdd`` (nv,); ``f_ext`` (nbodies, 6): optional
    external wrench on each body, ``(force, moment about the body origin)`` in body axes.
    """
    return checked(model, rnea_fast, q, {"qd": qd, "qdd": qdd}, f_ext)
