"""Loop closures: cut joints that close kinematic loops of a tree Model (Mufti 1983 Sec. 4).

A closed-chain mechanism is a spanning tree (the :class:`~mbjax.Model`) plus ``n*`` cut
joints (Mufti's ``C* `` columns of the incidence matrix C_c = (C, C*), Eq. 62). Each cut joint
joins a *joint frame A* fixed on body a to a *joint frame B* fixed on body b (either body may
be the world) and removes some of the six relative motions of B with respect to A:

============  =====  ======================================================================
joint type    rows   constrained directions (axes of joint frame A, at coincidence)
============  =====  ======================================================================
spherical       3    x y z          (origins coincide)
revolute        5    x y z rx ry    (origins coincide, z axes aligned; free: rotation about z)
universal       4    x y z rz       (origins coincide, x_A is perpendicular to y_B)
cylindrical     4    x y rx ry      (B's origin on A's z axis, z axes aligned)
prismatic       5    x y rx ry rz   (B's origin on A's z axis, same orientation)
weld            6    x y z rx ry rz (the frames coincide)
============  =====  ======================================================================

The joint axis is the z axis of the joint frames (for a universal joint: x of A and y of B);
the builder turns a user-given ``axis`` into those placements. ``directions`` keeps a subset
of the rows, e.g. ``("x", "y")`` for a revolute loop joint of a planar mechanism, whose other
rows hold identically and only make the constraint Jacobian rank-deficient.

:class:`LoopClosures` is a pytree kept beside the Model: the placements are array leaves (so
gradients flow into them), everything that sets shapes is static.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..model.builder import as_rotation, as_unit, as_vector
from ..model.model import Model

#: constrained directions of each cut-joint type, in the order of the residual's rows
JOINT_ROWS = {
    "spherical": ("x", "y", "z"),
    "revolute": ("x", "y", "z", "rx", "ry"),
    "universal": ("x", "y", "z", "rz"),
    "cylindrical": ("x", "y", "rx", "ry"),
    "prismatic": ("x", "y", "rx", "ry", "rz"),
    "weld": ("x", "y", "z", "rx", "ry", "rz"),
}


class LoopClosures(eqx.Module):
    """Cut joints closing the loops of a tree Model.

    **Static:** ``names``, ``joint_types`` (keys of :data:`JOINT_ROWS`), ``bodies`` (pairs
    ``(a, b)`` of body indices, ``-1`` = world), ``directions`` (the kept rows of each joint).

    **Leaves** (``nl`` closures): ``rotation_a`` (nl, 3, 3), ``translation_a`` (nl, 3): pose
    of joint frame A in body a; ``rotation_b``, ``translation_b``: pose of joint frame B in
    body b.
    """

    names: tuple = eqx.field(static=True)
    joint_types: tuple = eqx.field(static=True)
    bodies: tuple = eqx.field(static=True)
    directions: tuple = eqx.field(static=True)
    rotation_a: jax.Array
    translation_a: jax.Array
    rotation_b: jax.Array
    translation_b: jax.Array

    @property
    def nloops(self) -> int:
        return len(self.names)

    @property
    def nc(self) -> int:
        """Number of constraint rows (length of the residual Phi)."""
        return sum(len(d) for d in self.directions)

    @property
    def row_loops(self) -> tuple:
        """Index of the closure each row of Phi belongs to."""
        return tuple(i for i, ds in enumerate(self.directions) for _ in ds)

    @property
    def row_names(self) -> tuple:
        """``"loop/direction"`` for every row of Phi, in order."""
        return tuple(f"{n}/{d}" for n, ds in zip(self.names, self.directions) for d in ds)

    def __repr__(self):
        loops = ", ".join(f"{n} ({t}, {len(d)} rows)" for n, t, d in zip(self.names, self.joint_types, self.directions))
        return f"LoopClosures(nc={self.nc}: {loops})"


class LoopClosureBuilder:
    """Collect cut joints for a Model, then ``build()`` a :class:`LoopClosures`.

    Example (a four-bar linkage whose coupler tip is pinned to the rocker tip)::

        lb = LoopClosureBuilder(model)
        lb.add_loop("pin", "revolute", "coupler", "rocker", translation_a=(0.8, 0, 0),
                    translation_b=(0.6, 0, 0), axis=(0, 0, 1), directions=("x", "y"))
        closures = lb.build()
    """

    def __init__(self, model: Model):
        self.model = model
        self._loops: list = []

    def add_loop(
        self,
        name: str,
        joint: str,
        frame_a: str | None,
        frame_b: str | None,
        *,
        rotation_a=None,
        translation_a=(0.0, 0.0, 0.0),
        rotation_b=None,
        translation_b=(0.0, 0.0, 0.0),
        axis=(0.0, 0.0, 1.0),
        axis2=(0.0, 1.0, 0.0),
        directions=None,
    ) -> "LoopClosureBuilder":
        """Add a cut joint between joint frame A on ``frame_a`` and joint frame B on ``frame_b``.

        **Arguments:**

        - ``name``: a unique name; ``joint``: one of ``spherical, revolute, universal,
          cylindrical, prismatic, weld``.
        - ``frame_a``, ``frame_b``: a body or frame name of the model (frames of merged fixed
          links work), or ``None`` for the world.
        - ``rotation_a`` (3, 3), ``translation_a`` (3,): pose of joint frame A in that frame;
          likewise ``rotation_b``, ``translation_b``. Frames A and B coincide (up to the
          joint's free motion) when the loop is closed.
        - ``axis``: the joint axis in joint frame A's axes (revolute, cylindrical, prismatic;
          for universal the axis fixed in A); ``axis2``: the universal joint's axis fixed in B,
          in B's axes. They must be perpendicular.
        - ``directions``: the rows to keep (a subset of the joint's, see the module table);
          all by default.
        """
        if name in (lp[0] for lp in self._loops):
            raise ValueError(f"a loop closure named {name!r} already exists")
        if joint not in JOINT_ROWS:
            raise ValueError(f"unknown loop joint type {joint!r}; use one of {', '.join(JOINT_ROWS)}")
        rows = JOINT_ROWS[joint]
        directions = rows if directions is None else tuple(directions)
        bad = [d for d in directions if d not in rows]
        if bad or not directions or len(set(directions)) != len(directions):
            raise ValueError(
                f"directions {directions} of loop {name!r} must be distinct and among the {joint} rows {rows}"
            )
        directions = tuple(d for d in rows if d in directions)  # residual order
        body_a, Ra, pa = self._attach(frame_a, rotation_a, translation_a, f"A of loop {name!r}")
        body_b, Rb, pb = self._attach(frame_b, rotation_b, translation_b, f"B of loop {name!r}")
        if body_a == body_b:
            raise ValueError(f"loop {name!r} joins body {frame_a!r} to itself; a cut joint needs two bodies")
        align = _axis_alignment(joint, as_unit(axis, f"axis of loop {name!r}"), as_unit(axis2, f"axis2 of loop {name!r}"), name)
        # joint frame B gets the same alignment expressed in B (for a universal joint, the
        # second axis is mapped to y): the frames coincide whenever the user's frames do
        self._loops.append((name, joint, (body_a, body_b), directions, Ra @ align, pa, Rb @ align, pb))
        return self

    def _attach(self, frame, rotation, translation, what):
        """Body index of ``frame`` and the joint frame's pose in that body."""
        R = np.eye(3) if rotation is None else as_rotation(rotation, f"rotation of joint frame {what}")
        p = as_vector(translation, 3, f"translation of joint frame {what}")
        if frame is None:
            return -1, R, p
        f = self.model.frame_index(frame)
        Rf = np.asarray(self.model.frame_rotation[f])
        pf = np.asarray(self.model.frame_translation[f])
        return int(self.model.topology.frame_bodies[f]), Rf @ R, pf + Rf @ p

    def build(self, dtype=None) -> LoopClosures:
        """The :class:`LoopClosures` (``dtype`` defaults to the model's)."""
        if not self._loops:
            raise ValueError("no loop closures were added; use add_loop(...)")
        dtype = self.model.dtype if dtype is None else dtype
        names, types, bodies, directions, Ra, pa, Rb, pb = zip(*self._loops)

        def arr(x):
            return jnp.asarray(np.stack(x), dtype=dtype)

        return LoopClosures(names, types, bodies, directions, arr(Ra), arr(pa), arr(Rb), arr(pb))


def _axis_alignment(joint, axis, axis2, name):
    """Rotation whose z column is ``axis`` (universal: x column ``axis``, y column ``axis2``)."""
    if joint == "universal":
        if abs(axis @ axis2) > 1e-9:
            raise ValueError(f"axis and axis2 of universal loop {name!r} must be perpendicular")
        return np.stack([axis, axis2, np.cross(axis, axis2)], 1)
    helper = np.eye(3)[np.argmin(np.abs(axis))]  # the world axis least parallel to the joint axis
    x = np.cross(helper, axis)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(axis, x), axis], 1)
