"""Contacts between bodies: spheres and capsules as segments with a radius, the pairs that may
touch, and their contacts.

A sphere is a segment of length zero and a capsule the points within its radius of a segment,
so every pair is one formula: the closest points c1, c2 of the two segments (Ericson,
*Real-Time Collision Detection*, 2005, Sec. 5.1.9: clamped to both segments), then the two
spheres around them. Its contact, as MuJoCo's ``mj_collision`` reports it:

    n = (c2 - c1) / |c2 - c1|   (from the first shape to the second),
    depth = r1 + r2 - |c2 - c1|,
    point = c1 + (r1 - depth / 2) n   (midway between the two surfaces).

For segments that are not parallel the closest points are unique, so these are MuJoCo's
numbers to rounding; for exactly parallel overlapping capsules MuJoCo reports two contacts at
the overlap's ends, this formula one (at the end of the first segment's overlap). The branches
are ``jnp.where`` on data with guarded divisions: the same program for every pose, and no NaN
in its derivatives where a segment has zero length or the centres coincide.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..model.model import Model
from ..spatial import matvec
from .ground import Contacts


class BodyPairs(eqx.Module):
    """Segments with radii on a model's bodies, and which pairs of them may touch.

    **Fields:** ``body`` (static, k body indices), ``start``, ``end`` (k, 3): each segment's ends
    in its body's frame (equal for a sphere), ``radius`` (k,); ``first``, ``second`` (static, p
    shape indices): the pairs (MuJoCo's order: the normal points from ``first`` to ``second``).
    The arrays are leaves: sizes and placements are differentiable.
    """

    body: tuple = eqx.field(static=True)
    start: jnp.ndarray
    end: jnp.ndarray
    radius: jnp.ndarray
    first: tuple = eqx.field(static=True)
    second: tuple = eqx.field(static=True)

    def __len__(self):
        return len(self.first)

    def contacts(self, R, p) -> Contacts:
        """The contact of every pair (touching or not: ``depth`` < 0 is minus the gap) at the
        bodies' world poses ``R`` (nb, 3, 3), ``p`` (nb, 3)."""
        body = np.asarray(self.body)
        a, b = (matvec(R[body], x) + p[body] for x in (self.start, self.end))
        i, j = np.asarray(self.first), np.asarray(self.second)
        return segment_contacts(a[i], b[i], self.radius[i], a[j], b[j], self.radius[j])


def _ratio(num, den):
    """num / den clamped to [0, 1], 0 where den is 0 (a zero-length segment); NaN-free derivatives."""
    ok = den > 0
    return jnp.where(ok, jnp.clip(num / jnp.where(ok, den, 1.0), 0.0, 1.0), 0.0)


def closest_points(p1, q1, p2, q2):
    """Parameters ``(s, t)`` in [0, 1] of the closest points ``p1 + s (q1 - p1)`` and
    ``p2 + t (q2 - p2)`` of the segments [p1, q1] and [p2, q2] ((k, 3) each), Ericson's clamping:
    t from s on the first segment's line (clamped), then s again from the clamped t."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e = jnp.sum(d1 * d1, -1), jnp.sum(d2 * d2, -1)
    b, c, f = jnp.sum(d1 * d2, -1), jnp.sum(d1 * r, -1), jnp.sum(d2 * r, -1)
    denom = a * e - b * b  # >= 0; 0 for parallel segments: then s = 0 (a point of the first)
    s = _ratio(b * f - c * e, denom)
    t_free = (b * s + f) / jnp.where(e > 0, e, 1.0)
    t = jnp.where(e > 0, jnp.clip(t_free, 0.0, 1.0), 0.0)
    # t clamped (or the second segment a point): s again, for the clamped t
    s = jnp.where((e > 0) & (t_free >= 0.0) & (t_free <= 1.0), s, _ratio(b * t - c, a))
    return s, t


def segment_contacts(p1, q1, r1, p2, q2, r2) -> Contacts:
    """Contacts (module docstring) of the capsules (segments [p1, q1], radii r1) and
    [p2, q2], r2, pair by pair; all (k, 3) or (k,), world frame. Coincident centres get the
    normal +z."""
    s, t = closest_points(p1, q1, p2, q2)
    c1 = p1 + s[:, None] * (q1 - p1)
    c2 = p2 + t[:, None] * (q2 - p2)
    gap = c2 - c1
    dist2 = jnp.sum(gap * gap, -1)
    apart = dist2 > 0
    dist = jnp.where(apart, jnp.sqrt(jnp.where(apart, dist2, 1.0)), 0.0)
    n = jnp.where(apart[:, None], gap / jnp.where(apart, dist, 1.0)[:, None], jnp.asarray([0.0, 0.0, 1.0], gap.dtype))
    depth = r1 + r2 - dist
    return Contacts(depth, n, c1 + (r1 - 0.5 * depth)[:, None] * n)


def body_pairs(model: Model, shapes, pairs=None, exclude=()) -> BodyPairs:
    """Spheres and capsules on ``model``'s bodies, and the pairs that may touch.

    ``shapes``: ``(body, shape)`` pairs as for :func:`mbjax.contact.contact_points`, each shape a
    :func:`mbjax.contact.sphere` or :func:`mbjax.contact.capsule`. ``pairs``: the pairs of
    shape indices to test (MuJoCo's explicit ``<pair>``); default every two shapes except those
    on one body or on a body and its parent (MuJoCo's default filters: a joint's two bodies
    overlap by design), nor on bodies named together in ``exclude`` (pairs of body names or
    indices, MuJoCo's ``<exclude>``).
    """
    body, start, end, radius = [], [], [], []
    for k, (b, (centres, radii)) in enumerate(shapes):
        centres, radii = np.asarray(centres, float), np.asarray(radii, float)
        if len(radii) not in (1, 2) or np.any(radii <= 0) or radii[0] != radii[-1]:
            raise ValueError(f"shape {k}: body pairs take spheres and capsules (contact.sphere, contact.capsule); "
                             "boxes, meshes and points touch the ground only")
        body.append(model.body_index(b))
        start.append(centres[0])
        end.append(centres[-1])
        radius.append(radii[0])
    if pairs is None:
        parents = model.topology.parents
        excluded = {frozenset((model.body_index(x), model.body_index(y))) for x, y in exclude}
        pairs = [(i, j) for i in range(len(body)) for j in range(i + 1, len(body))
                 if body[i] != body[j] and parents[body[i]] != body[j] and parents[body[j]] != body[i]
                 and frozenset((body[i], body[j])) not in excluded]
    pairs = [(int(i), int(j)) for i, j in pairs]
    if not pairs:
        raise ValueError("body_pairs: no pair of shapes may touch (each pair is on one body, a body and its parent, "
                         "or excluded); give pairs= explicitly")
    for i, j in pairs:
        if not (0 <= i < len(body) and 0 <= j < len(body)) or body[i] == body[j]:
            raise ValueError(f"pair ({i}, {j}): shape indices must be below {len(body)} and on two different bodies")
    dtype = model.dtype
    return BodyPairs(tuple(body), jnp.asarray(np.array(start), dtype), jnp.asarray(np.array(end), dtype),
                     jnp.asarray(np.array(radius), dtype), tuple(i for i, _ in pairs), tuple(j for _, j in pairs))
