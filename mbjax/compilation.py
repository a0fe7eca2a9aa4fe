"""How mbjax compiles its entry points, and :func:`jit` for a user's functions of a model.

Three XLA:CPU options (:func:`cpu_options`), set on mbjax's own programs and on the functions
a user compiles with :func:`jit`:

- **The memory-optimised scheduler.** XLA:CPU runs the kernels of a compiled program on the
  calling thread, one after the other, only when its schedule is a chain (every kernel depends
  on the one before it) or all its buffers are small (at most 512 bytes); otherwise it runs
  them as a dataflow graph whose ready kernels are handed to its thread pool, and a single
  dynamics call pays the hand-over between threads (tens of microseconds). With the model
  passed as an argument, the kernels that only transform the model's arrays (padding,
  stacking, symmetrising) are independent of the state: XLA's default scheduler interleaves
  them with the rest, so the program is no chain, and on a floating-base robot its buffers are
  above 512 bytes. The memory-optimised list scheduler orders the same kernels depth first,
  which makes the schedule a chain: the public ``mbjax.aba(model, q, qd, tau)`` on
  talos_reduced went from 1.50x to 1.08x its program with the model closed over (81 -> 58 µs;
  solo12 1.61x -> 1.13x), ``rnea`` from 1.43x to 1.15x, with no change for fixed-base robots
  or batches (``benchmarks/README.md``, "Single calls").
- **YNNPACK for dots only.** jaxlib 0.10 hands small products and reductions to YNNPACK
  library calls (``__ynn_fusion``). The level sweeps' multiply-and-sum products of 3-vectors
  and 3 x 3 matrices, C = 128 states wide, run faster as XLA's own fused loops, which also
  keep them fused with their neighbours: batched ``aba`` 10-30 % and ``rnea`` 30-40 % faster
  on floating bases, ``simulate_batch`` of 1024 states 14-30 % faster and compiled 40 %
  faster (``benchmarks/README.md``, session 22). Dots stay with YNNPACK.
- **XLA's classic loop emitters** (``xla_cpu_use_fusion_emitters=False``, as the trajectory
  optimiser's programs had since session 15): the same kernels as the newer fusion emitters'
  for these programs, compiled 20-40 % faster (talos_reduced's batched ``aba``, tracing
  included: 5.8 -> 4.3 s), and ``simulate_batch`` of 1024 states 10 % faster (session 23).

JAX accepts compiler options only on a ``jax.jit`` that no other ``jax.jit`` (or ``grad``)
traces, so :func:`jit` makes two programs of a function: with the options when it is called
from Python or from ``jax.vmap`` at the top level (the batched program keeps them), and a
plain ``jax.jit`` inside ``jax.jit`` or ``jax.grad`` (then the outer program's options apply).
mbjax's entry points (``mbjax.aba(model, q, qd, tau)`` called from Python, ``simulate``,
``simulate_batch``) are made this way; a user's own function of a model gets the same with
``mbjax.jit``, and a user's ``jax.jit`` with ``compiler_options=mbjax.compilation.CPU_OPTIONS``.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jax._src import core

_SCHEDULER = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}
_YNN_DOTS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
#: XLA:CPU's classic loop emitters (also the trajectory optimiser's option)
CLASSIC_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def cpu_options() -> dict:
    """The XLA options of mbjax's programs (module docstring), those of them that the installed
    XLA knows (an option it does not know would fail every compilation; XLA's other back ends
    ignore them). Probed once, on first use."""
    for options in ({**_SCHEDULER, **_YNN_DOTS, **CLASSIC_EMITTERS}, {**_SCHEDULER, **_YNN_DOTS},
                    {**_SCHEDULER, **CLASSIC_EMITTERS}, _SCHEDULER):
        try:
            jax.jit(lambda x: x + 1, compiler_options=options).lower(jnp.zeros((), jnp.float32)).compile()
            return options
        except Exception:  # noqa: BLE001 - XLA reports an unknown option or value in several ways
            continue
    return {}


def __getattr__(name):
    if name == "CPU_OPTIONS":  # computed on first use: the probe needs a back end
        return cpu_options()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _unstaged() -> bool:
    """Whether no ``jax.jit`` or differentiation traces the current call (a ``jax.vmap`` at
    the top level may: it batches the compiled program, options and all). JAX's trace context is
    a private API: a JAX without it gets the plain programs everywhere (correct, only slower)."""
    trace = getattr(getattr(core, "trace_ctx", None), "trace", None)
    if trace is None:
        return False
    while type(trace).__name__ == "BatchTrace":
        trace = getattr(trace, "parent_trace", None)
    return type(trace).__name__ == "EvalTrace"


def _dispatch(fun, make_fast, plain):
    fast = functools.cache(make_fast)  # made on the first call from Python (its options are probed then)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        return (fast() if _unstaged() else plain)(*args, **kwargs)

    # no attributes on ``call`` (such as ``fast.lower``): functools.wraps in jax.vmap and jax.jit
    # copies a function's attributes onto its wrappers, which would then lower ``fast``
    return call


def jit(fun=None, **kwargs):
    """``jax.jit(fun, **kwargs)`` compiled with :func:`cpu_options` when called from Python.

    For a user's function that takes a model as an argument, e.g.
    ``step = mbjax.jit(lambda model, q, qd, tau: mbjax.aba(model, q, qd, tau))``: on a CPU its
    calls then cost about what they would with the model closed over, and batched dynamics
    (``mbjax.jit(jax.vmap(...))``) run faster. Inside another transformation it is a plain
    ``jax.jit``. Usable as a decorator, with or without arguments
    (``@mbjax.jit(static_argnames="n")``).
    """
    if fun is None:
        return lambda f: jit(f, **kwargs)
    own = kwargs.pop("compiler_options", None) or {}
    return _dispatch(fun, lambda: jax.jit(fun, compiler_options={**cpu_options(), **own}, **kwargs),
                     jax.jit(fun, **kwargs))


def filter_jit(fun):
    """The same for ``eqx.filter_jit(fun)`` (entry points with non-array arguments)."""
    return _dispatch(fun, lambda: eqx.filter_jit(fun, compiler_options=cpu_options()), eqx.filter_jit(fun))
