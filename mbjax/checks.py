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
import numpy as np

from .compilation import YNN_MIN_NV, one_function
from .fused import fused

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


# Value checks are (flags, message) pairs: ``flags`` an array whose NaN entries are the errors
# (``x * 0`` for "x is finite"), so that :func:`guard` turns any number of them into one
# elementwise code and one reduction (a kernel), and one ``eqx.branched_error_if``.
def non_finite(x, message):
    """The error ``message`` where ``x`` holds NaN or infinite values."""
    return x * 0, message


def state_errors(model, configurations, vectors: dict) -> list:
    """The errors of states whose shapes :func:`check_shapes` checked: NaN or infinite entries
    in each q (``configurations``) and in each named vector, and quaternions (or (cos, sin)
    pairs) in q that are not of unit norm."""
    blocks = _unit_blocks(model)
    errors = []
    for q in configurations:
        errors.append(non_finite(q, "q contains NaN or infinite values"))
        if blocks:  # squared norms of the blocks of each width, by static gathers (no reduction)
            sq = [sum(q[np.array([a + i for a, b in blocks if b - a == w])] ** 2 for i in range(w))
                  for w in sorted({b - a for a, b in blocks})]
            norm = jnp.sqrt(jnp.concatenate(sq))
            errors.append((jnp.where(jnp.abs(norm - 1.0) > UNIT_NORM_TOLERANCE, jnp.nan, 0.0), _NOT_UNIT))
    errors += [non_finite(v, f"{name} contains NaN or infinite values") for name, v in zip(vectors, vectors.values())]
    return errors


def guard(x, errors):
    """``x`` (any pytree), raising (``eqx.branched_error_if``) the message of the first of
    ``errors`` that has a NaN flag. One kernel finds it (the errors' codes, their minimum) and
    one conditional raises: a single call of ``aba`` on ur5 to talos_reduced cost 1.1-2.0 µs
    less than with a reduction per input and per unit-norm block (benchmarks/README.md,
    session 38)."""
    errors = [(flags, message) for flags, message in errors if jnp.size(flags)]
    return raise_first(x, first_error(errors), [message for _, message in errors])


def first_error(errors):
    """The index of the first of ``errors`` (their list without empty flags) that has a NaN
    flag, ``len(errors)`` if none has."""
    n = len(errors)
    if not n:
        return jnp.int32(0)
    return jnp.min(jnp.concatenate([jnp.where(jnp.isnan(jnp.ravel(flags)), i, n) for i, (flags, _) in enumerate(errors)]))


def raise_first(x, first, messages):
    """``x``, raising ``messages[first]`` when ``first`` (:func:`first_error`) names one."""
    if not messages:
        return x
    bad = first < len(messages)
    # a valid index where nothing is wrong: a vmap raises the largest index of its states'
    return eqx.branched_error_if(x, bad, jnp.where(bad, first, 0), messages)


def check_state(model, *configurations, **vectors):
    """Check and return ``(*configurations, *vectors.values())`` in the model's dtype.

    ``configurations`` are q's (nq,); each keyword is a vector (nv,) named in the messages.
    """
    qs, vs = check_shapes(model, *configurations, **vectors)
    out = guard(tuple(qs + vs), state_errors(model, qs, dict(zip(vectors, vs))))
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
    return guard(f_ext, [non_finite(f_ext, "f_ext contains NaN or infinite values")])


def singular_accelerations(qdd):
    """The error of non-finite accelerations from a finite state (a singular mass matrix)."""
    return non_finite(
        qdd, "forward dynamics gave NaN or infinite accelerations from a finite state: the mass matrix is singular "
        "(a joint moves no inertia at this configuration, e.g. a massless body, or a wheel with zero inertia and "
        "its centre of mass on its axis). Give the bodies mass and rotational inertia, or add joint armature")


def check_accelerations(qdd):
    """``qdd`` unchanged; non-finite accelerations (from inputs checked finite) raise inside jit."""
    return guard(qdd, [singular_accelerations(qdd)])


def checked(model, compute, q, vectors: dict, f_ext=None, result_errors=lambda out: [], fuse_below=YNN_MIN_NV):
    """``compute(model, q, *vectors.values(), f_ext)`` on inputs of checked shapes (in the model's
    dtype), raising the first of the inputs' errors (:func:`state_errors`, non-finite
    ``f_ext``) and then of ``result_errors(result)``.

    Where the call being traced can be one function (:func:`mbjax.compilation.one_function`:
    mbjax's flags, unbatched) and the model has fewer than ``fuse_below`` coordinates, the
    inputs are checked beside the computation, not before it: the computation and the search
    for the first error make one :func:`mbjax.fused.fused` program, followed by the one
    conditional that raises.
    Elsewhere the inputs pass through their check first (every kernel then follows its
    conditional, which keeps XLA:CPU's kernels of one call in a chain, on the calling thread).
    """
    (q,), vs = check_shapes(model, q, **vectors)
    f_ext = None if f_ext is None else check_external_force_shape(model, f_ext)

    def input_errors(q, vs, f_ext):
        errors = state_errors(model, [q], dict(zip(vectors, vs)))
        return errors + ([] if f_ext is None else [non_finite(f_ext, "f_ext contains NaN or infinite values")])

    if not (one_function() and model.nv < fuse_below):
        q, vs, f_ext = guard((q, vs, f_ext), input_errors(q, vs, f_ext))
        out = compute(model, q, *vs, f_ext)
        return guard(out, list(result_errors(out)))
    messages = []

    def run(model, q, vs, f_ext):
        out = compute(model, q, *vs, f_ext)
        errors = [(flags, message) for flags, message in input_errors(q, vs, f_ext) + list(result_errors(out))
                  if jnp.size(flags)]
        messages[:] = [message for _, message in errors]
        return out, first_error(errors)

    out, first = fused(run)(model, q, vs, f_ext)
    return raise_first(out, first, messages)


def default_tolerance(dtype, float64_tolerance, ulps):
    """A default tolerance for computations in ``dtype``: ``float64_tolerance``, or ``ulps``
    units of roundoff (``ulps * finfo(dtype).eps``) where that is larger (float32: ``ulps *
    1.2e-7``), so that the tolerance can be reached."""
    return max(float64_tolerance, ulps * float(jnp.finfo(dtype).eps))
