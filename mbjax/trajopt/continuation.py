"""The order in which a batch of related problems is solved when each starts from a solved
neighbour's solution (continuation, or warm starting across a family of problems).

The problems are points in the space of what tells them apart (initial states, model
parameters), each column scaled by its spread over the batch. The first problem is solved first
(from its own guess: the caller puts there the one it knows best, e.g. the nominal initial
state); then, as in Prim's algorithm for a minimum spanning tree, the unsolved problems nearest
to any solved one are solved next, each from that nearest solved one. With ``width`` problems solved at a time, the next ``width`` are all taken from the
problems solved before them.
"""

from __future__ import annotations

import numpy as np


def features(*columns) -> np.ndarray:
    """(B, F) points from arrays with a leading batch axis B (``None`` skipped), every column
    scaled by its standard deviation over the batch (columns that do not vary dropped)."""
    x = np.concatenate([np.asarray(c, float).reshape(len(c), -1) for c in columns if c is not None], axis=1)
    spread = x.std(axis=0)
    varies = spread > 1e-12 * np.maximum(1.0, np.abs(x).max(axis=0))
    return (x[:, varies] - x[:, varies].mean(axis=0)) / spread[varies]


def order(points: np.ndarray, width: int = 1):
    """``[(problems, parents), ...]``: groups of problem indices in the order they are solved,
    the first problem 0 alone (parent -1: solved from its own guess), each
    later one ``width`` problems with the index of their nearest problem solved before them."""
    B = len(points)
    root = 0
    nearest = ((points - points[root]) ** 2).sum(axis=1)  # squared distance to the solved set
    parent = np.full(B, root)
    done = np.zeros(B, bool)
    done[root] = True
    groups = [(np.array([root]), np.array([-1]))]
    while not done.all():
        group = np.argsort(np.where(done, np.inf, nearest), kind="stable")[:min(width, B - done.sum())]
        groups.append((group, parent[group]))
        done[group] = True
        for k in group:  # the new solved problems may be nearer to the rest
            d = ((points - points[k]) ** 2).sum(axis=1)
            closer = d < nearest
            nearest, parent = np.where(closer, d, nearest), np.where(closer, k, parent)
    return groups
