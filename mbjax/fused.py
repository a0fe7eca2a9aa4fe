"""One state's program as a single XLA:CPU function: :func:`fused`.

A single call of ``aba`` on ur5 computes for about a microsecond (Pinocchio: 1.5 µs), yet cost
12 µs in session 39: XLA:CPU's runtime spent the rest on its 60-80 kernels (about 0.1 µs each,
a task of its thunk executor, which also hands kernels to its thread pool unless they form a
chain or number at most 8) and on its constants (67 ns each per call: every constant array of
the program, such as a model's masses or the tree's index tables, is a buffer that each call
wraps anew; ``benchmarks/bench_call_overhead.py``). Where the call being traced can be one
function (:func:`mbjax.compilation.one_function`: XLA:CPU's small-loop hoisting on,
:data:`mbjax.compilation.CPU_FLAGS`, and no ``jax.vmap`` batching it: an entry point called
from Python, or inside a user's ``jax.jit``), :func:`fused` makes it one:

- **In a while loop of one trip**, which XLA:CPU's ``SmallWhileLoopHoistingPass`` compiles into a
  single function of the program (a loop that accesses under the threshold and holds no library
  call): the kernels of its body are then plain calls. The trip count is hidden from XLA (the
  counter lies in the loop's state), or its simplifier would inline the loop, and the
  arguments are tied to the counter by a barrier, or its loop-invariant code motion would move
  the body out. The loop's state (counter, arguments, places for the results) is one buffer
  per floating dtype, integers and booleans bitcast into it: one kernel makes it.
- **Its constants folded and packed into one buffer.** The function is traced to a jaxpr and
  evaluated again from it: equations of constants only are computed at trace time, and the
  constant arrays the others take are slices of one concatenated constant per floating dtype
  (integers and booleans bitcast), behind ``lax.optimization_barrier`` (without it XLA's
  constant folding would slice the buffer back into as many constants). ``jit`` calls and
  custom rules' primal functions are inlined.
- **No library call, no reduction**: a small matrix's Cholesky factor and triangular solves
  (LAPACK's in JAX on a CPU) are written out entry by entry; in a program whose matrix products
  YNNPACK may take (a user's ``jax.jit``, with JAX's default options), those it would take are
  matrix-vector products, which it does not; reductions are elementwise operations (XLA:CPU
  allocates the scalars of a reduction's own computation on the heap at every call, about 0.2
  µs each).

Elsewhere (without the loop flag, or batched) :func:`mbjax.checks.checked` does not fuse: without
the loop, packed constants did not pay (YNNPACK, in JAX's default options, runs a product of
constants inline and one of slices on its thread pool). Interleaved, closed over with its checks,
in ``mbjax.jit(..., one_state=True)`` and in a plain ``jax.jit`` (sessions 39-41, mbjax's flags):
see benchmarks/README.md.

Only values go through the loop: derivatives are ``fun``'s own (a ``custom_jvp`` whose rule is
the jvp of ``fun``). :func:`mbjax.checks.checked` fuses the computation of mbjax's checked entry
points (``aba``, ``rnea``, ``crba`` and their derivatives) with the search for the first error.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core
from jax._src.pjit import jit_p

from .compilation import buffer_layout, own_dots, run_once_options


def fused(fun):
    """``fun`` (arrays in, a pytree of arrays out) as one function, for a call being traced that
    can be one (:func:`mbjax.compilation.one_function`, module docstring). Its derivatives are
    ``fun``'s own (a ``custom_jvp`` whose rule is the jvp of ``fun``): no differentiation goes
    through the loop; nor does a ``jax.vmap`` of the program that traced it (:func:`_unbatched`)."""
    @functools.wraps(fun)
    def call(*args):
        # concrete arguments (a model closed over by the tracing program) are closed over in
        # turn, so that they stay constants, packed with the others
        flat, tree = jax.tree_util.tree_flatten(args)
        concrete = [_concrete(x) for x in flat]

        def of_traced(*traced):
            values = iter(traced)
            return fun(*jax.tree_util.tree_unflatten(tree, [x if c else next(values) for x, c in zip(flat, concrete)]))

        run = jax.custom_jvp(_unbatched(of_traced))
        run.defjvp(lambda primals, tangents: jax.jvp(of_traced, primals, tangents))
        return run(*[x for x, c in zip(flat, concrete) if not c])

    return call


def _unbatched(fun):
    """``fun`` as one function (:func:`_run`), and ``fun`` itself where a ``jax.vmap`` batches
    it (a ``custom_vmap``): the vmap of a user's ``jax.jit`` whose trace fused a call, e.g.
    ``jax.vmap(jax.jit(lambda q, qd, tau: mbjax.aba(model, q, qd, tau)))``, batches the plain
    computation, not the loop of one state (6x slower for ur5 at 256 states)."""
    run = jax.custom_batching.custom_vmap(functools.partial(_run, fun))

    @run.def_vmap
    def rule(size, in_batched, *args):
        out = jax.vmap(fun, in_axes=tuple(0 if b else None for b in in_batched))(*args)
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return run


def _run(fun, *args):
    """``fun(*args)`` (arrays) as one function: with its constants packed, in a loop of one trip
    (:func:`_once`)."""
    return _once(functools.partial(_packed_constants, fun), jax.eval_shape(fun, *args), *args)


def _once(fun, results, *args):
    """``fun(*args)`` (of the shapes ``results``) in a while loop of one trip whose count XLA
    cannot see.

    The loop's state is one buffer per floating dtype (:func:`_stored`) that holds the trip
    counter's start and step (0 and 1), the arguments, and places for the results: made by one
    kernel (literals would be constants of their own, each a buffer that every call wraps
    anew, and each place of a result a kernel), and slices of one buffer (a model passed
    packed, :mod:`mbjax.compilation`) enter as that buffer, not as a copy each. The body ties
    the arguments to the counter (an optimisation barrier), or XLA's loop-invariant code motion
    would move the computation out of the loop."""
    places = [np.zeros(r.shape, r.dtype) for r in jax.tree_util.tree_leaves(results)]
    leaves = [np.array([0, 1], jax.dtypes.canonicalize_dtype(np.float64)), *args, *places]
    dtypes = [np.dtype(x.dtype) for x in leaves]
    stored = [_stored(x) for x in leaves]
    layout = buffer_layout(jax.tree_util.tree_structure(stored), tuple((jnp.shape(x), x.dtype) for x in stored))
    n = 1 + len(args)

    def unpack(buffers):
        return [_restored(x, dtype) for x, dtype in zip(layout.unpack(buffers), dtypes)]

    def body(buffers):
        counter, *xs = lax.optimization_barrier(unpack(buffers)[:n])
        out = jax.tree_util.tree_leaves(fun(*xs))
        return layout.pack([_stored(x) for x in [jnp.stack([counter[0] + counter[1], counter[1]]), *xs, *out]])

    def more(buffers):
        counter = unpack(buffers)[0]
        return counter[0] < counter[1]

    final = unpack(lax.while_loop(more, body, layout.pack(stored)))
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(results), final[n:])


def _stored(x):
    """``x`` as it lies in a packed buffer: a floating (or complex) array as it is; integers and
    booleans as JAX's default integers, bitcast into the floats of that width (exact), so that
    a program's arrays of every dtype share one buffer per floating dtype."""
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return x
    integer = jax.dtypes.canonicalize_dtype(np.int64)
    floating = np.dtype(f"float{8 * integer.itemsize}")
    if isinstance(x, np.ndarray):
        return x.astype(integer).view(floating)
    return lax.bitcast_convert_type(x.astype(integer), floating)


