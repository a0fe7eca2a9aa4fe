"""How mbjax compiles its entry points, and :func:`jit` for a user's functions of a model.

Four XLA:CPU options (:func:`cpu_options`), set on mbjax's own programs and on the functions
a user compiles with :func:`jit` (one state of a small model gets fewer, see below):

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
- **512-bit vectors where the CPU has them** (``xla_cpu_prefer_vector_width=512``; XLA prefers
  256-bit vectors by default, and a CPU without AVX-512 keeps its own widest). The batch-minor
  kernels' loops run along the states: on this project's AVX-512 machine batched ``aba``,
  ``rnea`` and ``crba`` were 10-17 % faster on ur5 to talos_reduced, with bitwise the same
  results, and single calls unchanged (``benchmarks/README.md``, session 37).

**One state of a small model: no YNNPACK.** An entry point that computes on one state
(``mbjax.aba(model, q, qd, tau)``, ``rnea``, ``crba``, the derivatives, the kinematics,
``simulate`` of one trajectory: ``one_state=True`` below) called from Python, not batched, for
a model with fewer than :data:`YNN_MIN_NV` coordinates, is compiled with
:func:`single_state_options`: the options above without YNNPACK, whose library calls cost more
than XLA's own loops on matrices this small (nv by nv, bodies by 6). Interleaved (session 38):
the public ``aba`` 16.9 -> 15.1 µs on ur5, 21.1 -> 18.6 on solo12 (with the cheaper checks),
``aba_derivatives`` 10-16 % faster on ur5, panda and solo12, ``simulate`` of panda over 1 s 2.82
-> 2.37 ms, compile times unchanged. From about 32 coordinates YNNPACK's products win (talos_reduced's
``aba_derivatives`` 78 against 83 µs without, talos_full's 108 against 117), so larger models
and batches keep :func:`cpu_options`. Such a program is traced in a context of its own
(:func:`own_dots`). With mbjax's flags (:func:`set_cpu_flags`), an entry point's computation
and checks for one state (unbatched) are compiled as one function (:func:`one_function`,
:mod:`mbjax.fused`), in these programs and in a user's ``jax.jit`` alike.

**Models packed into one buffer.** A compiled program takes each array of its arguments as an
input buffer, and XLA:CPU's call path costs about half a microsecond per buffer: a model passed
as an argument (17 arrays for ur5 as for talos_reduced) made ``mbjax.aba(model, q, qd, tau)``
cost 1.2-1.4x its program with the model closed over. Called from Python, :func:`jit` and
:func:`filter_jit` pass a :class:`~mbjax.Model` (a type registered with
:func:`packed_argument`) whose leaves are all ``jax.Array`` (immutable) as one buffer per
dtype, made on its first call and kept while the model lives (by identity, :func:`_packed`),
and the program slices the arrays back out of it (the slices fuse into their consumers): the
public ``aba`` then costs 1.16-1.18x its closed-over program on ur5 to talos_reduced, ``rnea``
1.11-1.32x, ``integrate`` 12 % less than before (session 28).

JAX accepts compiler options only on a ``jax.jit`` that no other ``jax.jit`` (or ``grad``)
traces, so :func:`jit` makes two programs of a function: with the options when it is called
from Python or from ``jax.vmap`` at the top level (the batched program keeps them), and a
plain ``jax.jit`` inside ``jax.jit`` or ``jax.grad`` (then the outer program's options apply).
mbjax's entry points (``mbjax.aba(model, q, qd, tau)`` called from Python, ``simulate``,
``simulate_batch``) are made this way; a user's own function of a model gets the same with
``mbjax.jit``, and a user's ``jax.jit`` with ``compiler_options=mbjax.compilation.CPU_OPTIONS``.
"""

from __future__ import annotations

import contextvars
import functools
import os
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core

from .allocator import reuse_freed_memory

