"""Dynamic parameters: the ten inertial parameters of each body, rotor inertia and friction, and
their layout in the parameter vector ``theta`` of ``tau = Y(q, qd, qdd) theta``.

**Inertial parameters** of a body, in its body frame (the frame of its joint), in Pinocchio's
order (``pin.Inertia.toDynamicParameters``)::

    pi = (m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)

where ``c`` is the centre of mass and ``I`` the rotational inertia **about the body-frame
origin**, ``I = I_c + m (|c|^2 E - c c^T)``. The joint torques are linear in ``pi`` (the
Model's ``(mass, com, inertia about the CoM)`` are not: ``com = h / m``).

**Joint parameters** (one per velocity coordinate):

- ``armature`` ``I_a``: rotor inertia reflected to the joint, ``tau += I_a qdd`` (the Model's
  ``armature`` leaf);
- ``viscous`` ``F_v``: viscous friction, ``tau += F_v qd`` (the Model's ``damping`` leaf, which
  :func:`mbjax.simulate` applies as ``-damping qd``);
- ``coulomb`` ``F_c``: Coulomb friction, ``tau += F_c sign(qd)`` (not a Model leaf: it lives in
  :class:`DynamicParameters` only).

A :class:`ParameterLayout` says which groups ``theta`` holds, in the order inertial (bodies in
``model.body_names`` order, ten each), armature, viscous, Coulomb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from ..model.model import Model

#: names of the ten inertial parameters of a body, in their order in ``theta``
INERTIAL_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
#: joint parameter groups, in their order in ``theta`` after the inertial parameters
JOINT_GROUPS = ("armature", "viscous", "coulomb")

# (row, column) of I_xx, I_xy, I_yy, I_xz, I_yz, I_zz in the 3x3 inertia
SYM_ROWS = (0, 0, 1, 0, 1, 2)
SYM_COLS = (0, 1, 1, 2, 2, 2)


class DynamicParameters(NamedTuple):
    """Every dynamic parameter of a model, grouped.

    - ``inertial`` (nb, 10): see :data:`INERTIAL_NAMES`;
    - ``armature``, ``viscous``, ``coulomb`` (nv,): rotor inertia, viscous and Coulomb friction.
    """

    inertial: jax.Array
    armature: jax.Array
    viscous: jax.Array
    coulomb: jax.Array


def symmetric_from_parameters(x):
    """The symmetric 3x3 matrices of ``(xx, xy, yy, xz, yz, zz)`` (..., 6) -> (..., 3, 3)."""
    xx, xy, yy, xz, yz, zz = (x[..., k] for k in range(6))
    return jnp.stack([jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1), jnp.stack([xz, yz, zz], -1)], -2)


def inertial_parameters(mass, com, inertia):
    """The ten inertial parameters (..., 10) of bodies of mass ``mass`` (...,), centre of mass
    ``com`` (..., 3) and rotational inertia about the CoM ``inertia`` (..., 3, 3).

    ``I_O = I_c + m (|c|^2 E - c c^T)`` (parallel-axis theorem).
    """
    mass, com, inertia = jnp.asarray(mass), jnp.asarray(com), jnp.asarray(inertia)
    eye = jnp.eye(3, dtype=com.dtype)
    IO = 0.5 * (inertia + spatial.transpose(inertia)) + mass[..., None, None] * (
        jnp.sum(com * com, -1)[..., None, None] * eye - com[..., :, None] * com[..., None, :])
    sym = IO[..., SYM_ROWS, SYM_COLS]
    return jnp.concatenate([mass[..., None], mass[..., None] * com, sym], axis=-1)


def inertia_from_parameters(pi):
    """``(mass, com, inertia about the CoM)`` of inertial parameters ``pi`` (..., 10).

    The inverse of :func:`inertial_parameters`; needs ``m != 0``.
    """
    m, h = pi[..., 0], pi[..., 1:4]
    c = h / m[..., None]
    eye = jnp.eye(3, dtype=pi.dtype)
    IO = symmetric_from_parameters(pi[..., 4:10])
    Ic = IO - m[..., None, None] * (jnp.sum(c * c, -1)[..., None, None] * eye - c[..., :, None] * c[..., None, :])
    return m, c, Ic


def world_inertia_from_parameters(pi, R, p):
    """World inertia ``(m, h, I_O)`` (see :mod:`mbjax.spatial`) of a body with inertial
    parameters ``pi`` (..., 10) whose frame has pose ``(R, p)`` in the world. Linear in ``pi``.

    With ``h_b = m c`` and ``I_b`` about the body origin, ``x = p + R r``:
    ``h = R h_b + m p`` and
    ``I_O = R I_b R^T - [p]x [R h_b]x - [R h_b]x [p]x - m [p]x [p]x``.
    """
    m = pi[..., 0]
    Rh = spatial.matvec(R, pi[..., 1:4])
    Ib = symmetric_from_parameters(pi[..., 4:10])
    P, H = spatial.skew(p), spatial.skew(Rh)
    IO = (spatial.matmul(spatial.matmul(R, Ib), spatial.transpose(R)) - spatial.matmul(P, H)
          - spatial.matmul(H, P) - m[..., None, None] * spatial.matmul(P, P))
    return m, Rh + m[..., None] * p, IO


def dynamic_parameters(model: Model, coulomb=None) -> DynamicParameters:
    """The dynamic parameters of ``model``: inertial parameters of its bodies, its
    ``armature``, its ``damping`` as viscous friction, and ``coulomb`` (nv,) (default zero)."""
    coulomb = jnp.zeros_like(model.armature) if coulomb is None else jnp.asarray(coulomb, model.dtype)
    if coulomb.shape != (model.nv,):
        raise ValueError(f"coulomb has shape {coulomb.shape}; expected ({model.nv},), one per velocity coordinate")
    return DynamicParameters(inertial_parameters(model.mass, model.com, model.inertia), model.armature,
                             model.damping, coulomb)


def with_dynamic_parameters(model: Model, params: DynamicParameters) -> Model:
    """``model`` with the masses, centres of mass, inertias, armature and damping (viscous
    friction) of ``params``. Coulomb friction is not part of a Model and is dropped; every
    body needs a non-zero mass."""
    if params.inertial.shape != (model.nbodies, 10):
        raise ValueError(f"params.inertial has shape {params.inertial.shape}; expected ({model.nbodies}, 10)")
    mass, com, inertia = inertia_from_parameters(params.inertial)
    return eqx.tree_at(lambda m: (m.mass, m.com, m.inertia, m.armature, m.damping), model,
                       (mass, com, inertia, params.armature, params.viscous))


@dataclass(frozen=True)
class ParameterLayout:
    """Which parameters the vector ``theta`` holds, and where.

    Build it with :meth:`of`. ``theta`` = the ten inertial parameters of every body (in
    ``body_names`` order), then, for the groups switched on, one value per velocity
    coordinate: armature, viscous friction, Coulomb friction.
    """

    body_names: tuple
    dof_names: tuple
    armature: bool = True
    viscous: bool = False
    coulomb: bool = False

    @classmethod
    def of(cls, model: Model, *, armature: bool = True, viscous: bool = False, coulomb: bool = False):
        """The layout for ``model``. With the defaults ``Y theta == rnea`` exactly (the Model's
        armature is part of rnea); ``viscous`` and ``coulomb`` add friction columns."""
        dofs = []
        for j, name in enumerate(model.joint_names):
            n = model.topology.joints[j].nv
            dofs += [name] if n == 1 else [f"{name}[{k}]" for k in range(n)]
        return cls(tuple(model.body_names), tuple(dofs), armature, viscous, coulomb)

    @property
    def nbodies(self) -> int:
        return len(self.body_names)

    @property
    def nv(self) -> int:
        return len(self.dof_names)

    @property
    def groups(self) -> tuple:
        """The joint parameter groups present, in order."""
        return tuple(g for g in JOINT_GROUPS if getattr(self, g))

    @property
    def size(self) -> int:
        return 10 * self.nbodies + self.nv * len(self.groups)

    @property
    def names(self) -> tuple:
        """A name for every entry of ``theta``, e.g. ``"mx[link3]"``, ``"viscous[joint2]"``."""
        out = [f"{p}[{b}]" for b in self.body_names for p in INERTIAL_NAMES]
        for g in self.groups:
            out += [f"{g}[{d}]" for d in self.dof_names]
        return tuple(out)

    def pack(self, params: DynamicParameters):
        """``theta`` (size,) from :class:`DynamicParameters` (groups not in the layout are left out)."""
        parts = [jnp.reshape(params.inertial, (-1,))] + [getattr(params, g) for g in self.groups]
        theta = jnp.concatenate([jnp.asarray(x) for x in parts])
        if theta.shape != (self.size,):
            raise ValueError(f"parameters of sizes {[jnp.shape(x) for x in parts]} do not fit a layout of "
                             f"{self.nbodies} bodies and {self.nv} velocity coordinates")
        return theta

    def unpack(self, theta) -> DynamicParameters:
        """:class:`DynamicParameters` from ``theta`` (size,); groups not in the layout are zero."""
        theta = jnp.asarray(theta)
        if theta.shape != (self.size,):
            raise ValueError(f"theta has shape {theta.shape}; this layout expects ({self.size},): "
                             f"10 x {self.nbodies} inertial + {self.nv} x {list(self.groups)}")
        n = 10 * self.nbodies
        joint = {g: jnp.zeros(self.nv, theta.dtype) for g in JOINT_GROUPS}
        for k, g in enumerate(self.groups):
            joint[g] = theta[n + k * self.nv: n + (k + 1) * self.nv]
        return DynamicParameters(theta[:n].reshape(self.nbodies, 10), **joint)