def _restored(x, dtype):
    """The array of ``dtype`` that :func:`_stored` stored as ``x``."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return x
    return lax.bitcast_convert_type(x, jax.dtypes.canonicalize_dtype(np.int64)).astype(dtype)


def _concrete(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic, int, float, bool, complex)) or (
        isinstance(x, jax.Array) and not isinstance(x, core.Tracer))


def _inlined(eqn, xs):
    """The jaxpr that stands for ``eqn`` in a primal evaluation and its inputs among ``xs``: a
    ``jit`` call's, the primal function of a ``custom_jvp`` or ``custom_vmap`` (a fused program
    is evaluated unbatched, and its derivatives are those of the function it fuses), and the
    solve of a ``custom_linear_solve`` (its solve's constants and right-hand side); else None."""
    if eqn.primitive is jit_p:
        return eqn.params["jaxpr"], xs
    if eqn.primitive.name == "custom_linear_solve":  # inputs: the matvec's, vecmat's, solve's, ... constants, then b
        n = eqn.params["const_lengths"]
        return eqn.params["jaxprs"].solve, xs[n.matvec + n.vecmat:n.matvec + n.vecmat + n.solve] + xs[sum(n):]
    inner = {"custom_jvp_call": eqn.params.get("call_jaxpr"), "custom_vmap_call": eqn.params.get("call")}.get(
        eqn.primitive.name)
    return None if inner is None else (inner, xs)


def _walk(closed, ins, equation):
    """``closed``'s outputs at ``ins``, its ``jit`` calls, custom rules' primal functions and
    linear solves inlined (:func:`_inlined`), the outputs of every other equation given by
    ``equation(eqn, inputs)`` (a list)."""
    def run(jaxpr, consts, ins):
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, ins))
        read = lambda v: v.val if isinstance(v, core.Literal) else env[v]  # noqa: E731
        for eqn in jaxpr.eqns:
            xs = [read(v) for v in eqn.invars]
            inner = _inlined(eqn, xs)
            outs = run(inner[0].jaxpr, inner[0].consts, inner[1]) if inner is not None else equation(eqn, xs)
            env.update((v, o) for v, o in zip(eqn.outvars, outs) if not isinstance(v, core.DropVar))
        return [read(v) for v in jaxpr.outvars]

    return run(closed.jaxpr, closed.consts, ins)