_SCHEDULER = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"}
_YNN_DOTS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
_NO_YNN = {"xla_cpu_experimental_ynn_fusion_type": ""}
#: XLA:CPU's classic loop emitters (also the trajectory optimiser's option)
CLASSIC_EMITTERS = {"xla_cpu_use_fusion_emitters": False}
_WIDE_VECTORS = {"xla_cpu_prefer_vector_width": 512}

#: one state of a model with fewer coordinates than this runs without YNNPACK
#: (:func:`single_state_options`)
YNN_MIN_NV = 32


def _probed(candidates, requires=()) -> dict:
    """The options of ``candidates`` that the installed XLA accepts, added one after the other
    (an option it does not know would fail every compilation; XLA's other back ends ignore
    them). ``requires``: pairs (option, option it needs), the first kept only with the second."""
    options = {}
    for option in candidates:
        if any(option is a and not options.items() >= b.items() for a, b in requires):
            continue
        try:
            jax.jit(lambda x: x + 1, compiler_options={**options, **option}).lower(
                jnp.zeros((), jnp.float32)).compile()
            options.update(option)
        except Exception:  # noqa: BLE001 - XLA reports an unknown option or value in several ways
            continue
    return options


@functools.cache
def cpu_options() -> dict:
    """The XLA options of mbjax's programs (module docstring), those of them that the installed
    XLA knows, probed once, on first use. The 512-bit vectors only with YNNPACK's dots: XLA's
    own matrix products (jaxlib 0.10.2) with 512-bit vectors and
    ``--xla_cpu_multi_thread_eigen=false`` exhaust memory while compiling some shapes (a
    (17, 17) by (17, 13) float64 product: ``std::bad_alloc``)."""
    return _probed((_SCHEDULER, _YNN_DOTS, CLASSIC_EMITTERS, _WIDE_VECTORS), requires=((_WIDE_VECTORS, _YNN_DOTS),))


@functools.cache
def single_state_options() -> dict:
    """The XLA options of an entry point's program for one state of a model with fewer than
    :data:`YNN_MIN_NV` coordinates (module docstring): those of :func:`cpu_options` without
    YNNPACK (nor, then, the wide vectors)."""
    return _probed((_SCHEDULER, _NO_YNN, CLASSIC_EMITTERS))


@functools.cache
def run_once_options() -> dict:
    """The XLA options of a program that runs once, at trace time (:func:`mbjax.fused._folded`'s
    constant folding): XLA's backend optimisations off, which compile it in about half the time,
    and its classic loop emitters, four times faster again (panda's fused ``aba``: 0.43 -> 0.10 s,
    its first call traced in 0.33-0.34 s instead of 0.70-0.73; session 42)."""
    return _probed(({"xla_backend_optimization_level": 0}, {"xla_llvm_disable_expensive_passes": True}, CLASSIC_EMITTERS))


def _jaxlib_at_least(version: tuple) -> bool:
    """Whether the installed jaxlib is ``version`` or newer (read without starting JAX)."""
    try:
        from importlib.metadata import version as installed
        return tuple(int(x) for x in installed("jaxlib").split(".")[:2]) >= version
    except Exception:  # noqa: BLE001 - no jaxlib's metadata, or a version string of another form
        return False


#: XLA_FLAGS for mbjax on CPUs (:func:`set_cpu_flags`): Eigen's own thread pool off, every
#: while loop that accesses less than 100 MB hoisted into one kernel (XLA's default: 1 KB) and,
#: where jaxlib has the flag (0.10 on: an unknown flag in XLA_FLAGS ends the process), the
#: memory-optimised scheduler for every program, a user's plain ``jax.jit`` too
CPU_FLAGS = {"xla_cpu_multi_thread_eigen": "false",
             "xla_backend_extra_options": "xla_cpu_small_while_loop_byte_threshold=100000000",
             **({"xla_cpu_scheduler_type": _SCHEDULER["xla_cpu_scheduler_type"]} if _jaxlib_at_least((0, 10)) else {})}


