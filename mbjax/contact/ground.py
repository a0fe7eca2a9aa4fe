"""The ground: a plane of settable height and slope, and the contacts of candidate spheres
(:mod:`mbjax.contact.shapes`) with it (a grid of heights: :mod:`mbjax.contact.heightfield`)."""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class Plane(eqx.Module):
    """The half-space below ``normal . x = offset`` is solid; ``normal`` (3,) is a unit vector
    pointing out of the ground. Both are leaves (differentiable)."""

    normal: jnp.ndarray = eqx.field(converter=jnp.asarray)
    offset: jnp.ndarray = eqx.field(converter=jnp.asarray)

    def __check_init__(self):
        if self.normal.shape != (3,) or self.offset.shape != ():
            raise ValueError(f"Plane: normal must be (3,) and offset a scalar; got {self.normal.shape}, "
                             f"{self.offset.shape}")
        if not isinstance(self.normal, jax.core.Tracer) and abs(float(jnp.linalg.norm(self.normal)) - 1) > 1e-9:
            raise ValueError("Plane: normal must be a unit vector; divide it by its norm")

    def contacts(self, centres, radius) -> "Contacts":
        """:func:`plane_contacts` of spheres with world centres ``centres`` (k, 3) and ``radius`` (k,)."""
        return plane_contacts(self, centres, radius)

    @classmethod
    def horizontal(cls, height=0.0, dtype=jnp.float64):
        """The plane z = ``height``."""
        return cls(jnp.asarray([0.0, 0.0, 1.0], dtype), jnp.asarray(height, dtype))

    @classmethod
    def slope(cls, angle, height=0.0, dtype=jnp.float64):
        """A plane through (0, 0, ``height``) rising along +x at ``angle`` (rad): its normal is
        (-sin angle, 0, cos angle)."""
        a = float(angle)
        if not abs(a) < np.pi / 2:
            raise ValueError(f"a slope's angle must be within (-pi/2, pi/2) rad; got {a}")
        n = jnp.asarray([-np.sin(a), 0.0, np.cos(a)], dtype)
        return cls(n, jnp.asarray(height * np.cos(a), dtype))


class Contacts(NamedTuple):
    """Contacts of k candidate spheres with a surface, each row whether touching or not."""

    depth: jnp.ndarray  # (k,) penetration (> 0 when touching); minus the gap otherwise
    normal: jnp.ndarray  # (k, 3) unit normal out of the surface, world frame
    point: jnp.ndarray  # (k, 3) midway between the sphere's deepest point and the surface


def plane_contacts(plane: Plane, centres, radius) -> Contacts:
    """Contacts of spheres with world centres ``centres`` (k, 3) and ``radius`` (k,).

    The sphere's deepest point is c - r n, at signed distance d = n . c - offset - r from the
    plane; depth = -d, and the point is c - r n - (d / 2) n (MuJoCo's contact position).
    """
    n = plane.normal
    dist = centres @ n - plane.offset - radius
    point = centres - (radius + 0.5 * dist)[:, None] * n
    return Contacts(-dist, jnp.broadcast_to(n, centres.shape), point)
