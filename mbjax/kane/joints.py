"""Sayers' building-block joint (Sayers 1991, Table 1, Eq. 14; Tables 3 and 4).

A building-block joint moves body B relative to its parent A by

1. 0-3 translations ``q_t`` along directions ``d_t`` fixed in A, from the joint point B_j:
   ``r^{A0 B0} = r^{A0 Bj} + sum_t q_t d_t`` (Eq. 14);
2. then 0, 1 or 3 successive rotations about body axes with indices ``(i1, i2, i3)``
   (1-based, as in the paper). The first axis is ``d_rot``, fixed in A; a reference direction
   ``d_ref`` fixes the nominal orientation of B (Table 3): ``b_{i1} = d_rot``,
   ``b_{i1+2} = d_rot x d_ref`` (normalised), ``b_{i1+1} = b_{i1+2} x b_{i1}`` (indices mod 3).

The orientation of B in A is ``R = R0 Rot(e_{i1}, q_r1) Rot(e_{i2}, q_r2) Rot(e_{i3}, q_r3)``
with R0 the nominal orientation of Table 3: successive rotations about axes of the rotating
frame. The axis of the second rotation, expressed in B, is then ``Rot(e_{i3}, q_r3)^T e_{i2}``,
which is Table 4 (e.g. ``S3 b1 + C3 b2`` for i2 = 2, i3 = 3).

The paper allows 0, 1 or 3 rotations and represents two rotations by two joints with a massless
body between them; here two rotations are also accepted directly (both forms give the same
motion, see tests/test_kane.py).

Everything here is static structure (plain Python); the numbers (joint point, directions,
nominal orientation) are array leaves of :class:`mbjax.kane.KaneSystem`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .. import spatial

#: kinds of generalized speed (see mbjax.kane.partial_velocities):
#: u = q' of a rotation about an axis fixed in the parent (or the previous rotation's frame)
ROTATION = "rotation"
#: u = q' of a translation along a direction fixed in the parent
TRANSLATION = "translation"
#: u = component of the body's angular velocity along the body axis b_j (3-rotation joints)
BODY_ROTATION = "body_rotation"
#: u = component of the composite mass centre's velocity along b_j (3-translation joints)
BODY_TRANSLATION = "body_translation"


@dataclass(frozen=True)
class BuildingBlockJoint:
    """Static part of a building-block joint: how many translations, which rotation axes.

    ``n_translations`` in 0..3; ``rotation_axes``: 0 to 3 body-axis indices (1, 2 or 3).
    """

    n_translations: int = 0
    rotation_axes: tuple = ()

    def __post_init__(self):
        if self.n_translations not in (0, 1, 2, 3):
            raise ValueError(f"a building-block joint has 0 to 3 translations, not {self.n_translations}")
        if len(self.rotation_axes) > 3 or any(i not in (1, 2, 3) for i in self.rotation_axes):
            raise ValueError(f"rotation_axes must be 0 to 3 axis indices in (1, 2, 3); got {self.rotation_axes}")
        if any(a == b for a, b in zip(self.rotation_axes, self.rotation_axes[1:])):
            raise ValueError(f"successive rotations about the same axis are one rotation: {self.rotation_axes}")

    @property
    def n_rotations(self) -> int:
        return len(self.rotation_axes)

    @property
    def nq(self) -> int:
        return self.n_translations + self.n_rotations

    @property
    def speed_kinds(self) -> tuple:
        """Kind of each generalized speed, translations first (section "Speed Variables"):
        three translations are nonrecursive (speeds are composite mass-centre velocity
        components in B), three rotations too (angular-velocity components in B); otherwise
        the speeds are the coordinate rates."""
        trans = BODY_TRANSLATION if self.n_translations == 3 else TRANSLATION
        rot = BODY_ROTATION if self.n_rotations == 3 else ROTATION
        return (trans,) * self.n_translations + (rot,) * self.n_rotations

    @property
    def speed_axes(self) -> tuple:
        """Body-axis index (0-based) of each speed of a nonrecursive kind, -1 otherwise: the
        speeds of three rotations are omega^B . b_1, b_2, b_3 whatever the rotation sequence
        (Table 7: omega^B = u_{o+1} b_1 + u_{o+2} b_2 + u_{o+3} b_3)."""
        trans = (0, 1, 2) if self.n_translations == 3 else (-1,) * self.n_translations
        rot = (0, 1, 2) if self.n_rotations == 3 else (-1,) * self.n_rotations
        return trans + rot


def nominal_orientation(i1: int, d_rot, d_ref) -> np.ndarray:
    """Nominal orientation R0 (columns b_1, b_2, b_3 in the parent's axes), Table 3.

    ``b_{i1} = d_rot``, ``b_{i1+2} = d_rot x d_ref``, ``b_{i1+1} = b_{i1+2} x b_{i1}``
    (indices mod 3); ``d_ref`` need not be perpendicular to ``d_rot``, only not parallel.
    """
    d_rot = np.asarray(d_rot, dtype=float)
    d_ref = np.asarray(d_ref, dtype=float)
    if d_rot.shape != (3,) or d_ref.shape != (3,):
        raise ValueError("d_rot and d_ref are 3-vectors in the parent's axes")
    n = np.linalg.norm(d_rot)
    if not n > 0:
        raise ValueError("d_rot must be a nonzero vector")
    a = d_rot / n
    c = np.cross(a, d_ref)
    if np.linalg.norm(c) < 1e-9 * max(np.linalg.norm(d_ref), 1e-300):
        raise ValueError(f"d_ref {d_ref} is parallel to d_rot {d_rot}; it must fix the nominal orientation")
    c = c / np.linalg.norm(c)
    R0 = np.zeros((3, 3))
    k = i1 - 1
    R0[:, k] = a
    R0[:, (k + 2) % 3] = c
    R0[:, (k + 1) % 3] = np.cross(c, a)
    return R0


def joint_motion(joint: BuildingBlockJoint, joint_point, directions, R0, q):
    """Pose of B in A and the parent-frame axes of the joint's rotations, for one joint.

    **Arguments:** ``joint_point`` (3,), ``directions`` (3, 3) translation directions as rows
    (unused rows ignored), ``R0`` (3, 3), ``q`` (nq,) the joint's coordinates.

    **Returns:** ``R`` (3, 3), ``p`` (3,) (Eq. 14) and ``axes`` (n_rotations, 3): the axis of
    each rotation in A's axes (``d_rot`` first; the second one is Table 4's direction,
    expressed in A).
    """
    nt = joint.n_translations
    p = joint_point + jnp.einsum("t,ti->i", q[:nt], directions[:nt])
    R = R0
    axes = []
    eye = np.eye(3)
    for k, i in enumerate(joint.rotation_axes):
        e = jnp.asarray(eye[i - 1], q.dtype)
        axes.append(spatial.matvec(R, e))
        R = spatial.matmul(R, spatial.axis_angle_rotation(e, q[nt + k]))
    return R, p, (jnp.stack(axes) if axes else jnp.zeros((0, 3), q.dtype))
