"""Traversals of the tree: the one place where loops over its joints and recursions over its
bodies are written (:func:`map_joints`, :func:`compose_paths`; the level sweeps of the
recursive algorithms are in :mod:`mbjax.dynamics.levels`).

On XLA:CPU a jitted call pays per operation, so a recursion written body by body with
small operations is slow. Here every pass handles all bodies of one depth level with one set
of array operations (the idea of MJX's ``scan.body_tree``); a 7-link arm then costs seven
steps, a humanoid about ten, independently of how many branches it has.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import spatial
from .topology import Topology


def take(x, index):
    """Rows ``index`` of ``x``: a slice, an integer array (static or traced), or ``None`` for
    all rows. Gathers use ``jnp.take(mode="clip")``, which XLA:CPU runs several times faster
    than NumPy-style indexing (that one also handles out-of-range fills)."""
    if index is None:
        return x
    if isinstance(index, slice):
        return x[index]
    return jnp.take(x, index, axis=0, mode="clip")


def as_index(seq):
    """A slice when ``seq`` is a contiguous increasing range (cheaper than a gather), else an
    int32 array."""
    seq = tuple(int(i) for i in np.asarray(seq).reshape(-1))
    if seq and seq == tuple(range(seq[0], seq[0] + len(seq))):
        return slice(seq[0], seq[0] + len(seq))
    return np.array(seq, dtype=np.int32)


def rows(x, table):
    """``x[table]`` (n, k, ...) for an (n, k) integer table (a joint group's q or v indices)."""
    table = np.asarray(table)
    return take(x, as_index(table)).reshape(table.shape + x.shape[1:])


def map_joints(topology: Topology, fn, into):
    """``fn(group)`` for each joint group of ``topology`` (:class:`.topology.JointGroup`: the
    bodies of one joint type and their coordinate tables), its results put together.

    ``into`` says what each result is, by rows: ``"q"`` (n, nq, ...) or ``"v"`` (n, nv, ...)
    coordinate rows, or ``"body"`` (n, ...) body rows; they are concatenated over the groups
    and put in q, v or body order. A tuple ``into`` matches a tuple of results.
    """
    kinds = (into,) if isinstance(into, str) else into
    if not topology.groups:  # nothing moves
        empty = tuple(jnp.zeros((0,)) for _ in kinds)
        return empty[0] if isinstance(into, str) else empty
    results = [fn(g) for g in topology.groups]
    parts = list(zip(*[(r,) if isinstance(into, str) else r for r in results]))
    out = []
    for kind, part in zip(kinds, parts):
        lead = 1 if kind == "body" else 2
        flat = jnp.concatenate([x.reshape((-1,) + x.shape[lead:]) for x in part])
        out.append(take(flat, topology.group_order[kind]))
    return out[0] if isinstance(into, str) else tuple(out)


def compose_paths(topology: Topology, R, p):
    """World poses from parent-relative poses, by pointer doubling.

    After step s every body holds the product of the 2^s transforms nearest to it on its
    path to the root: X_i <- X_{a_s(i)} X_i with a_s(i) its 2^s-th ancestor. A tree of depth
    D needs ceil(log2 D) steps of a few array operations each, instead of D sequential levels.
    """
    nb = topology.nbodies
    R = jnp.concatenate([R, jnp.eye(3, dtype=R.dtype)[None]])  # row nb: the world
    p = jnp.concatenate([p, jnp.zeros((1, 3), p.dtype)])
    for anc in topology.doubling:
        R, p = spatial.compose(take(R, anc), take(p, anc), R, p)
    return R[:nb], p[:nb]
