"""A multibody system described with building-block joints (Sayers 1991, Step 1: system
description), its composite bodies (Eqs. 15-18) and the categories of Tables 5 and 6.

Build one with :class:`KaneBuilder`; bodies are added parent first, so the tree is
regularly labelled. The categories are decided once, at build time, from the numbers given:

- translation (Table 5): *nonrecursive* with three translations; *fixed* when the composite
  mass centre cannot move in the parent (no translation, and no rotation, or the mass centre
  on the single rotation axis, or at the origin of a multi-rotation joint); else *recursive*.
  The paper's special 2-translation nonrecursive case is not detected: two translations are
  recursive here (a valid choice of speeds, only less sparse).
- rotation (Table 6): *nonrecursive* with three rotations; *rotor* with no rotation, or one
  rotation and an inertia symmetric about the axis; else *recursive*.

A fixed body's composite mass is lumped into its parent's composite body, as a point mass at
its composite mass centre (Eqs. 15-17); its rotational inertia stays with it. Numerically only
"fixed" changes the computation; "rotor" matters for symbolic sparsity (Eq. 19: the inertia is
constant in the parent's axes), which a numeric code written in N's axes does not exploit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..model.builder import check_inertia
from .joints import BuildingBlockJoint, joint_motion, nominal_orientation
from .tree import KaneTree


class KaneSystem(eqx.Module):
    """Bodies joined by building-block joints; static structure, array leaves for numbers.

    **Leaves** (nb bodies): ``joint_point`` (nb, 3) r^{A0 Bj} in the parent's axes;
    ``directions`` (nb, 3, 3) translation directions as rows (parent axes, unused rows zero);
    ``nominal_rotation`` (nb, 3, 3) R0 of Table 3; ``mass`` (nb,), ``com`` (nb, 3) (body
    axes, from B0), ``inertia`` (nb, 3, 3) about the body's own mass centre, body axes;
    ``gravity`` (3,) in N (zero for a satellite).

    Coordinates q and speeds u have one entry per joint degree of freedom, body by body,
    translations before rotations.
    """

    tree: KaneTree = eqx.field(static=True)
    joints: tuple = eqx.field(static=True)
    categories: tuple = eqx.field(static=True)  # (translation, rotation) category per body
    joint_point: jax.Array
    directions: jax.Array
    nominal_rotation: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    gravity: jax.Array

    @property
    def nbodies(self) -> int:
        return self.tree.nbodies

    @property
    def nq(self) -> int:
        return self.tree.nu

    @property
    def nu(self) -> int:
        return self.tree.nu

    @property
    def body_names(self) -> tuple:
        return self.tree.body_names

    @property
    def parents(self) -> tuple:
        return self.tree.parents

    def q_slice(self, body: str | int) -> slice:
        """Slice of q (and u) of a body's joint."""
        b = self.body_names.index(body) if isinstance(body, str) else int(body)
        start = sum(j.nq for j in self.joints[:b])
        return slice(start, start + self.joints[b].nq)

    def __repr__(self):
        rows = ", ".join(f"{n}({t}/{r})" for n, (t, r) in zip(self.body_names, self.categories))
        return f"KaneSystem(nq={self.nq}, bodies: {rows})"


# ----------------------------------------------------------------------- builder
@dataclass
class _Body:
    name: str
    parent: int
    joint: BuildingBlockJoint
    joint_point: np.ndarray
    directions: np.ndarray
    R0: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray


