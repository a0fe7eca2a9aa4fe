"""Collision shapes attached to bodies, reduced to the spheres that touch a plane first.

Against a plane (or any surface whose normal varies slowly), every convex shape here touches
first at one of a few candidate points: a sphere at its centre's foot, a capsule at one of the
two end spheres of its segment, a box at one of its eight corners, a point at itself. So each
shape is stored as candidate spheres (a centre in its body's frame and a radius; radius 0 for
corners and points), and detection (:mod:`mbjax.contact.ground`) is one vectorised formula over
all of them: no Python control flow on data, the same program for every pose.
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from scipy.spatial import ConvexHull, QhullError

from ..model.model import Model
from ..spatial import matvec


class ContactPoints(eqx.Module):
    """Candidate contact spheres of a model's collision shapes.

    **Fields:** ``body`` (static, k body indices), ``shape`` (static, k indices of the shape
    each candidate belongs to, in the order the shapes were given), ``position`` (k, 3): the
    centres in their bodies' frames, ``radius`` (k,). The arrays are leaves: sizes and
    placements are differentiable.
    """

    body: tuple = eqx.field(static=True)
    shape: tuple = eqx.field(static=True)
    position: jnp.ndarray
    radius: jnp.ndarray

    def __len__(self):
        return len(self.body)

    def centres(self, R, p):
        """World centres (k, 3) of the candidates at the bodies' world poses ``R`` (nb, 3, 3), ``p`` (nb, 3)."""
        body = np.asarray(self.body)
        return matvec(R[body], self.position) + p[body]


def _placement(rotation, translation):
    R = np.eye(3) if rotation is None else np.asarray(rotation, float)
    t = np.zeros(3) if translation is None else np.asarray(translation, float)
    if R.shape != (3, 3) or t.shape != (3,):
        raise ValueError(f"a shape's rotation must be (3, 3) and its translation (3,); got {R.shape} and {t.shape}")
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ValueError("a shape's rotation must be a proper rotation matrix (R R^T = I, det R = 1)")
    return R, t


def _positive(name, value):
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite; got {value}")
    return value


def sphere(radius, center=None):
    """A sphere of ``radius`` centred at ``center`` (3,) in its body's frame."""
    return np.zeros((1, 3)) + (0 if center is None else np.asarray(center, float)), np.array([_positive("radius", radius)])


def capsule(radius, half_length, rotation=None, translation=None):
    """A capsule: the points within ``radius`` of the segment from ``-half_length`` to
    ``+half_length`` along the z axis of the frame (``rotation``, ``translation``) in its body
    (MuJoCo's and URDF's convention)."""
    R, t = _placement(rotation, translation)
    h = _positive("half_length", half_length)
    ends = np.array([[0.0, 0.0, -h], [0.0, 0.0, h]]) @ R.T + t
    return ends, np.full(2, _positive("radius", radius))


def box(half_sizes, rotation=None, translation=None):
    """A box with half sizes (3,) along the axes of the frame (``rotation``, ``translation``)."""
    R, t = _placement(rotation, translation)
    hs = np.asarray(half_sizes, float)
    if hs.shape != (3,):
        raise ValueError(f"half_sizes must be (3,); got shape {hs.shape}")
    for h in hs:
        _positive("every half size of a box", h)
    corners = np.array(list(itertools.product((-1.0, 1.0), repeat=3))) * hs
    return corners @ R.T + t, np.zeros(8)


def mesh(vertices, rotation=None, translation=None, scale=(1.0, 1.0, 1.0)):
    """A mesh with ``vertices`` (n, 3), ``scale``d along the axes of its frame (``rotation``,
    ``translation``), by the vertices of its convex hull: the only points of it that can touch a
    plane first (MuJoCo collides meshes by their hulls too). A flat mesh keeps all its vertices."""
    R, t = _placement(rotation, translation)
    v = np.asarray(vertices, float) * np.asarray(scale, float)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"a mesh needs finite vertices of shape (n, 3); got shape {v.shape}")
    try:
        v = v[np.sort(ConvexHull(v).vertices)]
    except QhullError:  # flat, or fewer than four points
        v = np.unique(v, axis=0)
    return v @ R.T + t, np.zeros(len(v))


def point(position):
    """A point (a sphere of radius 0), e.g. a foot's contact point."""
    p = np.asarray(position, float)
    if p.shape != (3,):
        raise ValueError(f"a point must be (3,); got shape {p.shape}")
    return p[None], np.zeros(1)


def frame_points(model: Model, frames) -> ContactPoints:
    """Points at the origins of the named ``frames`` (e.g. a robot's feet, ``["FL_FOOT", ...]``)."""
    shapes = []
    for name in frames:
        f = model.frame_index(name)
        body = model.topology.frame_bodies[f]
        if body < 0:
            raise ValueError(f"frame {name!r} is fixed to the world; contact points belong on moving bodies")
        shapes.append((body, point(np.asarray(model.frame_translation[f]))))
    return contact_points(model, shapes)


def contact_points(model: Model, shapes) -> ContactPoints:
    """The candidate spheres of ``shapes``: a list of ``(body, shape)`` pairs, ``body`` a name or
    index of ``model`` and ``shape`` one of :func:`sphere`, :func:`capsule`, :func:`box`,
    :func:`point`, e.g. ``[("FL_FOOT", point((0, 0, 0))), ("base", box((0.2, 0.1, 0.05)))]``."""
    body, owner, position, radius = [], [], [], []
    for k, (b, (centres, radii)) in enumerate(shapes):
        i = model.body_index(b)
        body += [i] * len(radii)
        owner += [k] * len(radii)
        position.append(centres)
        radius.append(radii)
    if not body:
        raise ValueError("contact_points needs at least one (body, shape) pair")
    dtype = model.dtype
    return ContactPoints(tuple(body), tuple(owner), jnp.asarray(np.concatenate(position), dtype),
                         jnp.asarray(np.concatenate(radius), dtype))