def set_cpu_flags(environ=None, reuse_memory: bool = True) -> str:
    """Add :data:`CPU_FLAGS` to ``XLA_FLAGS`` (in ``environ``, by default ``os.environ``: this
    process and the processes it starts), keeping what is there: a flag already set stays as
    it is, and another backend option is kept beside the loop threshold. With
    ``reuse_memory``, also glibc's settings that keep freed memory for the next large result
    (:func:`mbjax.allocator.reuse_freed_memory`). Returns the new ``XLA_FLAGS``.

    XLA reads ``XLA_FLAGS`` once, when JAX makes its first backend: call this before JAX's
    first computation, e.g. at the top of a script, or set the flags in the shell
    (``mbjax flags`` prints them). Called again once JAX runs, it changes nothing if the
    flags are there (a notebook's cell run twice) and raises a ``RuntimeError`` if they are not.

    - ``--xla_cpu_multi_thread_eigen=false``: batched code 1.3-3x faster on a small CPU, and
      no rare hang of many host callbacks on XLA's pool (docs/errors.md).
    - Small while loops in one kernel: XLA:CPU runs every kernel of a loop's body as a task of
      its own (about 0.1 µs each), except in loops that access under a kilobyte, which it
      compiles into a single function (its ``SmallWhileLoopHoistingPass``). mbjax's batched
      level sweeps are such loops of a few megabytes (a chunk of 128 states): hoisted, batched
      ``aba`` ran 25-43 %, ``rnea`` 20-30 %, ``crba`` 20-40 % faster on ur5 to talos_reduced
      (benchmarks/README.md, session 38). The option is not a compiler option JAX can pass per
      program (it is a map of XLA's backend options), hence a flag for the whole process.
    - XLA:CPU's memory-optimised scheduler for every program (jaxlib 0.10 on), as mbjax's own
      programs have it (:func:`cpu_options`): a user's plain ``jax.jit`` of one state, whose
      kernels XLA's default scheduler hands to its thread pool, runs them on the calling thread.
      Interleaved in one process (session 45, the model an argument of a plain ``jax.jit``):
      ``jax.jacfwd`` of ``aba`` on ur5 121 -> 49 µs, panda 123 -> 57, solo12 175 -> 96,
      talos_reduced 280 -> 229; a gradient of a loss through ``aba`` 0.38-0.44x on ur5, panda and
      solo12; ``aba_derivatives`` of talos_reduced 168 -> 122; the fused entry points and batches
      the same within noise (batched ``jax.jacfwd`` of solo12 1.13-1.15x, of talos_reduced
      0.77-0.94x).
    - Freed memory reused (``reuse_memory``): a result above 32 MB (talos_reduced's mass
      matrices at B = 4096) is no longer fresh pages on every call; batched ``crba`` there 2.6-3.3x
      faster (:mod:`mbjax.allocator`, session 42).
    """
    environ = os.environ if environ is None else environ
    before = environ.get("XLA_FLAGS", "")
    flags = before.split()
    for name, value in CPU_FLAGS.items():
        at = [i for i, f in enumerate(flags) if f.split("=", 1)[0] == f"--{name}"]
        if not at:
            flags.append(f"--{name}={value}")
        elif name == "xla_backend_extra_options":  # a comma-separated list of key=value
            options = flags[at[0]].split("=", 1)[1].split(",") if "=" in flags[at[0]] else []
            key = value.split("=", 1)[0]
            if not any(o.split("=", 1)[0] == key for o in options):
                flags[at[0]] = f"--{name}=" + ",".join([o for o in options if o] + [value])
    after = " ".join(flags)
    if after != " ".join(before.split()) and environ is os.environ and _backend_made():
        raise RuntimeError("JAX's backend exists already and has read XLA_FLAGS without mbjax's flags: call "
                           "mbjax.compilation.set_cpu_flags() before JAX's first computation, or set XLA_FLAGS "
                           f"in the shell (mbjax flags prints {flags_line()!r})")
    environ["XLA_FLAGS"] = after
    if reuse_memory:
        reuse_freed_memory(environ)
    return after


