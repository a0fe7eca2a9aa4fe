"""Tangents as ``jax.custom_jvp`` rules with ``symbolic_zeros=True`` receive them: an input that
is not differentiated arrives as a ``SymbolicZero``, which a rule can skip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero


def _is_symbolic_zero(t):
    return isinstance(t, SymbolicZero)


def is_zero(tangent) -> bool:
    """Whether every leaf of ``tangent`` is a symbolic zero (the input is not differentiated)."""
    return all(_is_symbolic_zero(t) for t in jax.tree_util.tree_leaves(tangent, is_leaf=_is_symbolic_zero))


def instantiate(tangent):
    """``tangent`` with its symbolic zeros made arrays of zeros (``float0`` ones for integers)."""
    def zero(t):
        if not _is_symbolic_zero(t):
            return t
        dtype = t.aval.dtype
        return np.zeros(t.aval.shape, dtype) if dtype == jax.dtypes.float0 else jnp.zeros(t.aval.shape, dtype)

    return jax.tree_util.tree_map(zero, tangent, is_leaf=_is_symbolic_zero)