class KaneBuilder:
    """Describe a tree body by body with building-block joints (Table 1), then ``build()``.

    Example (the pendulum of a clock hanging from N)::

        b = KaneBuilder(gravity=(0, 0, -9.81))
        b.add_body("arm", rotations=(1,), d_rot=(1, 0, 0), d_ref=(0, 1, 0),
                   mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.01]))
        system = b.build()
    """

    def __init__(self, gravity=(0.0, 0.0, 0.0), tolerance: float = 1e-12):
        """``tolerance`` (m): how close to a rotation axis a mass centre must be for the body
        to be *fixed* (Table 5), and the relative tolerance of the rotor test (Table 6)."""
        self.gravity = np.asarray(gravity, dtype=float).reshape(3)
        self.tolerance = tolerance
        self._bodies: list[_Body] = []

    def add_body(self, name: str, parent: str | None = None, *, joint_point=(0.0, 0.0, 0.0), translations=(),
                 rotations=(), d_rot=None, d_ref=None, mass: float = 0.0, com=(0.0, 0.0, 0.0),
                 inertia=None) -> "KaneBuilder":
        """Add body ``name`` joined to ``parent`` (``None``: N) by a building-block joint.

        **Arguments:**

        - ``joint_point`` (3,): r^{A0 Bj}, parent axes.
        - ``translations``: 0-3 directions fixed in the parent (parent axes; normalised).
        - ``rotations``: 0-3 body-axis indices (1, 2, 3) of successive rotations, e.g.
          ``(1, 2, 3)`` for the satellite bus.
        - ``d_rot``, ``d_ref`` (parent axes): first rotation axis and reference direction
          (Table 3). Default: the parent's axis ``i1`` and the next one, i.e. R0 = identity.
          Without rotations they may still re-orient B (with ``i1 = 1``).
        - ``mass``, ``com`` (3,) (body axes, from B0), ``inertia`` (3, 3) about the mass
          centre, body axes. Massless bodies (mass 0, inertia 0) are allowed.
        """
        names = [b.name for b in self._bodies]
        if name in names:
            raise ValueError(f"a body named {name!r} already exists")
        if parent is not None and parent not in names:
            raise ValueError(f"parent {parent!r} of body {name!r} does not exist; add the parent first")
        trans = np.asarray(translations, dtype=float).reshape(-1, 3) if len(translations) else np.zeros((0, 3))
        joint = BuildingBlockJoint(len(trans), tuple(int(i) for i in rotations))
        if len(trans) and np.any(np.linalg.norm(trans, axis=1) == 0):
            raise ValueError(f"translation directions of {name!r} must be nonzero")
        if len(trans):
            trans = trans / np.linalg.norm(trans, axis=1, keepdims=True)  # unit vectors d_t
        if np.linalg.matrix_rank(trans) < len(trans) if len(trans) else False:
            raise ValueError(f"translation directions of {name!r} are linearly dependent")
        i1 = joint.rotation_axes[0] if joint.rotation_axes else 1
        eye = np.eye(3)
        d_rot = eye[i1 - 1] if d_rot is None else d_rot
        d_ref = eye[i1 % 3] if d_ref is None else d_ref
        directions = np.zeros((3, 3))
        directions[: len(trans)] = trans
        inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
        check_inertia(float(mass), inertia, name)
        self._bodies.append(_Body(name, -1 if parent is None else names.index(parent), joint,
                                  np.asarray(joint_point, dtype=float).reshape(3), directions,
                                  nominal_orientation(i1, d_rot, d_ref), float(mass),
                                  np.asarray(com, dtype=float).reshape(3), inertia))
        return self

    def build(self, dtype=None) -> KaneSystem:
        """The :class:`KaneSystem`, with the categories of Tables 5 and 6 decided."""
        if not self._bodies:
            raise ValueError("add at least one body before build()")
        bodies = self._bodies
        nb = len(bodies)
        fixed = [False] * nb
        comp = [None] * nb  # (mass, com, inertia about com) of the composite bodies
        for i in reversed(range(nb)):  # children before parents
            kids = [c for c in range(nb) if bodies[c].parent == i and fixed[c]]
            comp[i] = _lump(_own(bodies[i]), [(comp[c][0], _in_parent(bodies[c], comp[c][1])) for c in kids])
            fixed[i] = _is_fixed(bodies[i].joint, comp[i][1], self.tolerance)
        categories = tuple((_translation_category(b.joint, f), _rotation_category(b.joint, c[2], self.tolerance))
                           for b, f, c in zip(bodies, fixed, comp))
        speed_body, kinds, axes = [], [], []
        for i, b in enumerate(bodies):
            speed_body += [i] * b.joint.nq
            kinds += b.joint.speed_kinds
            axes += b.joint.speed_axes
        tree = KaneTree(tuple(b.name for b in bodies), tuple(b.parent for b in bodies), tuple(speed_body),
                        tuple(kinds), tuple(axes), tuple(fixed))

        def arr(x):
            return jnp.asarray(np.asarray(x), dtype=dtype or jnp.result_type(float))

        return KaneSystem(tree, tuple(b.joint for b in bodies), categories,
                          arr([b.joint_point for b in bodies]), arr([b.directions for b in bodies]),
                          arr([b.R0 for b in bodies]), arr([b.mass for b in bodies]), arr([b.com for b in bodies]),
                          arr([b.inertia for b in bodies]), arr(self.gravity))