def loops_hoisted() -> bool:
    """Whether XLA:CPU compiles mbjax's small while loops into one function: JAX's default
    backend is a CPU and ``XLA_FLAGS`` sets the loop threshold of :data:`CPU_FLAGS` (or a
    larger one). Read when a program is traced (XLA reads the flags once, when JAX makes its
    backend: set them before, :func:`set_cpu_flags`)."""
    key = "xla_cpu_small_while_loop_byte_threshold="
    flags = os.environ.get("XLA_FLAGS", "")
    if key not in flags or jax.default_backend() != "cpu":
        return False
    value = flags.split(key, 1)[1].split(",")[0].split()[0]
    return value.isdigit() and int(value) >= int(CPU_FLAGS["xla_backend_extra_options"].split("=")[1])


#: set while :func:`jit` traces a program of one state for :func:`single_state_options`
_ONE_STATE = contextvars.ContextVar("mbjax_one_state", default=False)


def one_function() -> bool:
    """Whether the call being traced can be compiled as one function (:mod:`mbjax.fused`):
    XLA:CPU hoists small loops (:func:`loops_hoisted`) and no ``jax.vmap`` batches the call
    (a ``jax.vmap`` of a ``jax.jit`` that traces it is not seen here, the jit's trace comes
    first: :func:`mbjax.fused.fused` routes it to the plain function)."""
    return loops_hoisted() and not batched()


def own_dots() -> bool:
    """Whether the program being traced computes its matrix products with XLA's own loops: one
    state's entry point compiled with :func:`single_state_options`. Elsewhere (a user's
    ``jax.jit``, JAX's default options; :func:`cpu_options`) YNNPACK takes some of them as
    library calls, which XLA:CPU does not hoist into one function."""
    return _ONE_STATE.get()


def batched() -> bool:
    """Whether a ``jax.vmap`` traces the current call."""
    return any(type(t).__name__ == "BatchTrace" for t in _traces())


def _traces():
    """JAX's traces of the current call, innermost first (a private API: without it, none)."""
    trace = getattr(_TRACE_CONTEXT, "trace", None)
    while trace is not None:
        yield trace
        trace = getattr(trace, "parent_trace", None)


def _one_state(fun):
    """``fun``, traced with :func:`own_dots`' context set (a function object of its own,
    so that JAX's trace caches keep its programs apart from ``fun``'s)."""
    @functools.wraps(fun)
    def traced(*args, **kwargs):
        token = _ONE_STATE.set(True)
        try:
            return fun(*args, **kwargs)
        finally:
            _ONE_STATE.reset(token)

    return traced


def _backend_made() -> bool:
    """Whether JAX has made a backend (and so read XLA_FLAGS). A private JAX API: a JAX without
    it answers no."""
    try:
        from jax._src import xla_bridge
    except ImportError:  # pragma: no cover
        return False
    return bool(getattr(xla_bridge, "_backends", None))


def flags_line() -> str:
    """:data:`CPU_FLAGS` as the value of an ``XLA_FLAGS`` setting."""
    return " ".join(f"--{name}={value}" for name, value in CPU_FLAGS.items())


def __getattr__(name):
    if name == "CPU_OPTIONS":  # computed on first use: the probe needs a back end
        return cpu_options()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: JAX's trace context and the type of its trace at the top level (private APIs: without
#: them every call takes :func:`_unstaged`'s path)
_TRACE_CONTEXT = getattr(core, "trace_ctx", None)
_EVAL_TRACE = getattr(core, "EvalTrace", None)


