"""Static structure that drives Kane's recursions: bodies, their speeds and where the
recursions restart (Sayers 1991, Tables 5-7, 9).

The recursions of Tables 7 and 9 run down the tree, each body adding its own terms to its
parent's. A *nonrecursive* body restarts them: the angular velocity of a body with three
rotations is ``u_{o+1} b_1 + u_{o+2} b_2 + u_{o+3} b_3`` whatever its parent does (Table 7),
and the mass-centre velocity of a body with three translations is ``u_{o+1} b_1 + ...``
(Table 9). Unrolled, the value for body B is therefore a sum of per-body terms over B's
*chain*: B and its ancestors up to the nearest nonrecursive one (inclusive), or up to N. The
chains are stored as 0/1 matrices, so each recursion is one matrix product over all bodies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..model.topology import Topology
from .joints import BODY_ROTATION, BODY_TRANSLATION, ROTATION, TRANSLATION

KINDS = (ROTATION, TRANSLATION, BODY_ROTATION, BODY_TRANSLATION)


@dataclass(frozen=True, eq=False)
class KaneTree:
    """Bodies (``parents[i] < i``, -1 = N), the kind and body axis of each speed, and which
    bodies are *fixed* (Table 5: their mass is lumped into the parent's composite body).

    ``speed_kinds[k]``: one of ``rotation``, ``translation`` (u = q', recursive),
    ``body_rotation``, ``body_translation`` (nonrecursive, along body axis
    ``speed_axes[k]``). Speeds of one body are contiguous, translations before rotations.
    """

    body_names: tuple
    parents: tuple
    speed_body: tuple
    speed_kinds: tuple
    speed_axes: tuple
    fixed: tuple

    def __post_init__(self):
        nb = len(self.parents)
        if not (len(self.body_names) == len(self.fixed) == nb):
            raise ValueError("body_names, parents and fixed differ in length")
        if not (len(self.speed_body) == len(self.speed_kinds) == len(self.speed_axes)):
            raise ValueError("speed_body, speed_kinds and speed_axes differ in length")
        if any(k not in KINDS for k in self.speed_kinds):
            raise ValueError(f"unknown speed kind in {self.speed_kinds}; known: {KINDS}")
        if list(self.speed_body) != sorted(self.speed_body):
            raise ValueError("the speeds of a body must be contiguous, in body order")

    @functools.cached_property
    def _key(self):
        return (self.body_names, self.parents, self.speed_body, self.speed_kinds, self.speed_axes, self.fixed)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return self is other or (isinstance(other, KaneTree) and self._key == other._key)

    # ------------------------------------------------------------------------ sizes
    @property
    def nbodies(self) -> int:
        return len(self.parents)

    @property
    def nu(self) -> int:
        return len(self.speed_kinds)

    @functools.cached_property
    def topology(self) -> Topology:
        """The tree as an mbjax Topology (for its tree relations: the ancestor matrix)."""
        nb = self.nbodies
        return Topology("kane", tuple(self.body_names), tuple(self.parents), tuple(self.body_names),
                        ("building_block",) * nb, (), ())

    @functools.cached_property
    def parent_index(self) -> np.ndarray:
        """Parent of each body, with N as row ``nb`` (for gathers from arrays padded by N)."""
        return np.array([p if p >= 0 else self.nbodies for p in self.parents], dtype=np.int32)

    # ------------------------------------------------------------------- speed masks
    def _mask(self, kind):
        return np.array([k == kind for k in self.speed_kinds], dtype=float)

    @functools.cached_property
    def masks(self):
        """0/1 per speed for each kind, as a dict."""
        return {kind: self._mask(kind) for kind in KINDS}

    @functools.cached_property
    def axis_selector(self) -> np.ndarray:
        """(nu, 3) one-hot body axis of the nonrecursive speeds (zero rows elsewhere)."""
        S = np.zeros((self.nu, 3))
        for k, j in enumerate(self.speed_axes):
            if j >= 0:
                S[k, j] = 1.0
        return S

    @functools.cached_property
    def own(self) -> np.ndarray:
        """(nb, nu): 1 where speed k belongs to body b."""
        O = np.zeros((self.nbodies, self.nu))
        O[list(self.speed_body), np.arange(self.nu)] = 1.0
        return O

    @functools.cached_property
    def preceding_rotations(self) -> np.ndarray:
        """(nu, nu): 1 where speed l is a recursive rotation of the same joint before speed k
        (the axis of rotation k turns with the rotations before it in the joint)."""
        P = np.zeros((self.nu, self.nu))
        for k in range(self.nu):
            for l in range(k):
                if self.speed_body[l] == self.speed_body[k] and self.speed_kinds[l] == ROTATION:
                    P[k, l] = 1.0
        return P

    # ---------------------------------------------------------------- categories
    def _has(self, kind):
        out = np.zeros(self.nbodies, dtype=bool)
        for b, k in zip(self.speed_body, self.speed_kinds):
            out[b] |= k == kind
        return out

    @functools.cached_property
    def nonrecursive_rotation(self) -> np.ndarray:
        """Bodies whose angular velocity is their own speeds only (Table 6)."""
        return self._has(BODY_ROTATION)

    @functools.cached_property
    def nonrecursive_translation(self) -> np.ndarray:
        """Bodies whose mass-centre velocity is their own speeds only (Table 5)."""
        return self._has(BODY_TRANSLATION)

    def _chains(self, restart):
        """C[b, a] = 1 for a = b or an ancestor of b with no restarting body on the path from
        b up to a, a excluded: the ancestor matrix A less what a restart r blocks,
        A @ diag(restart) @ (A - E)."""
        A = self.topology.ancestors
        blocked = A @ np.diag(np.asarray(restart, float)) @ (A - np.eye(self.nbodies))
        return A * (blocked == 0)

    @functools.cached_property
    def rotation_chain(self) -> np.ndarray:
        """(nb, nb): C[b, a] = 1 if body a's rotational terms enter body b's (Table 7)."""
        return self._chains(self.nonrecursive_rotation)

    @functools.cached_property
    def translation_chain(self) -> np.ndarray:
        """(nb, nb): C[b, a] = 1 if body a's translational terms enter body b's (Table 9)."""
        return self._chains(self.nonrecursive_translation)

    @functools.cached_property
    def chain_root(self) -> np.ndarray:
        """Bodies that start a translational chain (nonrecursive, or child of N): where the
        acceleration remainder of N, -g (Eq. 39), enters."""
        return self.nonrecursive_translation | (np.asarray(self.parents) < 0)
