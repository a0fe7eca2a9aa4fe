"""Input checks shared by every public function.

Inputs are converted to the model's dtype (``model.dtype``): a float32 torque given to a float64
model is promoted to float64, a float64 state given to a float32 model is rounded to float32.
Shapes are checked at trace time (plain Python exceptions). Values are checked inside jit with
one ``eqx.branched_error_if`` per call: NaN or infinite states, and quaternions (or unit
complex numbers) in q that are not of unit norm, raise at run time with a message that says
what to do. Set ``EQX_ON_ERROR=nan`` to get NaN outputs instead, or ``EQX_ON_ERROR=off`` to
skip the checks (they cost a few microseconds per call). Their host callback also makes JAX run
a single call on the calling thread instead of handing it to a worker: without it, single calls
from Python are slower unless ``jax_cpu_enable_async_dispatch`` is off (docs/performance.md).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

#: |norm - 1| above this makes a quaternion in q an error (float32 keeps ~1e-7)
UNIT_NORM_TOLERANCE = 1e-5

_NOT_UNIT = (
    "q holds a quaternion (or a (cos, sin) pair) whose norm is not 1. Normalise it, "
    "e.g. with mbjax.normalize(model, q), or build q with mbjax.integrate."
)


def _as_array(model, x, name, n):
    x = jnp.asarray(x, model.dtype)
    if x.shape != (n,):
        raise ValueError(
            f"{name} has shape {x.shape}; model {model.name!r} expects ({n},). "
            "For a batch of states, map the function with jax.vmap."
        )
    return x


def _unit_blocks(model):
    """The (start, stop) of each unit-norm block of q (quaternions, (cos, sin) pairs), static."""
    topo = model.topology
    return [(topo.q_start[i] + sl.start, topo.q_start[i] + sl.stop)
            for i, joint in enumerate(topo.joints) for sl in joint.unit_slices]


def check_shapes(model, *configurations, **vectors):
    """``(*configurations, *vectors.values())`` in the model's dtype, their shapes checked
    (plain errors at trace time) but not their values: q's (nq,), then vectors (nv,)."""
    return ([_as_array(model, q, "q", model.nq) for q in configurations],
            [_as_array(model, x, name, model.nv) for name, x in vectors.items()])


def check_state(model, *configurations, **vectors):
    """Check and return ``(*configurations, *vectors.values())`` in the model's dtype.

    ``configurations`` are q's (nq,); each keyword is a vector (nv,) named in the messages.
    """
    qs, vs = check_shapes(model, *configurations, **vectors)
    preds, msgs = [], []
    blocks = _unit_blocks(model)
    for q in qs:
        preds.append(~jnp.all(jnp.isfinite(q)))
        msgs.append("q contains NaN or infinite values")
        if blocks:  # squared norms by static slices (a scatter-add ran as a loop over a batch's entries)
            sq = jnp.stack([jnp.sum(q[a:b] ** 2) for a, b in blocks])
            preds.append(jnp.any(jnp.abs(jnp.sqrt(sq) - 1.0) > UNIT_NORM_TOLERANCE))
            msgs.append(_NOT_UNIT)
    for name, v in zip(vectors, vs):
        preds.append(~jnp.all(jnp.isfinite(v)))
        msgs.append(f"{name} contains NaN or infinite values")
    out = tuple(qs + vs)
    if not preds:
        return out
    pred = jnp.stack(preds)
    out = eqx.branched_error_if(out, jnp.any(pred), jnp.argmax(pred), msgs)
    return out if len(out) > 1 else out[0]


def check_nonnegative(x, message):
    """``x`` (a number or an array) unchanged; ``message`` is raised when an entry is negative or
    NaN: a ``ValueError`` at trace time for a Python number, ``eqx.error_if`` for an array."""
    if isinstance(x, (int, float)):
        if not x >= 0:
            raise ValueError(f"{message}; got {x}")
        return x
    return eqx.error_if(x, ~jnp.all(jnp.asarray(x) >= 0), message)


def check_external_force_shape(model, f_ext):
    """``f_ext`` (nbodies, 6) in the model's dtype, its shape checked (not its values)."""
    f_ext = jnp.asarray(f_ext, model.dtype)
    if f_ext.shape != (model.nbodies, 6):
        raise ValueError(
            f"f_ext has shape {f_ext.shape}; expected ({model.nbodies}, 6): one body-frame wrench "
            "(force, moment) per body, in model.body_names order"
        )
    return f_ext


def check_external_forces(model, f_ext):
    """``f_ext`` (nbodies, 6) in the model's dtype, ``None`` kept; NaN or infinite wrenches raise
    inside jit."""
    if f_ext is None:
        return None
    f_ext = check_external_force_shape(model, f_ext)
    return eqx.error_if(f_ext, ~jnp.all(jnp.isfinite(f_ext)), "f_ext contains NaN or infinite values")


def check_accelerations(qdd):
    """``qdd`` unchanged; non-finite accelerations (from inputs checked finite) raise inside jit."""
    return eqx.error_if(
        qdd, ~jnp.all(jnp.isfinite(qdd)),
        "forward dynamics gave NaN or infinite accelerations from a finite state: the mass matrix is singular "
        "(a joint moves no inertia at this configuration, e.g. a massless body, or a wheel with zero inertia and "
        "its centre of mass on its axis). Give the bodies mass and rotational inertia, or add joint armature",
    )


def default_tolerance(dtype, float64_tolerance, ulps):
    """A default tolerance for computations in ``dtype``: ``float64_tolerance``, or ``ulps``
    units of roundoff (``ulps * finfo(dtype).eps``) where that is larger (float32: ``ulps *
    1.2e-7``), so that the tolerance can be reached."""
    return max(float64_tolerance, ulps * float(jnp.finfo(dtype).eps))
