"""Terms of the equations of motion M(q) qdd + h(q, qd) = tau: bias and gravity torques,
energies, momenta (about the world origin and the centre of mass) and the centroidal
momentum matrix, and the Jacobian of the centre of mass (forward dynamics by name:
:mod:`mbjax.methods`)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial
from ..checks import check_state
from ..compilation import filter_jit, jit
from ..kinematics import body_velocities_from, center_of_mass_from, tree_kinematics
from ..model.model import Model
from .bodies import world_inertias
from .crba import momentum_matrix_from
from .rnea import rnea_fast


@jit(one_state=True)
def nonlinear_effects(model: Model, q, qd):
    """Bias torques h(q, qd) (nv,): Coriolis, centrifugal and gravity (rnea with qdd = 0)."""
    q, qd = check_state(model, q, qd=qd)
    return rnea_fast(model, q, qd, jnp.zeros_like(qd))


@jit(one_state=True)
def generalized_gravity(model: Model, q):
    """Gravity torques g(q) (nv,) (rnea with qd = qdd = 0)."""
    q = check_state(model, q)
    z = jnp.zeros(model.nv, q.dtype)
    return rnea_fast(model, q, z, z)


@jit(one_state=True)
def kinetic_energy(model: Model, q, qd):
    """T = 1/2 sum_i v_i . I_i v_i + 1/2 sum_k armature_k qd_k^2 (= 1/2 qd^T M qd)."""
    q, qd = check_state(model, q, qd=qd)
    tk = tree_kinematics(model, q)
    inertia = world_inertias(model, tk)
    v = body_velocities_from(model, tk, qd)
    return 0.5 * jnp.sum(v * spatial.inertia_apply(*inertia, v)) + 0.5 * jnp.sum(model.armature * qd**2)


@jit(one_state=True)
def potential_energy(model: Model, q):
    """V = -sum_i m_i g . c_i (zero at the world origin)."""
    q = check_state(model, q)
    return -jnp.sum(model.mass) * jnp.dot(model.gravity, center_of_mass_from(model, tree_kinematics(model, q)))


@filter_jit(one_state=True)
def momentum(model: Model, q, qd, about: str = "world"):
    """Spatial momentum (6,) ``(linear, angular)`` in world axes.

    ``about="world"``: angular momentum about the world origin; ``about="com"``: about the
    centre of mass (the centroidal momentum h_G).
    """
    q, qd = check_state(model, q, qd=qd)
    tk = tree_kinematics(model, q)
    h = momentum_matrix_from(model, tk) @ qd
    return _about(model, tk, h, about)


@jit(one_state=True)
def center_of_mass_jacobian(model: Model, q):
    """Jacobian (3, nv) of the centre of mass: ``c_dot = J_com @ qd``.

    Column k is the linear momentum that velocity coordinate k alone gives the subtree it
    moves, divided by the total mass: ``(m_sub v_k + w_k x h_sub) / m``.
    """
    q = check_state(model, q)
    tk = tree_kinematics(model, q)
    return momentum_matrix_from(model, tk)[:3] / jnp.sum(model.mass)


@jit(one_state=True)
def centroidal_momentum_matrix(model: Model, q):
    """A_G (6, nv) with h_G = A_G qd: momentum about the CoM in world axes (Orin et al. 2013)."""
    q = check_state(model, q)
    tk = tree_kinematics(model, q)
    return _about(model, tk, momentum_matrix_from(model, tk), "com")


def _about(model, tk, h, about):
    if about == "world":
        return h
    if about == "com":
        # shift the moment from the world origin to the CoM: k_G = k_O - c x l
        c = center_of_mass_from(model, tk)
        lin, ang = h[:3], h[3:]
        shift = jnp.cross(jnp.broadcast_to(c, lin.T.shape), lin.T).T
        return jnp.concatenate([lin, ang - shift], axis=0)
    raise ValueError(f"unknown reference {about!r}; use 'world' or 'com'")
