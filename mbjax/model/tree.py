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
