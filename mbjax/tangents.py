"""Symbolic zero tangents in ``jax.custom_jvp`` rules (``defjvp(..., symbolic_zeros=True)``).

A rule defined with ``symbolic_zeros=True`` receives ``SymbolicZero`` for each input that is
not differentiated, so it can skip the work of a zero tangent; where a tangent must be an
array after all (to hand it to ``jax.jvp``), :func:`instantiate` makes the zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero


def _symbolic(t) -> bool:
    return isinstance(t, SymbolicZero)


def is_zero(tangent) -> bool:
    """Whether every leaf of ``tangent`` (a pytree) is a symbolic zero."""
    return all(_symbolic(t) for t in jax.tree_util.tree_leaves(tangent, is_leaf=_symbolic))


def instantiate(tangent):
    """``tangent`` with its symbolic zeros made arrays (``float0`` ones for integer inputs)."""
    def zero(t):
        if not _symbolic(t):
            return t
        dtype = t.aval.dtype
        return np.zeros(t.aval.shape, dtype) if dtype == jax.dtypes.float0 else jnp.zeros(t.aval.shape, dtype)

    return jax.tree_util.tree_map(zero, tangent, is_leaf=_symbolic)
