"""How mbjax compiles its entry points, and :func:`jit` for a user's functions of a model.

XLA:CPU runs the kernels of a compiled program on the calling thread, one after the other,
only when its schedule is a chain (every kernel depends on the one before it) or all its
buffers are small (at most 512 bytes); otherwise it runs them as a dataflow graph whose ready
kernels are handed to its thread pool, and a single dynamics call pays the hand-over between
threads (tens of microseconds). With the model passed as an argument, the kernels that only
transform the model's arrays (padding, stacking, symmetrising) are independent of the state:
XLA's default scheduler interleaves them with the rest, so the program is no chain, and on a
floating-base robot its buffers are above 512 bytes. The memory-optimised list scheduler
orders the same kernels depth first, which makes the schedule a chain: the public
``mbjax.aba(model, q, qd, tau)`` on talos_reduced went from 1.50x to 1.08x its program with the
model closed over (81 -> 58 µs; solo12 1.61x -> 1.13x), ``rnea`` from 1.43x to 1.15x, with
no change for fixed-base robots or batches (``benchmarks/README.md``, "Single calls").

JAX accepts compiler options only on an outermost ``jax.jit`` (it refuses them on a jit traced
inside another transformation), so :func:`jit` makes two programs of a function: with the
options when it is called from Python, and a plain ``jax.jit`` when it is traced inside
``jax.jit``, ``jax.vmap`` or ``jax.grad`` (then the outer program's options apply). mbjax's
entry points (``mbjax.aba(model, q, qd, tau)`` called from Python) are made this way; a user's
own function of a model gets the same with ``mbjax.jit``.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
from jax._src import core

#: XLA:CPU options of mbjax's entry points (XLA's other back ends do not read them)
CPU_OPTIONS = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}


def _from_python() -> bool:
    """Whether no JAX transformation is tracing the current call. JAX's trace context is a
    private API: a JAX without it gets the plain programs everywhere (correct, only slower)."""
    ctx = getattr(core, "trace_ctx", None)
    return bool(ctx is not None and ctx.is_top_level())


def _dispatch(fun, fast, plain):
    @functools.wraps(fun)
    def call(*args, **kwargs):
        return (fast if _from_python() else plain)(*args, **kwargs)

    # no attributes on ``call`` (such as ``fast.lower``): functools.wraps in jax.vmap and jax.jit
    # copies a function's attributes onto its wrappers, which would then lower ``fast``
    return call


def jit(fun=None, **kwargs):
    """``jax.jit(fun, **kwargs)`` compiled with :data:`CPU_OPTIONS` when called from Python.

    For a user's function that takes a model as an argument, e.g.
    ``step = mbjax.jit(lambda model, q, qd, tau: mbjax.aba(model, q, qd, tau))``: on a CPU its
    calls then cost about what they would with the model closed over. Inside another
    transformation it is a plain ``jax.jit``. Usable as a decorator, with or without
    arguments (``@mbjax.jit(static_argnames="n")``).
    """
    if fun is None:
        return lambda f: jit(f, **kwargs)
    options = {**CPU_OPTIONS, **(kwargs.pop("compiler_options", None) or {})}
    return _dispatch(fun, jax.jit(fun, compiler_options=options, **kwargs), jax.jit(fun, **kwargs))


def filter_jit(fun):
    """The same for ``eqx.filter_jit(fun)`` (entry points with non-array arguments)."""
    return _dispatch(fun, eqx.filter_jit(fun, compiler_options=CPU_OPTIONS), eqx.filter_jit(fun))
