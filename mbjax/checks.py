"""Input checks shared by every public function.

Shapes are checked at trace time (plain Python exceptions). Values are checked inside jit with
``eqx.error_if``: NaN or infinite states and quaternions (or unit complex numbers) that are
not of unit norm raise at run time with a message that says what to do. They cost one fused
reduction per call; set ``EQX_ON_ERROR=nan`` to turn them into NaN outputs instead.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

#: |norm - 1| above this makes a quaternion in q an error (float32 keeps ~1e-7)
UNIT_NORM_TOLERANCE = 1e-5


def _as_array(model, x, name, n):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(model.dtype)
    if x.shape != (n,):
        raise ValueError(
            f"{name} has shape {x.shape}; model {model.name!r} expects ({n},). "
            "For a batch of states, map the function with jax.vmap."
        )
    return x


def check_vector(model, x, name: str, n: int | None = None):
    """``x`` as an array of shape (n,) (n = nv by default), erroring at run time on NaN/inf."""
    x = _as_array(model, x, name, model.nv if n is None else n)
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), f"{name} contains NaN or infinite values")


def _unit_index(model):
    """Pairs (start, stop) of the unit-norm blocks of q."""
    topo = model.topology
    out = []
    for i, joint in enumerate(topo.joints):
        for sl in joint.unit_slices:
            out.append((topo.q_start[i] + sl.start, topo.q_start[i] + sl.stop))
    return out


def check_configuration(model, q):
    """``q`` as an array of shape (nq,), erroring at run time on NaN and non-unit quaternions."""
    q = _as_array(model, q, "q", model.nq)
    bad = ~jnp.all(jnp.isfinite(q))
    q = eqx.error_if(q, bad, "q contains NaN or infinite values")
    blocks = _unit_index(model)
    if blocks:
        idx = np.concatenate([np.arange(a, b) for a, b in blocks])
        seg = np.concatenate([np.full(b - a, k) for k, (a, b) in enumerate(blocks)])
        sq = jnp.zeros(len(blocks), q.dtype).at[seg].add(jnp.take(q, idx) ** 2)
        off = jnp.any(jnp.abs(jnp.sqrt(sq) - 1.0) > UNIT_NORM_TOLERANCE)
        q = eqx.error_if(
            q,
            off,
            "q holds a quaternion (or a (cos, sin) pair) whose norm is not 1. Normalise it, "
            "e.g. with mbjax.normalize(model, q), or build q with mbjax.integrate.",
        )
    return q
