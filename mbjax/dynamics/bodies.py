"""Per-body terms shared by the recursive algorithms, all in the world frame."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import spatial
from ..kinematics import TreeKinematics, body_velocities_from, joint_bias
from ..model.model import Model
from ..model.tree import as_index, take


class BodyTerms(NamedTuple):
    inertia: tuple  # world inertias (m (nb,), h (nb, 3), I_O (nb, 3, 3))
    v: jax.Array  # (nb, 6) spatial velocities
    c: jax.Array  # (nb, 6) velocity-product accelerations v_i x v_J,i + Ad(c_J,i)
    p: jax.Array  # (nb, 6) bias forces v_i x* I_i v_i - f_ext,i


def world_inertias(model: Model, tk: TreeKinematics):
    return spatial.world_inertia(model.mass, model.com, model.inertia, tk.R, tk.p)


def gravity_acceleration(model: Model):
    """Spatial acceleration (-g, 0) of the world: gravity enters as an upward base acceleration."""
    return jnp.concatenate([-model.gravity, jnp.zeros(3, model.gravity.dtype)])


def external_forces(model: Model, tk: TreeKinematics, f_ext):
    """Body-frame wrenches (nb, 6) -> world frame. ``f_ext[i]`` acts on body i and is given
    as ``(force, moment about the body-frame origin)`` in body-frame axes, as in Pinocchio."""
    f_ext = jnp.asarray(f_ext, tk.p.dtype)
    if f_ext.shape != (model.nbodies, 6):
        raise ValueError(
            f"f_ext has shape {f_ext.shape}; expected ({model.nbodies}, 6): one body-frame wrench "
            "(force, moment) per body, in model.body_names order"
        )
    return spatial.transform_force(tk.R, tk.p, f_ext)


def external_forces_or_zero(model: Model, f_ext, dtype):
    """``f_ext`` as an (nbodies, 6) array, zeros when None (for functions that need an array)."""
    if f_ext is None:
        return jnp.zeros((model.nbodies, 6), dtype)
    return jnp.asarray(f_ext, dtype)


def body_terms(model: Model, tk: TreeKinematics, q, qd, f_ext=None) -> BodyTerms:
    inertia = world_inertias(model, tk)
    v = body_velocities_from(model, tk, qd)
    # sum of S_k qd_k over the coordinates of each joint, a static gather per column of the
    # bodies' coordinates (a segment sum's scatter is a loop of its own in XLA)
    Sqd = jnp.concatenate([tk.S * qd[:, None], jnp.zeros((1, 6), qd.dtype)])
    vJ = functools.reduce(jnp.add, [take(Sqd, as_index(dofs)) for dofs in model.topology.body_dofs.T])
    c = spatial.cross_motion(v, vJ)
    if model.topology.has_bias:
        c = c + spatial.transform_motion(tk.R, tk.p, joint_bias(model, q, qd))
    p = spatial.cross_force(v, spatial.inertia_apply(*inertia, v))
    if f_ext is not None:
        p = p - external_forces(model, tk, f_ext)
    return BodyTerms(inertia, v, c, p)
