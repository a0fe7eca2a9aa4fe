"""Tree topology: the static structure of a model, and Mufti's graph matrices (1983, Sec. 2).

A model's bodies are numbered ``0 .. nb-1`` with ``parents[i] < i`` (``-1`` is the world), in
depth-first order with children in the order they were added (Pinocchio's order). Seen as
Mufti's directed tree, the world is the root vertex b_1, body ``i`` is vertex b_{i+2} and the
joint of body ``i`` is arc h_{i+1}: this numbering *is* a regular labeling, so the incidence
matrix C (Eq. 1) with its first row removed is upper triangular with -1 on the diagonal.

The recursive algorithms walk the tree by depth level ("all bodies of one depth at once"):
each level is a batch of bodies whose parents all lie in the previous level. The tables that
drive those passes are computed here once, in NumPy, and kept static in the model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


# --------------------------------------------------------------- Mufti 1983, Sec. 2
def regular_labeling(parents):
    """Relabel a directed tree so that it is regularly labelled (Mufti 1983, Sec. 2).

    Mufti: label the root 1, give the peripheral vertices (those with no outgoing arc) the
    highest numbers, remove them, and repeat. Every arc then points from a lower to a higher
    label, and the arc ending at vertex k gets label k - 1.

    **Arguments:** ``parents``: parent index of each vertex (``-1`` for the single root), in
    any labeling (0-based).

    **Returns:** ``order`` with ``order[k]`` = old index of the vertex whose new label is
    ``k`` (0-based), and the parents in the new labeling.
    """
    parents = [int(p) for p in parents]
    n = len(parents)
    roots = [i for i, p in enumerate(parents) if p < 0]
    if len(roots) != 1:
        raise ValueError(f"a directed tree has exactly one root; found {len(roots)}")
    for i, p in enumerate(parents):
        if p >= n:
            raise ValueError(f"vertex {i} has parent {p}, which does not exist")
    children = [[] for _ in range(n)]
    for i, p in enumerate(parents):
        if p >= 0:
            children[p].append(i)
    remaining = set(range(n))
    label_from_top = []  # vertices in order of decreasing label
    while remaining:
        peripheral = [i for i in sorted(remaining, reverse=True) if not any(c in remaining for c in children[i])]
        if not peripheral:
            raise ValueError("the parent list contains a cycle")
        label_from_top.extend(peripheral)
        remaining.difference_update(peripheral)
    order = label_from_top[::-1]
    if order[0] != roots[0]:
        raise ValueError("the parent list contains a cycle")
    new = {old: k for k, old in enumerate(order)}
    return order, [new[parents[old]] if parents[old] >= 0 else -1 for old in order]


def incidence_matrix(parents):
    """Incidence matrix C (n x n-1) of a regularly labelled tree, Mufti 1983 Eq. (1).

    ``C[i, j] = 1`` if vertex i is the initial vertex of arc j, ``-1`` if it is its final
    vertex. Arc j ends at vertex j + 1 (0-based).
    """
    parents = _check_regular(parents)
    n = len(parents)
    C = np.zeros((n, n - 1), dtype=int)
    for j in range(n - 1):
        C[parents[j + 1], j] = 1
        C[j + 1, j] = -1
    return C


def path_matrix(parents):
    """Path matrix T = S^-1 with S = (-e_1, C), Mufti 1983 Eqs. (22)-(25).

    Row 0 (T_1) is ``-1``; rows 1..n-1 (T_2) have ``T[j + 1, k] = -1`` when arc j lies on
    the path from the root to vertex k. Computed from the tree, not by inverting S.
    """
    parents = _check_regular(parents)
    n = len(parents)
    T = np.zeros((n, n), dtype=int)
    T[0, :] = -1
    for k in range(1, n):
        v = k
        while v > 0:  # arc v - 1 ends at vertex v
            T[v, k] = -1
            v = parents[v]
    return T


def _check_regular(parents):
    parents = [int(p) for p in parents]
    if not parents or parents[0] != -1 or any(not (0 <= p < i) for i, p in enumerate(parents[1:], 1)):
        raise ValueError(
            "expected a regularly labelled tree: parents[0] == -1 and 0 <= parents[i] < i; "
            "use regular_labeling() to relabel it"
        )
    return parents


# ---------------------------------------------------------------------------- Topology
@dataclass(frozen=True, eq=False)
class Topology:
    """Static description of a kinematic tree (no physical numbers: those live in Model)."""

    name: str
    body_names: tuple
    parents: tuple
    joint_names: tuple
    joint_types: tuple
    frame_names: tuple
    frame_bodies: tuple  # body each frame is attached to, -1 = world

    def __post_init__(self):
        nb = len(self.parents)
        for i, p in enumerate(self.parents):
            if not -1 <= p < i:
                raise ValueError(f"body {i} has parent {p}; parents must precede their children")
        if not (len(self.body_names) == len(self.joint_names) == len(self.joint_types) == nb):
            raise ValueError("body_names, joint_names, joint_types and parents differ in length")
        if len(self.frame_names) != len(self.frame_bodies):
            raise ValueError("frame_names and frame_bodies differ in length")

    # equality and hashing by value, hashed once (jit compares static data on every call)
    @functools.cached_property
    def _key(self):
        return (self.name, self.body_names, self.parents, self.joint_names, self.joint_types,
                self.frame_names, self.frame_bodies)

    @functools.cached_property
    def _hash(self):
        return hash(self._key)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Topology) and self._key == other._key)

    # ------------------------------------------------------------------ sizes and slices
    @property
    def nbodies(self):
        return len(self.parents)

    @functools.cached_property
    def joints(self):
        """Joint type objects, one per body."""
        from .joints import JOINT_TYPES

        return tuple(JOINT_TYPES[t] for t in self.joint_types)

    @functools.cached_property
    def q_start(self):
        return tuple(int(x) for x in np.cumsum([0] + [j.nq for j in self.joints])[:-1])

    @functools.cached_property
    def v_start(self):
        return tuple(int(x) for x in np.cumsum([0] + [j.nv for j in self.joints])[:-1])

    @functools.cached_property
    def nq(self):
        return sum(j.nq for j in self.joints)

    @functools.cached_property
    def nv(self):
        return sum(j.nv for j in self.joints)

    @functools.cached_property
    def dof_body(self):
        """Body of each velocity coordinate, (nv,)."""
        return np.repeat(np.arange(self.nbodies), [j.nv for j in self.joints]).astype(np.int32)

    @functools.cached_property
    def body_dofs(self):
        """Velocity coordinates of each body, (nb, the widest joint's nv), padded with nv."""
        dofs = np.full((self.nbodies, max((j.nv for j in self.joints), default=0)), self.nv, dtype=np.int32)
        for b, joint in enumerate(self.joints):
            dofs[b, :joint.nv] = np.arange(self.v_start[b], self.v_start[b] + joint.nv)
        return dofs

    @functools.cached_property
    def groups(self):
        """The bodies grouped by joint type (:class:`JointGroup`), in order of first appearance."""
        out = []
        for jt in dict.fromkeys(self.joints):
            bodies = np.array([i for i, j in enumerate(self.joints) if j is jt], dtype=np.int32)
            qi = np.array([[self.q_start[b] + k for k in range(jt.nq)] for b in bodies], dtype=np.int32)
            vi = np.array([[self.v_start[b] + k for k in range(jt.nv)] for b in bodies], dtype=np.int32)
            out.append(JointGroup(jt, bodies, qi.reshape(len(bodies), jt.nq), vi.reshape(len(bodies), jt.nv)))
        return tuple(out)

    @functools.cached_property
    def group_order(self):
        """Inverse permutations from the groups' rows concatenated back to q, v and body order
        (``None`` where that is the identity), by kind: ``"q"``, ``"v"``, ``"body"``."""
        return {kind: _inverse_permutation(np.concatenate([getattr(g, kind).reshape(-1) for g in self.groups]))
                for kind in ("q", "v", "body")} if self.groups else {}

    # ------------------------------------------------------------------- tree relations
    @functools.cached_property
    def depth(self):
        d = []
        for p in self.parents:
            d.append(0 if p < 0 else d[p] + 1)
        return tuple(d)

    @functools.cached_property
    def ancestors(self):
        """``A[i, j] = 1`` if body j is body i or one of its ancestors (nb x nb).

        Up to sign and the world row this is the transpose of Mufti's T_2 (Mufti 1983 Eq. 25):
        subtree sums are ``A.T @ x`` and sums along the path to the root are ``A @ x``.
        """
        nb = self.nbodies
        A = np.zeros((nb, nb))
        for i in range(nb):
            j = i
            while j >= 0:
                A[i, j] = 1.0
                j = self.parents[j]
        return A

    @functools.cached_property
    def dof_ancestors(self):
        """``A[i, k] = 1`` if velocity coordinate k moves body i (nb x nv)."""
        return self.ancestors[:, self.dof_body]

    @functools.cached_property
    def dof_pairs(self):
        """Coordinates in ancestor relation, as two (nv, nv) masks: ``below[k, j] = 1`` when
        body(j) is body(k) or one of its ancestors, ``above[k, j] = 1`` when body(k) is a strict
        ancestor of body(j). Entries of derivative matrices outside both are zero."""
        body = self.dof_body
        below = self.ancestors[body][:, body]
        above = below.T * (body[:, None] != body[None, :])
        return below, above

    @functools.cached_property
    def mass_entries(self):
        """The structurally nonzero entries of the mass matrix, each once: ``(k, l, index)``
        with M[k[e], l[e]] for body(l[e]) body(k[e]) or one of its ancestors (l[e] <= k[e] on
        one body), and ``index`` (nv, nv) the entry e of M[i, j] and of M[j, i] (len(k) for
        the zeros: coordinates on separate branches do not couple; Featherstone RBDA Sec. 6.3)."""
        nv, body = self.nv, self.dof_body
        below, _ = self.dof_pairs
        order = np.arange(nv)
        keep = (below > 0) & ((body[:, None] != body[None, :]) | (order[None, :] <= order[:, None]))
        k, l = np.nonzero(keep)
        index = np.full((nv, nv), len(k), dtype=np.int32)
        index[k, l] = index[l, k] = np.arange(len(k))
        return k.astype(np.int32), l.astype(np.int32), index

    @functools.cached_property
    def has_bias(self):
        return any(j.has_bias for j in self.joints)

    @functools.cached_property
    def doubling(self):
        """Ancestor tables for pointer doubling: entry s maps each body (and the world, row
        nb) to its 2^s-th ancestor, nb standing for the world. Used by ``compose_paths``."""
        nb = self.nbodies
        anc = np.array([p if p >= 0 else nb for p in self.parents] + [nb], dtype=np.int32)
        tables = []
        for _ in range(int(np.ceil(np.log2(max(self.depth) + 1))) if nb else 0):
            tables.append(anc)
            anc = anc[anc]
        return tuple(tables)

    # ----------------------------------------------------------------------- levels
    @functools.cached_property
    def levels(self):
        """Per depth level: a ``Level`` with the bodies and the padded table of their velocity
        coordinates (:meth:`sweep` lays the levels out in slots)."""
        nb, depth = self.nbodies, self.depth
        out = []
        for d in range(max(depth) + 1 if nb else 0):
            bodies = [i for i in range(nb) if depth[i] == d]
            width = max(self.joints[b].nv for b in bodies)
            dofs = self.body_dofs[bodies, :width]  # nv = padding
            out.append(Level(tuple(bodies), dofs, dofs == self.nv))
        return tuple(out)

    @functools.cached_property
    def sweep(self):
        """The levels below the roots, padded so that a pass over them is a ``lax.scan``
        (compiled once, whatever the depth): in at most :data:`MAX_RUNS` segments, each padded
        to its own width. See :class:`Sweep`. ``None`` for a model without bodies."""
        levels = self.levels
        if not levels:
            return None
        segments = _segments(levels, self.parents, self.nbodies, self.nv)
        flat = np.concatenate([levels[0].dofs.reshape(-1)] + [sg.dofs.reshape(-1) for sg in segments])
        return Sweep(levels[0], segments, _positions(flat, nv=self.nv))


def _positions(flat, nv):
    """Position of each coordinate 0..nv-1 in a flat table padded with nv."""
    order = np.empty(nv, dtype=np.int32)
    for k, dof in enumerate(flat):
        if dof < nv:
            order[dof] = k
    return order


#: each run of levels beyond the first must save this fraction of the sweep's cost (a run is one
#: more compiled scan body per pass)
SPLIT_GAIN = 0.2
#: how much more a slot costs in a run whose parent tables are not all the identity (the
#: products with them in every level: 30 % of solo12's batched ``aba`` before they were skipped)
PRODUCT_COST = 0.3
#: at most this many runs (compile time grows with each)
MAX_RUNS = 3


def _layout(levels, parents, a, b):
    """Slots of levels ``a .. b - 1`` (below the root level) run in one scan: the first level's
    bodies in order, then each body in its parent's slot if no sibling took it first, else in
    the first free slot, so that chains keep their slots and only branchings move bodies.

    Returns the slot of each body per level (dicts) and, per level, whether every level after
    the first up to it has each body in its parent's slot (the parent tables the identity)."""
    places, chains = [], []
    for d in range(a, b):
        bodies = levels[d + 1].bodies
        extra = []
        if d == a:
            place = {body: k for k, body in enumerate(bodies)}
        else:
            above, place = places[-1], {}
            for body in bodies:
                k = above[parents[body]]
                if k in place.values():
                    extra.append(body)
                else:
                    place[body] = k
            taken = set(place.values())
            place.update(zip(extra, (k for k in range(len(above) + len(bodies)) if k not in taken)))
        chains.append((not chains or chains[-1]) and not extra)
        places.append(place)
    return places, chains


def _segments(levels, parents, nb, nv):
    """The sweep's levels in at most :data:`MAX_RUNS` runs, each padded only to its own widest
    level, with slots laid out by :func:`_layout`.

    Every padded slot costs as much as a body in every pass, a tree's levels differ in width,
    and a run whose bodies all stay in their parents' slots needs no parent products
    (talos_reduced's widths below the root are 3, 3, 5, 5, 4, 4, 2, 2, 2, 2: one run is 50 slots
    with products; the legs and torso [3, 3], the arms, legs and head [5 .. 4] and the forearms
    [2 .. 2] are 34 slots without). The partition of least cost (slots, times 1 +
    :data:`PRODUCT_COST` in runs with products) is kept, each run beyond the first counted as
    1 / (1 - :data:`SPLIT_GAIN`) times the cost.
    """
    L = len(levels) - 1
    if not L:
        return ()
    runs = {}
    for a in range(L):  # a run's layout is the start of the layout of every longer run
        places, chains = _layout(levels, parents, a, L)
        W = np.maximum.accumulate([max(p.values()) + 1 for p in places])
        for b in range(a + 1, L + 1):
            cost = (b - a) * W[b - a - 1] * (1.0 if chains[b - a - 1] else 1.0 + PRODUCT_COST)
            runs[a, b] = (cost, places[:b - a], int(W[b - a - 1]))

    def best(a, n):  # the cheapest split of levels a .. L - 1 into at most n runs: (cost, bounds)
        options = [(runs[a, L][0], [a, L])]
        if n > 1:
            for k in range(a + 1, L):
                cost, bounds = best(k, n - 1)
                options.append((runs[a, k][0] + cost, [a] + bounds))
        return min(options, key=lambda o: o[0] / (1.0 - SPLIT_GAIN) ** (len(o[1]) - 2))

    bounds = best(0, MAX_RUNS)[1]
    out, above = [], {body: k for k, body in enumerate(levels[0].bodies)}
    width = len(above)  # of the level above the run: the roots, or the previous run's
    for a, b in zip(bounds[:-1], bounds[1:]):
        _, places, W = runs[a, b]
        w = max(levels[d + 1].dofs.shape[1] for d in range(a, b))
        body = np.full((b - a, W), nb, dtype=np.int32)
        parent = np.zeros((b - a, W, W))
        dofs = np.full((b - a, W, w), nv, dtype=np.int32)
        entry = np.zeros((W, width))
        for i, (d, place) in enumerate(zip(range(a, b), places)):
            lv = levels[d + 1]
            for k, bd in enumerate(lv.bodies):
                body[i, place[bd]] = bd
                dofs[i, place[bd], :lv.dofs.shape[1]] = lv.dofs[k]
                if i == 0:
                    entry[place[bd], above[parents[bd]]] = 1.0
                else:
                    parent[i, place[bd], places[i - 1][parents[bd]]] = 1.0
            # padding slots take their own slot above (zero inertia and motion: they add nothing)
            padding = np.flatnonzero(body[i] == nb)
            parent[i, padding, padding] = 1.0
        parent[0] = np.eye(W)
        out.append(Segment(body, parent, entry, dofs, dofs == nv))
        above, width = places[-1], W
    return tuple(out)


class JointGroup(NamedTuple):
    """The bodies whose joints are of one type, and the tables of their coordinates."""

    joint: object  # the joint type (mbjax.model.joints)
    body: np.ndarray  # (n,) body indices
    q: np.ndarray  # (n, nq) position-coordinate indices
    v: np.ndarray  # (n, nv) velocity-coordinate indices


@dataclass(frozen=True, eq=False)
class Level:
    """The bodies of one depth and the table of their velocity coordinates, padded to the
    widest joint of the level."""

    bodies: tuple
    dofs: np.ndarray  # (n, width) velocity indices, padded with nv
    pad: np.ndarray  # (n, width) True on padding entries


@dataclass(frozen=True, eq=False)
class Sweep:
    """The root level, and levels 1..L-1 in :class:`Segment` runs, each padded to its own
    width (W bodies, w coordinates per body), for ``lax.scan``.

    Padding bodies have index nb, padding coordinates index nv. A level's ``parent`` is the
    one-hot (W x W) matrix with ``parent[k, j] = 1`` when slot j of the level above is the
    parent of slot k (a padding slot k: its own slot above): a product with it gathers parents'
    rows, with its transpose it sums children's rows into their parents.
    """

    root: Level
    segments: tuple  # runs of :class:`Segment` (the recursive algorithms' sweeps)
    dof_order: np.ndarray  # (nv,) position of each coordinate in [root dofs, segments' dofs] flattened


@dataclass(frozen=True, eq=False)
class Segment:
    """Consecutive levels padded to their own widest (W bodies): one ``lax.scan``.

    ``entry`` (W x W') is the one-hot table of the first level's parents in the level above
    (W' slots); the first level's ``parent`` is the identity, so that a pass gathers the
    parents' rows once on entry (``entry @ x``) and sums into them once on exit
    (``entry^T @ x``).
    """

    body: np.ndarray  # (n, W)
    parent: np.ndarray  # (n, W, W)
    entry: np.ndarray  # (W, W')
    dofs: np.ndarray  # (n, W, w)
    pad: np.ndarray  # (n, W, w)

    @functools.cached_property
    def chains(self) -> bool:
        """Whether every level's parent table is the identity (each slot's parent in the same
        slot: the sweeps then skip the products with it)."""
        return bool(np.array_equal(self.parent, np.broadcast_to(np.eye(self.parent.shape[1]), self.parent.shape)))


def _inverse_permutation(perm):
    perm = np.asarray(perm)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    if np.array_equal(inv, np.arange(len(perm))):
        return None  # identity: callers skip the gather
    return inv
