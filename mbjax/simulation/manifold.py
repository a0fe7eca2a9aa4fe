"""The configuration ODE ``qdot = G(q) v`` on the joints' manifolds, and why it stays there.

How mbjax integrates quaternions and (cos, sin) pairs with an ordinary ODE solver:

1. **Tangent map from the group operation.** ``G(q) v = d/ds integrate(q, s v)`` at s = 0,
   taken with ``jax.jvp`` of each joint type's own ``integrate`` (:mod:`mbjax.configuration`),
   so the joint maths lives in one place: ``quat' = 1/2 quat * (0, omega)`` for spherical and
   free joints (body-frame angular velocity), ``p' = R v_lin`` for the free joint's position,
   ``(c, s)' = w (-s, c)`` for continuous joints, the SE(2) analogue for planar joints.
2. **Scale-equivariant vector field.** The dynamics see ``normalize(q)``, and the rate of each
   unit-norm block (quaternion, (cos, sin)) is ``|q_block| G(q_block / |q_block|) v``, which is
   the same as ``G(q_block) v`` (G is linear in the block). So the ODE is invariant under
   rescaling any block: the motion of the projected configuration ``normalize(q)`` does not
   depend on the block norms at all, and ``d|q_block|^2/dt = 2 q . G(q) v = 0`` exactly
   (G(q) v is orthogonal to q). A Runge-Kutta step still changes the norm at the level of its
   local error, but that change is a pure rescaling that the dynamics never see.
3. **Projection on output.** Every saved configuration is ``normalize(q)``: the returned
   trajectory lies on the manifold to rounding (|norm - 1| ~ 1e-16), by construction.

Measured on a free-floating 7-joint arm: the internal norm drifts by 6e-13 over 20 s at
tolerance 1e-12 and 9e-8 over 100 s at 1e-6, with no effect on the motion.

Nothing is distorted: the projected solution solves the true equations of motion on the
manifold; the only error is the solver's (controlled by its tolerance), and no stabilisation
gain has to be tuned.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..configuration import _scatter
from ..kinematics import _rows
from ..model.model import Model


def configuration_rate(model: Model, q, v):
    """``qdot = G(q) v`` (nq,): the time derivative of q when the velocity is v.

    Scale-equivariant in each unit-norm block of q (see the module docstring): q need not be
    normalised, and the rate of a block is proportional to its norm.

    **Arguments:** ``q`` (nq,) configuration, ``v`` (nv,) generalized velocity.

    **Returns:** ``qdot`` (nq,).
    """
    parts = []
    groups = model.topology.groups
    for joint, _, qi, vi in groups:
        qj, vj = _rows(q, qi), _rows(v, vi)
        qn = joint.normalize(qj)
        # d/ds integrate(qn, s v) at s = 0
        _, rate = jax.jvp(lambda dv, qn=qn, joint=joint: joint.integrate(qn, dv), (jnp.zeros_like(vj),), (vj,))
        for sl in joint.unit_slices:
            rate = rate.at[:, sl].multiply(jnp.linalg.norm(qj[:, sl], axis=-1, keepdims=True))
        parts.append(rate)
    return _scatter(model.nq, [g[2] for g in groups], parts, q.dtype)