def _own(b: _Body):
    return b.mass, b.com, b.inertia


def _in_parent(b: _Body, x):
    """A point fixed in B's composite mass centre, in the parent's axes (for a fixed body the
    composite mass centre does not move with its joint, so the nominal pose places it)."""
    return b.joint_point + b.R0 @ x


def _is_fixed(joint: BuildingBlockJoint, x, tol):
    """Table 5, "fixed": the composite mass centre x (body axes) is fixed in the parent."""
    if joint.n_translations:
        return False
    if joint.n_rotations == 0:
        return True
    if joint.n_rotations == 1:
        a = np.eye(3)[joint.rotation_axes[0] - 1]
        return bool(np.linalg.norm(np.cross(x, a)) <= tol)
    return bool(np.linalg.norm(x) <= tol)


def _translation_category(joint: BuildingBlockJoint, fixed):
    return "nonrecursive" if joint.n_translations == 3 else ("fixed" if fixed else "recursive")


def _rotation_category(joint: BuildingBlockJoint, inertia, tol):
    """Table 6; the rotor test: inertia = I_a a a^T + I_t (E - a a^T) for the spin axis a."""
    if joint.n_rotations == 3:
        return "nonrecursive"
    if joint.n_rotations == 0:
        return "rotor"
    if joint.n_rotations == 1:
        a = np.eye(3)[joint.rotation_axes[0] - 1]
        ia = a @ inertia @ a
        it = 0.5 * (np.trace(inertia) - ia)
        sym = ia * np.outer(a, a) + it * (np.eye(3) - np.outer(a, a))
        if np.abs(inertia - sym).max() <= tol * max(np.abs(inertia).max(), 1.0):
            return "rotor"
    return "recursive"


# ------------------------------------------------------------- composite bodies
def _lump(own, kids):
    """Composite mass (Eq. 15), mass centre (Eq. 16) and inertia about it (Eqs. 17-18).

    ``own = (m, x, I)``: the body's mass, mass centre and inertia about it; ``kids``: (mass,
    mass centre) of the fixed children's composites, in the body's axes. The printed Eq. (17)
    shifts only the children; the body's own inertia is shifted to the composite mass centre
    too (Table 2: ``I_B11 + M_B P1^2 + M_C (L2 - P1)^2``). Works on NumPy (build time) and
    JAX arrays (inside jit, differentiable).
    """
    m, x, I = own
    xp = jnp if isinstance(m, jax.Array) or any(isinstance(k[0], jax.Array) for k in kids) else np
    masses = [m] + [k[0] for k in kids]
    points = [x] + [k[1] for k in kids]
    total = sum(masses)
    moment = sum(mi * xi for mi, xi in zip(masses, points))
    safe = xp.where(total > 0, total, 1.0)
    X = xp.where(total > 0, moment / safe, xp.zeros(3))
    eye = xp.eye(3)
    Ic = 0.5 * (I + I.T)
    for mi, xi in zip(masses, points):
        d = xi - X
        Ic = Ic + mi * (xp.dot(d, d) * eye - xp.outer(d, d))  # parallel axes
    return total, X, Ic