def _evaluate(closed, flat, constant, folded):
    """``closed``'s outputs at ``flat`` (traced, :func:`_walk`): an equation whose inputs are
    all concrete takes its outputs from ``folded`` (:func:`_folded`: constant folding, so that no
    constant computation is left for XLA to move out of a loop); ``constant(x)`` stands for a
    concrete array that a traced equation takes; library calls and reductions are written
    otherwise (:func:`_without_library`, :func:`_without_reduction`)."""
    folded = iter(folded)

    def equation(eqn, xs):
        if not eqn.effects and all(map(_concrete, xs)):
            return next(folded)
        xs = [constant(x) if _concrete(x) and np.ndim(x) > 0 else x for x in xs]
        outs = _without_library(eqn, xs)
        if outs is None:
            outs = _without_reduction(eqn, xs)
        if outs is None:
            with eqn.ctx.manager:
                outs = eqn.primitive.bind(*xs, **eqn.primitive.get_bind_params(eqn.params))
        return outs if eqn.primitive.multiple_results else [outs]

    return _walk(closed, flat, equation)


def _folded(closed, flat):
    """The outputs of the equations of ``closed`` whose inputs are all concrete when it is
    evaluated at ``flat`` (traced), in the order :func:`_evaluate` meets them, computed by one
    program that XLA compiles fast (:func:`mbjax.compilation.run_once_options`): computed one by
    one, each primitive was a program of its own for XLA to compile (58 of them, 1.1 s of the
    2.0 s that panda's fused ``aba`` took to trace; session 41)."""
    # the steps: an equation and its inputs, ("in", k) for the k-th concrete array, ("literal",
    # value), or ("out", step, j) for the j-th output of an earlier step; unknown values are None
    steps, arrays = [], {}

    def ref(x):
        if isinstance(x, tuple):
            return x
        if isinstance(x, (np.ndarray, jax.Array)):
            return ("in", arrays.setdefault(id(x), (len(arrays), x))[0])
        return ("literal", x)

    def equation(eqn, xs):
        if eqn.effects or not all(isinstance(x, tuple) or _concrete(x) for x in xs):
            return [None] * len(eqn.outvars)
        steps.append((eqn, [ref(x) for x in xs]))
        return [("out", len(steps) - 1, j) for j in range(len(eqn.outvars))]

    _walk(closed, [x if _concrete(x) else None for x in flat], equation)
    if not steps:
        return []

    def compute(*inputs):
        results = []
        for eqn, xs in steps:
            values = [inputs[x[1]] if x[0] == "in" else x[1] if x[0] == "literal" else results[x[1]][x[2]] for x in xs]
            out = eqn.primitive.bind(*values, **eqn.primitive.get_bind_params(eqn.params))
            results.append(out if eqn.primitive.multiple_results else [out])
        return results

    inputs = [x for _, x in sorted(arrays.values(), key=lambda e: e[0])]
    # lowered and called as a compiled program: executed now, even inside the trace of another
    return jax.jit(compute, compiler_options=run_once_options()).lower(*inputs).compile()(*inputs)


