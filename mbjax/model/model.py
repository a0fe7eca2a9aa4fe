"""The Model: a pytree whose topology is static and whose physical numbers are array leaves."""

from __future__ import annotations

import dataclasses
import difflib

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation import packed_argument
from .topology import Topology


@packed_argument
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Model:
    """A rigid multibody tree.

    Topology (parents, joint types, names, slices and counts) is static; every physical
    number is an array leaf, so ``jax.grad`` with respect to the model works and
    ``eqx.partition`` can select the parameters to identify. A frozen dataclass registered
    with JAX, which flattens it in C++: passing a model to a jitted function costs a third of
    what an ``eqx.Module``'s Python flattening did (talos_reduced: 6 against 10 µs per call).

    Bodies are indexed ``0 .. nbodies-1`` with ``parents[i] < i`` (``-1`` = world), in
    depth-first order with children in file order (Pinocchio's order). Every body has exactly
    one movable joint; fixed joints were merged by the builder and survive as frames.

    **Leaves** (``nb`` bodies, ``nf`` frames):

    - ``joint_rotation`` (nb, 3, 3), ``joint_translation`` (nb, 3): pose of each joint frame in
      its parent body's frame (the body frame is the joint frame moved by the joint).
    - ``joint_axis`` (nb, 2, 3): joint axes in the joint frame (the second row is used by
      universal joints only).
    - ``mass`` (nb,), ``com`` (nb, 3), ``inertia`` (nb, 3, 3): mass, centre of mass and
      rotational inertia about the centre of mass, in the body frame.
    - ``armature`` (nv,): rotor inertia added to the diagonal of the mass matrix.
    - ``damping``, ``stiffness`` (nv,), ``spring_reference`` (nq,): joint viscous damping and
      spring, applied by :func:`mbjax.passive_forces` (zero and neutral by default).
    - ``lower``, ``upper`` (nq,): position limits (``+-inf`` when unlimited);
      ``velocity_limit``, ``effort_limit`` (nv,).
    - ``frame_rotation`` (nf, 3, 3), ``frame_translation`` (nf, 3): frame poses in their body.
    - ``gravity`` (3,): in the world frame, default (0, 0, -9.81) m/s^2.
    """

    topology: Topology = dataclasses.field(metadata=dict(static=True))
    joint_rotation: jax.Array
    joint_translation: jax.Array
    joint_axis: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    armature: jax.Array
    damping: jax.Array
    stiffness: jax.Array
    spring_reference: jax.Array
    lower: jax.Array
    upper: jax.Array
    velocity_limit: jax.Array
    effort_limit: jax.Array
    frame_rotation: jax.Array
    frame_translation: jax.Array
    gravity: jax.Array

    # ---------------------------------------------------------------- static accessors
    @property
    def name(self) -> str:
        return self.topology.name

    @property
    def nq(self) -> int:
        return self.topology.nq

    @property
    def nv(self) -> int:
        return self.topology.nv

    @property
    def nbodies(self) -> int:
        return self.topology.nbodies

    @property
    def nframes(self) -> int:
        return len(self.topology.frame_names)

    @property
    def parents(self) -> tuple:
        return self.topology.parents

    @property
    def body_names(self) -> tuple:
        return self.topology.body_names

    @property
    def joint_names(self) -> tuple:
        """Movable joints in q order."""
        return self.topology.joint_names

    @property
    def joint_types(self) -> tuple:
        return self.topology.joint_types

    @property
    def frame_names(self) -> tuple:
        return self.topology.frame_names

    @property
    def dtype(self):
        return self.mass.dtype

    def q_slice(self, joint: str | int) -> slice:
        """Slice of q belonging to a joint (by name or body index)."""
        i = self.joint_index(joint)
        return slice(self.topology.q_start[i], self.topology.q_start[i] + self.topology.joints[i].nq)

    def v_slice(self, joint: str | int) -> slice:
        """Slice of v (qd, qdd, tau) belonging to a joint (by name or body index)."""
        i = self.joint_index(joint)
        return slice(self.topology.v_start[i], self.topology.v_start[i] + self.topology.joints[i].nv)

    def joint_index(self, joint: str | int) -> int:
        return _lookup(joint, self.topology.joint_names, "joint")

    def body_index(self, body: str | int) -> int:
        return _lookup(body, self.topology.body_names, "body")

    def frame_index(self, frame: str | int) -> int:
        return _lookup(frame, self.topology.frame_names, "frame")

    def astype(self, dtype) -> "Model":
        """The same model with every floating-point leaf cast to ``dtype``."""
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=dtype), self)

    def __repr__(self):
        kinds = {}
        for t in self.joint_types:
            kinds[t] = kinds.get(t, 0) + 1
        joints = ", ".join(f"{n} {t}" for t, n in kinds.items())
        return (
            f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, nbodies={self.nbodies}, "
            f"nframes={self.nframes}, joints: {joints}, dtype={self.dtype})"
        )


def _lookup(key, names, what):
    if isinstance(key, (int, np.integer)):
        if not 0 <= key < len(names):
            raise IndexError(f"{what} index {key} out of range [0, {len(names)})")
        return int(key)
    try:
        return names.index(key)
    except ValueError:
        close = difflib.get_close_matches(key, names, n=5) or [n for n in names if key.lower() in n.lower()][:5]
        hint = f" Did you mean one of {close}?" if close else f" Known {what}s: {list(names)[:10]}"
        raise KeyError(f"no {what} named {key!r}.{hint}") from None