class CompositeBodies(NamedTuple):
    """Inertia of every body as it enters Kane's equations (body axes)."""

    mass: jax.Array  # (nb,) composite mass m^{Bc}, Eq. (15)
    mass_prime: jax.Array  # (nb,) m^{B'} of Eq. (41): 0 for fixed bodies (lumped into the parent)
    com: jax.Array  # (nb, 3) composite mass centre B* from B0, Eq. (16)
    inertia: jax.Array  # (nb, 3, 3) composite inertia about B*, Eqs. (17)-(18)
    ref: jax.Array  # (nb, 3) composite mass centre with lumping (speeds of 3-translation joints)


def composite_bodies(system: KaneSystem, lump: bool = True) -> CompositeBodies:
    """The composite bodies of Eqs. (15)-(18) (``lump=True``), or every body's own mass, mass
    centre and inertia (``lump=False``: the same motion, computed without the
    simplification; ``ref`` is the lumped composite mass centre in both cases, since the
    speeds of a three-translation joint are its velocity components, Table 2)."""
    nb, parents, fixed = system.nbodies, system.parents, system.tree.fixed
    comp = [None] * nb
    for i in reversed(range(nb)):
        kids = [c for c in range(nb) if parents[c] == i and fixed[c]]
        lumped = [(comp[c][0], system.joint_point[c] + spatial.matvec(system.nominal_rotation[c], comp[c][1]))
                  for c in kids]
        comp[i] = _lump((system.mass[i], system.com[i], system.inertia[i]), lumped)
    ref = jnp.stack([c[1] for c in comp])
    if not lump:
        inertia = 0.5 * (system.inertia + jnp.swapaxes(system.inertia, -1, -2))
        return CompositeBodies(system.mass, system.mass, system.com, inertia, ref)
    mass = jnp.stack([c[0] for c in comp])
    return CompositeBodies(mass, jnp.where(jnp.asarray(fixed), 0.0, mass), ref, jnp.stack([c[2] for c in comp]), ref)


def check_system_state(system: KaneSystem, **vectors):
    """Input checks of the public functions: shapes at trace time (Python exceptions),
    non-finite values inside jit (one ``eqx.error_if``). Returns the vectors as arrays."""
    out = []
    for name, x in vectors.items():
        x = jnp.asarray(x, dtype=system.mass.dtype)
        if x.shape != (system.nq,):
            raise ValueError(f"{name} has shape {x.shape}; the system expects ({system.nq},) "
                             "(one entry per joint degree of freedom). For a batch, use jax.vmap.")
        out.append(x)
    bad = jnp.any(jnp.stack([~jnp.all(jnp.isfinite(x)) for x in out]))
    out = eqx.error_if(tuple(out), bad, f"{', '.join(vectors)} contain NaN or infinite values")
    return out


# -------------------------------------------------------------------------- poses
def system_poses(system: KaneSystem, q):
    """Orientation (nb, 3, 3) and origin (nb, 3) of every body in N, and the N-axes direction
    of every joint motion (nu, 3): rotation axes (Table 4's d_r2 for second rotations) and
    translation directions."""
    Rs, ps, axes = [], [], []
    eye = jnp.eye(3, dtype=q.dtype)
    for b, joint in enumerate(system.joints):
        sl = system.q_slice(b)
        R, p, rot_axes = joint_motion(joint, system.joint_point[b], system.directions[b],
                                      system.nominal_rotation[b], q[sl])
        a = system.parents[b]
        RA, pA = (eye, jnp.zeros(3, q.dtype)) if a < 0 else (Rs[a], ps[a])
        Rs.append(RA @ R)
        ps.append(pA + RA @ p)
        local = jnp.concatenate([system.directions[b][: joint.n_translations], rot_axes])
        axes.append(spatial.matvec(RA, local))
    return jnp.stack(Rs), jnp.stack(ps), jnp.concatenate(axes) if axes else jnp.zeros((0, 3), q.dtype)