def _without_library(eqn, xs):
    """``eqn``'s output where it would be a library call, written so that it is not one (a
    library call would keep XLA:CPU from hoisting the loop); else None:

    - a matrix product that YNNPACK would take, where the program's products are not XLA's own
      (:func:`mbjax.compilation.own_dots`), as matrix-vector products (:func:`_vector_products`);
    - a Cholesky factorisation or a triangular solve (from the left) of one matrix, LAPACK's in
      JAX on a CPU, written out entry by entry. With L lower triangular:

        L[j, j] = sqrt(A[j, j] - sum_k<j L[j, k]^2),   L[i, j] = (A[i, j] - sum_k<j L[i, k] L[j, k]) / L[j, j]
        T x = b, T lower:  x_i = (b_i - sum_k<i T[i, k] x_k) / T[i, i]   (upper: from the last row up)

      (an indefinite matrix gives NaN, as LAPACK's factor does in JAX)."""
    if eqn.primitive.name == "dot_general":
        return None if own_dots() else _vector_products(eqn, *xs)
    name, a = eqn.primitive.name, xs[0]
    if a.ndim != 2:
        return None
    n = a.shape[0]
    if name == "cholesky":
        L = [[None] * n for _ in range(n)]
        for j in range(n):
            L[j][j] = jnp.sqrt(a[j, j] - sum((L[j][k] ** 2 for k in range(j)), 0.0))
            for i in range(j + 1, n):
                L[i][j] = (a[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), 0.0)) / L[j][j]
        zero = jnp.zeros((), a.dtype)
        return jnp.stack([jnp.stack([L[i][j] if j <= i else zero for j in range(n)]) for i in range(n)])
    if name == "triangular_solve" and eqn.params["left_side"] and xs[1].ndim == 2:
        b, T = xs[1], a.T if eqn.params["transpose_a"] else a
        rows = range(n) if eqn.params["lower"] != eqn.params["transpose_a"] else range(n - 1, -1, -1)
        x = {}
        for i in rows:
            r = b[i] - sum((T[i, k] * x[k] for k in x), 0.0)
            x[i] = r if eqn.params["unit_diagonal"] else r / T[i, i]
        return jnp.stack([x[i] for i in range(n)])
    return None


