"""A ground given as a grid of heights: the contacts of candidate spheres with it.

The grid ``heights`` (nrow, ncol) covers a rectangle of half sizes (hx, hy) centred at
(cx, cy): row i at y = cy - hy + 2 hy i / (nrow - 1), column j at x = cx - hx + 2 hx j / (ncol - 1),
height cz + heights[i, j] (MuJoCo's layout of an ``hfield``). Each cell is two triangles split
along its diagonal from (i, j) to (i + 1, j + 1), MuJoCo's triangulation: the surface is
MuJoCo's (equal to its ray casts on an hfield to 1e-15). Beyond the rectangle it continues at
the height of its edge (a plateau). A candidate sphere (centre c, radius r) meets the plane of
the triangle below its centre:

    h = z(cx, cy),  n = (-dz/dx, -dz/dy, 1) / |(-dz/dx, -dz/dy, 1)|,
    signed distance d = (c_z - h) n_z - r,  depth = -d,  point = c - (r + d / 2) n,

the exact contact while the sphere's deepest point lies over that triangle (a grid sampled
from a plane gives :func:`mbjax.contact.plane_contacts`' contacts); near an edge or a vertex
the neighbouring triangle's plane, which the sphere may reach first, is not consulted. The grid
is a leaf: gradients reach every height.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .ground import Contacts


class Heightfield(eqx.Module):
    """Ground heights on a grid (module docstring). **Fields:** ``heights`` (nrow, ncol), a
    leaf (m, above ``center``'s z); ``size`` (static): the half sizes (hx, hy) of the
    rectangle (m); ``center`` (static): its centre (cx, cy, cz)."""

    heights: jnp.ndarray = eqx.field(converter=jnp.asarray)
    size: tuple = eqx.field(static=True)
    center: tuple = eqx.field(static=True, default=(0.0, 0.0, 0.0))

    def __check_init__(self):
        shape = self.heights.shape
        if len(shape) != 2 or min(shape) < 2:
            raise ValueError(f"Heightfield: heights must be a (nrow, ncol) grid with at least 2 x 2 samples; got "
                             f"shape {shape}")
        if len(self.size) != 2 or not all(np.isfinite(s) and s > 0 for s in self.size):
            raise ValueError(f"Heightfield: size must be two positive half sizes (hx, hy) in m; got {self.size}")
        if len(self.center) != 3:
            raise ValueError(f"Heightfield: center must be (cx, cy, cz); got {self.center}")
        if not isinstance(self.heights, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(self.heights))):
            raise ValueError("Heightfield: heights must be finite")

    def height(self, xy):
        """Surface heights (k,) and slopes (k, 2) (dz/dx, dz/dy) at the points ``xy`` (k, 2)."""
        nrow, ncol = self.heights.shape
        (hx, hy), (cx, cy, cz) = self.size, self.center
        dx, dy = 2 * hx / (ncol - 1), 2 * hy / (nrow - 1)
        u = jnp.clip((xy[:, 0] - (cx - hx)) / dx, 0.0, ncol - 1)  # beyond the edges: the edge's height
        v = jnp.clip((xy[:, 1] - (cy - hy)) / dy, 0.0, nrow - 1)
        j = jnp.clip(jnp.floor(u), 0, ncol - 2).astype(jnp.int32)
        i = jnp.clip(jnp.floor(v), 0, nrow - 2).astype(jnp.int32)
        s, t = u - j, v - i
        H = self.heights
        h00, h01, h10, h11 = H[i, j], H[i, j + 1], H[i + 1, j], H[i + 1, j + 1]
        upper = s >= t  # the triangle (00, 01, 11), else (00, 10, 11)
        z = cz + h00 + jnp.where(upper, s * (h01 - h00) + t * (h11 - h01), t * (h10 - h00) + s * (h11 - h10))
        inside_x = (xy[:, 0] > cx - hx) & (xy[:, 0] < cx + hx)
        inside_y = (xy[:, 1] > cy - hy) & (xy[:, 1] < cy + hy)
        dzdx = jnp.where(inside_x, jnp.where(upper, h01 - h00, h11 - h10) / dx, 0.0)
        dzdy = jnp.where(inside_y, jnp.where(upper, h11 - h01, h10 - h00) / dy, 0.0)
        return z, jnp.stack([dzdx, dzdy], -1)

    def contacts(self, centres, radius) -> Contacts:
        """Contacts of spheres with world centres ``centres`` (k, 3) and ``radius`` (k,) (module
        docstring); ``depth`` < 0 is minus the gap."""
        z, slope = self.height(centres[:, :2])
        n = jnp.concatenate([-slope, jnp.ones_like(z)[:, None]], -1)
        n = n / jnp.linalg.norm(n, axis=-1, keepdims=True)
        dist = (centres[:, 2] - z) * n[:, 2] - radius
        return Contacts(-dist, n, centres - (radius + 0.5 * dist)[:, None] * n)