def _unstaged():
    """``None`` when a ``jax.jit`` or a differentiation traces the current call; otherwise
    whether a ``jax.vmap`` at the top level batches it (it batches the compiled program, options
    and all). JAX's trace context is a private API: a JAX without it gets the plain programs
    everywhere (correct, only slower)."""
    batched = False
    for trace in _traces():
        if type(trace).__name__ != "BatchTrace":
            return batched if type(trace).__name__ == "EvalTrace" else None
        batched = True
    return None


class _Layout:
    """Where a model's array leaves lie in its ``count`` packed buffers (one per dtype):
    ``treedef`` and, per leaf, its buffer, offset and shape. Interned (:func:`buffer_layout`), so that
    a compiled program's static argument compares and hashes by identity."""

    def __init__(self, treedef, count, places):
        self.treedef, self.count, self.places = treedef, count, places

    def pack(self, leaves):
        """The buffers of ``leaves`` (arrays of this layout's shapes and dtypes), one per dtype."""
        return tuple(jnp.concatenate([jnp.ravel(x) for x, (at, _, _) in zip(leaves, self.places) if at == b])
                     for b in range(self.count))

    def unpack(self, buffers):
        leaves = [buffers[b][o:o + int(np.prod(shape))].reshape(shape) for b, o, shape in self.places]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


@functools.cache
def buffer_layout(treedef, leaves) -> _Layout:
    """The layout of leaves ``((shape, dtype), ...)``: one buffer per dtype, in order of first use."""
    dtypes = list(dict.fromkeys(dtype for _, dtype in leaves))
    ends, places = [0] * len(dtypes), []
    for shape, dtype in leaves:
        b = dtypes.index(dtype)
        places.append((b, ends[b], shape))
        ends[b] += int(np.prod(shape))
    return _Layout(treedef, len(dtypes), tuple(places))


#: models packed by :func:`_packed`: ``{id(model): (weak reference, layout, buffers)}``
_PACKED = {}

#: the types whose instances :func:`jit` passes packed (:func:`packed_argument`)
_PACKABLE: tuple = ()


def packed_argument(cls):
    """Class decorator: compiled calls from Python take an instance of ``cls`` (a long-lived
    set of parameters, such as :class:`mbjax.Model`) packed, as :func:`_packed` makes it."""
    global _PACKABLE
    _PACKABLE = _PACKABLE + (cls,)
    return cls


def _packed(model):
    """``(layout, buffers)`` of a model whose leaves are all concrete ``jax.Array``, made once
    per model object and forgotten with it; ``None`` for others (tracers, NumPy arrays, which
    could change in place, or an object that cannot be weakly referenced)."""
    entry = _PACKED.get(id(model))
    if entry is not None and entry[0]() is model:
        return entry[1]
    leaves, treedef = jax.tree_util.tree_flatten(model)
    if not all(isinstance(x, jax.Array) and not isinstance(x, core.Tracer) for x in leaves):
        return None
    key = id(model)

    def forget(ref):
        if _PACKED.get(key, (None,))[0] is ref:
            del _PACKED[key]

    try:
        ref = weakref.ref(model, forget)
    except TypeError:  # not weakly referable: its buffers could outlive it
        return None
    layout = buffer_layout(treedef, tuple((x.shape, x.dtype) for x in leaves))
    buffers = layout.pack(leaves)
    _PACKED[key] = (ref, (layout, buffers))
    return layout, buffers


def _unpacking(fun):
    """``fun`` of arguments some of which are packed models: ``spec`` ((position, layout), ...)."""
    def run(spec, *args, **kwargs):
        args = list(args)
        for i, layout in spec:
            args[i] = layout.unpack(args[i])
        return fun(*args, **kwargs)

    return run