def _vector_products(eqn, lhs, rhs):
    """A ``dot_general`` of m x k by k x n matrices (per batch index) as one product of n
    matrix-vector pairs (the matrix repeated n times, each with one column of the other, the
    columns a batch dimension), where YNNPACK would take it: jaxlib 0.10's YNNPACK fusions take
    a product whose sides are both more than a vector and one of m, k, n at least 8, never a
    matrix-vector product, which XLA computes with its own loops. In a user's ``jax.jit`` (JAX's
    default options) ur5's ``aba`` has one such product, panda's and solo12's six (``A^T @
    flat`` over the tree's ancestor matrix), the derivatives their (nv, nv) products. Measured
    (session 41, pinned, one process each): n separate matrix-vector products ran up to 1.1 µs
    faster a call but compiled up to twice as long (panda's ``aba_derivatives``: 5.4 against
    2.7 s), sums of elementwise products 0.1-2 µs slower. Else None."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    m, n, k = (int(np.prod([x.shape[d] for d in dims], dtype=int)) for x, dims in ((lhs, lf), (rhs, rf), (lhs, lc)))
    if m == 1 or n == 1 or max(m, n, k) < 8:
        return None
    batch = tuple(lhs.shape[d] for d in lb)
    nb = len(batch)
    a = lax.transpose(lhs, (*lb, *lf, *lc)).reshape((*batch, 1, m, k))
    columns = lax.transpose(rhs, (*rb, *rf, *rc)).reshape((*batch, n, k))
    out = lax.dot_general(jnp.broadcast_to(a, (*batch, n, m, k)), columns,
                          (((nb + 2,), (nb + 1,)), (tuple(range(nb + 1)),) * 2),
                          precision=eqn.params["precision"], preferred_element_type=eqn.params["preferred_element_type"])
    return jnp.swapaxes(out, -1, -2).reshape((*batch, *(lhs.shape[d] for d in lf), *(rhs.shape[d] for d in rf)))


#: reductions and their elementwise operations (:func:`_without_reduction`)
_REDUCTIONS = {"reduce_sum": lax.add, "reduce_prod": lax.mul, "reduce_max": lax.max, "reduce_min": lax.min,
               "reduce_and": lax.bitwise_and, "reduce_or": lax.bitwise_or}


def _without_reduction(eqn, xs):
    """``eqn``'s output where it is a reduction, as elementwise operations: halves added (or
    maximised, ...) while more than 16 terms are left, then the terms one after the other;
    else None. In the one function, XLA:CPU allocates the scalars of each reduction's own
    computation on the heap at every call (ur5's ``aba``: 18 such buffers, about 1 µs of a 7.8
    µs call; session 40)."""
    op = _REDUCTIONS.get(eqn.primitive.name)
    x = xs[0]
    axes = tuple(eqn.params.get("axes", ()))
    if op is None or not axes or any(x.shape[a] == 0 for a in axes):
        return None
    rest = [d for i, d in enumerate(x.shape) if i not in axes]
    x = jnp.moveaxis(x, axes, tuple(range(len(axes)))).reshape((-1, *rest))
    terms = [x[i] for i in range(x.shape[0])]
    while len(terms) > 16:
        half = len(terms) // 2
        terms = [op(a, b) for a, b in zip(terms[:half], terms[half:2 * half])] + terms[2 * half:]
    return functools.reduce(op, terms)


def _packed_constants(fun, *args):
    """``fun(*args)``, evaluated from its jaxpr (:func:`_evaluate`) with the constant arrays
    its traced equations take sliced out of one buffer per dtype."""
    flat, in_tree = jax.tree_util.tree_flatten(args)
    closed, out_shape = jax.make_jaxpr(lambda *xs: fun(*jax.tree_util.tree_unflatten(in_tree, xs)),
                                       return_shape=True)(*flat)
    found = {}  # the constants' first pass: each array a traced equation takes, by id

    def record(x):
        found.setdefault(id(x), (x, np.asarray(x)))  # x kept: its id stays its own
        return x

    folded = _folded(closed, flat)
    jax.make_jaxpr(lambda *xs: _evaluate(closed, xs, record, folded))(*flat)
    arrays = [a for _, a in found.values()]
    stored = [np.ravel(_stored(a)) for a in arrays]
    dtypes = list(dict.fromkeys(a.dtype for a in stored))
    # the arguments behind the same barrier: in a loop, the constants then stay in its body
    buffers, flat = lax.optimization_barrier((tuple(
        jnp.asarray(np.concatenate([a for a in stored if a.dtype == dt])) for dt in dtypes), flat))
    slices, ends = [], dict.fromkeys(dtypes, 0)
    for a, s in zip(arrays, stored):
        b = buffers[dtypes.index(s.dtype)]
        slices.append(_restored(b[ends[s.dtype]:ends[s.dtype] + s.size], a.dtype).reshape(a.shape))
        ends[s.dtype] += s.size
    order = iter(slices)
    seen = {}

    def constant(x):  # the second pass meets the same arrays in the same order
        if id(x) not in seen:
            seen[id(x)] = (x, next(order))
        return seen[id(x)][1]

    out = _evaluate(closed, flat, constant, folded)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), out)

