"""Kane's dynamical equations M u' = f (Sayers 1991, Eq. 2): the mass matrix (Eq. 40), the force
array (Eq. 42), solved by Cholesky, for building-block systems and for the Kane terms of any
tree; plus the system's momentum and kinetic energy.

    M_ij = sum_B  omega_j^B . I^{B*} . omega_i^B + m^{B'} v_j^{B*} . v_i^{B*}            (40)
    f_i  = sum_B (T^B - alpha_rem^B . I^{B*} - omega^B x I^{B*} . omega^B) . omega_i^B
                 + (F^B - m^{B'} a_rem^{B*}) . v_i^{B*}                                 (42)

Gravity is not an applied force: it is in a_rem, through a_rem^N = -g (Eq. 39). The
partial (angular) velocities are dense (nb, nu, 3) arrays, so M costs O(nb nu^2): Kane's
method as the paper uses it, not a recursive O(n) algorithm.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from .partial_velocities import KaneKinematics, coordinate_rates_from, system_kinematics
from .system import KaneSystem, check_system_state, composite_bodies


class KaneDynamics(NamedTuple):
    """Kane's equations at one state: M u' = f and S q' = v solved."""

    mass_matrix: jax.Array  # (nu, nu), Eq. (40)
    forces: jax.Array  # (nu,) force array f, Eq. (42), applied generalized forces included
    u_dot: jax.Array  # (nu,)
    q_dot: jax.Array  # (nq,)


def world_inertias(kin: KaneKinematics, inertia):
    """Inertias about the composite mass centres (nb, 3, 3), in N's axes: R I R^T."""
    return spatial.matmul(spatial.matmul(kin.R, inertia), spatial.transpose(kin.R))


def mass_matrix_from(kin: KaneKinematics, mass, inertia_n):
    """Eq. (40) from the partial (angular) velocities; ``inertia_n`` in N's axes."""
    rot = jnp.einsum("bkx,bxy,bly->kl", kin.partial_omega, inertia_n, kin.partial_omega)
    trans = jnp.einsum("b,bkx,blx->kl", mass, kin.partial_v, kin.partial_v)
    M = rot + trans
    return 0.5 * (M + M.T)


def force_array_from(kin: KaneKinematics, mass, inertia_n, f_ext=None):
    """Eq. (42). ``f_ext`` (nb, 6): optional wrench on each body, (force, moment about the
    body origin B0) in body axes; it enters as a force at B* and the moment about B*
    (Eq. 13)."""
    h = spatial.matvec(inertia_n, kin.omega)
    torque = -(spatial.matvec(inertia_n, kin.alpha_rem) + jnp.cross(kin.omega, h))
    force = -mass[:, None] * kin.a_rem
    if f_ext is not None:
        F = spatial.matvec(kin.R, f_ext[:, :3])
        force = force + F
        torque = torque + spatial.matvec(kin.R, f_ext[:, 3:]) + jnp.cross(kin.p - kin.point, F)
    return jnp.einsum("bkx,bx->k", kin.partial_omega, torque) + jnp.einsum("bkx,bx->k", kin.partial_v, force)


def solve(M, f):
    """u' from M u' = f by Cholesky (M is symmetric positive definite when every speed moves
    some mass)."""
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(M), f)


def _check_f_ext(system: KaneSystem, f_ext):
    if f_ext is None:
        return None
    f_ext = jnp.asarray(f_ext, system.mass.dtype)
    if f_ext.shape != (system.nbodies, 6):
        raise ValueError(f"f_ext has shape {f_ext.shape}; expected ({system.nbodies}, 6): one (force, moment "
                         "about B0) per body, in body axes, in system.body_names order")
    return f_ext


@eqx.filter_jit
def kane_dynamics(system: KaneSystem, q, u, forces=None, f_ext=None, lump: bool = True) -> KaneDynamics:
    """Kane's equations of a building-block system: M u' = f and S q' = v, solved.

    **Arguments:**

    - ``q``, ``u`` (nq,): coordinates and speeds (the paper's choice of speeds, see
      :class:`~mbjax.kane.BuildingBlockJoint`).
    - ``forces`` (nq,): generalized active forces added to f; for a speed u = q' this is
      the joint's torque or force (acting on B, reacting on its parent).
    - ``f_ext`` (nb, 6): wrench on each body, (force, moment about B0) in body axes.
    - ``lump``: use the composite bodies (Eqs. 15-18); ``False`` gives the same motion
      computed body by body.

    **Returns:** :class:`KaneDynamics` (M, f, u', q').
    """
    if forces is None:
        q, u = check_system_state(system, q=q, u=u)
        forces = jnp.zeros_like(u)
    else:
        q, u, forces = check_system_state(system, q=q, u=u, forces=forces)
    bodies = composite_bodies(system, lump)
    kin = system_kinematics(system, q, u, lump, bodies)
    inertia_n = world_inertias(kin, bodies.inertia)
    M = mass_matrix_from(kin, bodies.mass_prime, inertia_n)
    f = force_array_from(kin, bodies.mass_prime, inertia_n, _check_f_ext(system, f_ext)) + forces
    return KaneDynamics(M, f, solve(M, f), coordinate_rates_from(system, kin, u))


@eqx.filter_jit
def kane_momentum(system: KaneSystem, q, u):
    """Linear momentum and angular momentum about N's origin, (6,) ``(linear, angular)`` in
    N's axes: sum over composite bodies of m v^{B*} and I^{B*} . omega^B + r^{B*} x m v^{B*}."""
    q, u = check_system_state(system, q=q, u=u)
    bodies = composite_bodies(system)
    kin = system_kinematics(system, q, u, bodies=bodies)
    lin = bodies.mass_prime[:, None] * kin.v
    ang = spatial.matvec(world_inertias(kin, bodies.inertia), kin.omega) + jnp.cross(kin.point, lin)
    return jnp.concatenate([lin.sum(0), ang.sum(0)])


@eqx.filter_jit
def kane_kinetic_energy(system: KaneSystem, q, u):
    """T = 1/2 u^T M u."""
    q, u = check_system_state(system, q=q, u=u)
    bodies = composite_bodies(system)
    kin = system_kinematics(system, q, u, bodies=bodies)
    return 0.5 * u @ mass_matrix_from(kin, bodies.mass_prime, world_inertias(kin, bodies.inertia)) @ u