def _dispatch(fun, make_fast, plain, make_packed=None, one_state=False):
    # each made on its first call from Python (the options are probed then): "one" with
    # single_state_options, for an entry point of one state (``one_state``), not batched, of
    # models with fewer than YNN_MIN_NV coordinates, traced in _one_state's context; "batch"
    # with cpu_options otherwise
    options = {"one": single_state_options, "batch": cpu_options}
    traced = {"one": _one_state(fun), "batch": fun}
    fast = functools.cache(lambda kind: make_fast(options[kind](), traced[kind]))
    packed = None if make_packed is None else functools.cache(
        lambda kind: make_packed(options[kind](), traced[kind]))
    alone = None  # the program of an unbatched call without models, once made

    def made():
        nonlocal alone
        alone = fast("one" if one_state else "batch")
        return alone

    def with_models(batched, args, kwargs):
        small, spec, flat = not batched, [], list(args)
        for i, x in enumerate(args):
            if isinstance(x, _PACKABLE):
                small = small and x.nv < YNN_MIN_NV
                if packed is not None and (found := _packed(x)) is not None:
                    spec.append((i, found[0]))
                    flat[i] = found[1]
        kind = "one" if one_state and small else "batch"
        if spec:
            return packed(kind)(tuple(spec), *flat, **kwargs)
        return fast(kind)(*args, **kwargs)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        # a call from Python without a model argument in as few Python steps as can be: the
        # general path below costs 1 µs of a 5 µs floor (session 40)
        if type(getattr(_TRACE_CONTEXT, "trace", None)) is _EVAL_TRACE:
            for x in args:
                if isinstance(x, _PACKABLE):
                    return with_models(False, args, kwargs)
            return (alone or made())(*args, **kwargs)
        batched = _unstaged()
        if batched is None:
            # inlined where the call can be one function (one_function), rather than traced
            # as a jit of its own, whose trace JAX would reuse in other contexts; a model it
            # closes over then stays constants, which mbjax.fused packs
            if _ONE_STATE.get() or one_function():
                return fun(*args, **kwargs)
            return plain(*args, **kwargs)
        return with_models(batched, args, kwargs)

    # no attributes on ``call`` (such as ``fast.lower``): functools.wraps in jax.vmap and jax.jit
    # copies a function's attributes onto its wrappers, which would then lower ``fast``
    return call


def jit(fun=None, *, one_state=False, **kwargs):
    """``jax.jit(fun, **kwargs)`` compiled with :func:`cpu_options` when called from Python.

    For a user's function that takes a model as an argument, e.g.
    ``step = mbjax.jit(lambda model, q, qd, tau: mbjax.aba(model, q, qd, tau))``: on a CPU its
    calls then cost about what they would with the model closed over, and batched dynamics
    (``mbjax.jit(jax.vmap(...))``) run faster. ``one_state=True`` says that ``fun`` computes
    on one state (no ``jax.vmap`` inside): its calls for models with fewer than
    :data:`YNN_MIN_NV` coordinates are then compiled with :func:`single_state_options`, unless
    a ``jax.vmap`` batches them. Inside another transformation it is a plain ``jax.jit``.
    Usable as a decorator, with or without arguments (``@mbjax.jit(static_argnames="n")``).
    """
    if fun is None:
        return lambda f: jit(f, one_state=one_state, **kwargs)
    own = kwargs.pop("compiler_options", None) or {}
    # with static arguments of the user's, the plain argument order stays (no packing)
    packed = None if kwargs else lambda options, f: jax.jit(_unpacking(f), static_argnums=0,
                                                            compiler_options={**options, **own})
    return _dispatch(fun, lambda options, f: jax.jit(f, compiler_options={**options, **own}, **kwargs),
                     jax.jit(fun, **kwargs), packed, one_state)


def filter_jit(fun=None, *, one_state=False):
    """The same for ``eqx.filter_jit(fun)`` (entry points with non-array arguments)."""
    if fun is None:
        return lambda f: filter_jit(f, one_state=one_state)
    return _dispatch(fun, lambda options, f: eqx.filter_jit(f, compiler_options=options), eqx.filter_jit(fun),
                     lambda options, f: eqx.filter_jit(_unpacking(f), compiler_options=options), one_state)
