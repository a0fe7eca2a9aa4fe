"""Level-by-level tree passes: the one place where recursions over the tree are written.

On XLA:CPU a jitted call pays per operation, so a recursion written body by body with
small operations is slow. Here every pass handles all bodies of one depth level with one set
of array operations (the idea of MJX's ``scan.body_tree``); a 7-link arm then costs seven
steps, a humanoid about ten, independently of how many branches it has.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import spatial
from .topology import Level, Topology


def take(x, index):
    """Rows ``index`` of ``x``: a slice, an integer array (static or traced), or ``None`` for
    all rows. Gathers use ``jnp.take(mode="clip")``, which XLA:CPU runs several times faster
    than NumPy-style indexing (that one also handles out-of-range fills)."""
    if index is None:
        return x
    if isinstance(index, slice):
        return x[index]
    return jnp.take(x, index, axis=0, mode="clip")


def gather_level(level: Level, tree):
    """The rows of every leaf of ``tree`` that belong to the bodies of ``level``."""
    return jax.tree_util.tree_map(lambda x: x[level.body_index], tree)


def parent_rows(level: Level, previous):
    """For each body of ``level``, the rows of its parent in ``previous`` (the level above)."""
    if level.is_chain and _rows(previous) == len(level.bodies):
        return previous
    return jax.tree_util.tree_map(lambda x: x[level.parent_index], previous)


def add_to_parents(level: Level, n_parents: int, contribution):
    """Sum the rows of ``contribution`` (one per body of ``level``) into their parents' rows."""
    if level.is_chain and n_parents == len(level.bodies):
        return contribution
    return jax.tree_util.tree_map(
        lambda x: jax.ops.segment_sum(x, jnp.asarray(level.parent_pos), n_parents, indices_are_sorted=True),
        contribution,
    )


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


def _rows(tree):
    return jax.tree_util.tree_leaves(tree)[0].shape[0]
