"""Level-by-level tree passes: the one place where recursions over the tree are written.

On XLA:CPU a jitted call pays per operation, so a recursion written body by body with
small operations is slow. Here every pass handles all bodies of one depth level with one set
of array operations (the idea of MJX's ``scan.body_tree``); a 7-link arm then costs seven
steps, a humanoid about ten, independently of how many branches it has.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .topology import Level, Topology


def take(x, index):
    """Rows ``index`` (a slice or an index array) of ``x``; ``None`` means all rows."""
    return x if index is None else x[index]


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


def to_body_order(topology: Topology, per_level):
    """Concatenate per-level results (a list of pytrees) and restore body order."""
    return jax.tree_util.tree_map(
        lambda *xs: take(jnp.concatenate(xs, axis=0), topology.level_order), *per_level
    )


def forward_pass(topology: Topology, step, root, per_body):
    """Root-to-leaves pass ``x_i = step(x_parent(i), per_body_i)``.

    ``root`` is the world's value (broadcast to the first level); ``per_body`` is a pytree of
    arrays with a leading body dimension. Returns the ``x_i`` in body order.
    """
    out, prev = [], None
    for d, level in enumerate(topology.levels):
        args = gather_level(level, per_body)
        if d == 0:
            n = len(level.bodies)
            parent = jax.tree_util.tree_map(lambda r: jnp.broadcast_to(r, (n,) + jnp.shape(r)), root)
        else:
            parent = parent_rows(level, prev)
        prev = step(parent, args)
        out.append(prev)
    return to_body_order(topology, out)


def _rows(tree):
    return jax.tree_util.tree_leaves(tree)[0].shape[0]
