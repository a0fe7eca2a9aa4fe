"""Level sweeps over the tree with the states as the last axis ("batch-minor" layout).

Under ``jax.vmap`` an algorithm written for one state works on arrays of shape
(B, bodies, 6, 6): tiny minor dimensions, which XLA:CPU neither vectorises nor keeps in
cache. The sweeps here carry C states in the *last* axis of every array instead (C = 1 for
a single call): a 6-vector is (6, C), an inertia (6, 6, C), and every product is a
multiply-add over leading axes, vectorised along C. :func:`batch_rule` routes ``jax.vmap``
of a kernel to it (``jax.custom_batching.custom_vmap``), transposing the batch to the last
axis and running it in chunks of :data:`CHUNK` states (``lax.map``), so that the working
set stays in cache and the time per state does not grow with the batch.

Levels are those of ``model.topology``: the root level on its own (a free base makes it
wider), the others in a ``lax.scan`` per segment of ``topology.sweep`` (:func:`sweep_down`,
:func:`sweep_up`): at most three runs of levels, each padded to its own widest level (W bodies
of w coordinates) and compiled once, whatever the depth. Within a run a body keeps its parent's
slot where it can, so that runs without branchings skip the products with the parent tables.
Padding bodies have zero inertia and padding coordinates zero motion, so they contribute
exactly nothing.

Everything is in world coordinates, as in :mod:`mbjax.kinematics`: motions (linear,
angular), forces (force, moment about the world origin).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics import joint_bias
from ..model.model import Model
from ..model.tree import as_index, map_joints, rows, take
from ..spatial import computed_once

#: states per chunk of a batched call: large enough to amortise XLA:CPU's per-kernel
#: launch cost, small enough that a chunk's temporaries stay in cache
#: (``benchmarks/bench_chunk.py`` measures the choice)
CHUNK = 128

#: states per chunk of the derivative kernels, whose arrays per state are ~nv times the
#: dynamics' (a column per coordinate): batched ``aba_derivatives`` (B = 256) 15-29 % faster
#: in chunks of 64 than of 128 (talos_reduced 52.1 -> 44.6 us per state, solo12 15.8 -> 12.2),
#: ``jax.jacfwd(aba)`` 7-16 %; chunks of 32 within 4 % of 64 (session 47,
#: ``benchmarks/bench_chunk.py``). The batched ``aba`` / ``rnea`` / ``crba`` of solo12 and
#: talos_reduced are 2-16 % slower in chunks of 64 than of 128
DERIVATIVE_CHUNK = 64

#: smaller batches run the single-state function vmapped: below MIN_BATCH states, or below
#: SWEEP_BODIES / nbodies of them, the level sweeps' fixed cost per kernel outweighs what the
#: batch-minor layout saves, the more so the fewer bodies a state has (:func:`min_batch`)
MIN_BATCH = 16
#: batched aba, per state, vmapped one-state function against the sweeps (session 36): ur5 (6
#: bodies) 3.7 / 7.2 us at B = 16, even at 64; panda (9) 5.4 / 8.3 at 16, 3.4 / 3.8 at 32, the
#: sweeps ahead at 64; solo12 (13) ahead from 32; talos_reduced (33) from 16
SWEEP_BODIES = 384


def min_batch(model: Model) -> int:
    """The fewest states a vmap runs through the level sweeps."""
    return max(MIN_BATCH, SWEEP_BODIES // max(model.topology.nbodies, 1))


# ----------------------------------------------------------------- batch-minor algebra
def T(A):
    """Transpose of (..., m, n, C) matrices."""
    return jnp.swapaxes(A, -2, -3)


#: the components (1, 2, 0) and (2, 0, 1) of a 3-vector
_NEXT, _LAST = np.array([1, 2, 0]), np.array([2, 0, 1])


def cross(a, b):
    """a x b for 3-vectors (..., 3, C): (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0), as
    products of the vectors' permuted components rather than a stack of the three differences,
    which XLA:CPU's loop emitters write element by element (a batch's cross_motion 6.7 against
    2.3 ns per body and state, the same numbers; talos_reduced's batched rnea and aba 6-8 %
    faster; session 37). One state (C = 1) or one vector per state keeps the stack: with the
    permutations the one-state derivatives were 2-3 % slower, and ur5's batched rnea and aba,
    whose levels are one body wide, 7-8 %."""
    if a.shape[-1] == 1 or np.prod(a.shape[:-2], dtype=int) == 1:
        a0, a1, a2 = a[..., 0, :], a[..., 1, :], a[..., 2, :]
        b0, b1, b2 = b[..., 0, :], b[..., 1, :], b[..., 2, :]
        return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -2)
    return a[..., _NEXT, :] * b[..., _LAST, :] - a[..., _LAST, :] * b[..., _NEXT, :]


def skew(a):
    """[a]x (..., 3, 3, C) of 3-vectors a (..., 3, C): [a]x b = a x b."""
    x, y, z = a[..., 0, :], a[..., 1, :], a[..., 2, :]
    zero = jnp.zeros_like(x)
    return jnp.stack([jnp.stack([zero, -z, y], -2), jnp.stack([z, zero, -x], -2), jnp.stack([-y, x, zero], -2)], -3)


def total(x, axis):
    """``jnp.sum(x, axis)``: the same additions, each written a - (-b) (exact, signed zeros
    included), so that the reduction is XLA's own under any compiler options. jaxlib 0.10's
    default options hand sums to YNNPACK library calls, which ``mbjax.jit`` turns off but a
    plain ``jax.jit`` around a user's vmap does not: talos_reduced's batched ``rnea`` took 3.5
    against 2.2 us per state that way (session 36). One state (C = 1) keeps ``jnp.sum``, which
    XLA folds into the adds of its neighbours (the one-state derivatives were 2-5 % slower with
    the rewritten additions)."""
    if x.shape[-1] == 1:
        return jnp.sum(x, axis=axis)
    return jax.lax.reduce(x, np.array(0, x.dtype), lambda a, b: a - (-b), (axis % x.ndim,))


def mv(A, x):
    """A x for (..., m, n, C) and (..., n, C)."""
    return total(A * x[..., None, :, :], -2)


def mm(A, B):
    """A B for (..., m, k, C) and (..., k, n, C)."""
    return total(A[..., :, :, None, :] * B[..., None, :, :, :], -3)


def symmetric_outer(X, G):
    """X^T G X (..., n, n, C) of rows X (..., k, n, C) and a symmetric G (..., k, k, C), exactly
    symmetric: sum over a <= b of G_ab (x_a x_b^T + x_b x_a^T) (x_a x_a^T once for a = b), so
    that entry (i, j) and entry (j, i) add the same products in the same order. All elementwise
    (no transposed reads, no reductions): XLA fuses it with its consumers."""
    k = X.shape[-3]
    out = 0.0
    for a in range(k):
        for b in range(a, k):
            o = X[..., a, :, None, :] * X[..., b, None, :, :]
            if b != a:
                o = o + X[..., b, :, None, :] * X[..., a, None, :, :]
            out = out + G[..., a, b, None, None, :] * o
    return out


def dot(a, b):
    """a . b over the structure axis: (..., n, C) -> (..., C)."""
    return total(a * b, -2)


def transform_motion(R, p, m):
    """Motion given in a frame with pose (R, p) in the world, expressed in the world."""
    w = mv(R, m[..., 3:, :])
    return jnp.concatenate([mv(R, m[..., :3, :]) + cross(p, w), w], -2)


def transform_force(R, p, f):
    """Force given in a frame with pose (R, p) in the world, expressed in the world."""
    lin = mv(R, f[..., :3, :])
    return jnp.concatenate([lin, mv(R, f[..., 3:, :]) + cross(p, lin)], -2)


def cross_motion(a, m):
    """a x m (spatial motions)."""
    av, aw, mv_, mw = a[..., :3, :], a[..., 3:, :], m[..., :3, :], m[..., 3:, :]
    return jnp.concatenate([cross(aw, mv_) + cross(av, mw), cross(aw, mw)], -2)


def cross_force(a, f):
    """a x* f (motion a, force f)."""
    av, aw, fl, fa = a[..., :3, :], a[..., 3:, :], f[..., :3, :], f[..., 3:, :]
    return jnp.concatenate([cross(aw, fl), cross(aw, fa) + cross(av, fl)], -2)


def gather(x, index):
    """Rows ``index`` (a static or traced integer array) of ``x``."""
    return jnp.take(x, index, axis=0, mode="clip")


def parent_rows(P, x):
    """Rows of the level above for each slot: ``P @ x`` with P the one-hot (W, W) parent table
    (``None``: every slot's parent is in the same slot)."""
    return x if P is None else jnp.tensordot(P, x, axes=1)


def to_parents(P, x):
    """Sums of the children's rows into their parents' slots: ``P^T @ x``."""
    return x if P is None else jnp.tensordot(P.T, x, axes=1)


# ----------------------------------------------------------------------- body terms
class Bodies(NamedTuple):
    """Per-body quantities of one level, world frame, C states in the last axis."""

    R: jax.Array  # (W, 3, 3, C) orientations
    p: jax.Array  # (W, 3, C) origins
    S: jax.Array  # (W, w, 6, C) motion subspace of each joint coordinate
    v: jax.Array  # (W, 6, C) spatial velocities
    c: jax.Array  # (W, 6, C) velocity-product accelerations v x vJ + Ad(cJ)
    inertia: tuple  # world inertias (m, h, I_O): (W, 1, 1), (W, 3, C), (W, 3, 3, C)
    p_bias: jax.Array  # (W, 6, C) bias forces v x* I v - f_ext


class Joints(NamedTuple):
    """Joint data of every body (a padding row at index nb, or nv for coordinates)."""

    R: jax.Array  # (nb + 1, 3, 3, C) body pose in its parent (placement * X_J(q))
    p: jax.Array  # (nb + 1, 3, C)
    S: jax.Array  # (nv + 1, 6, C) motion subspace rows, child frame
    cJ: jax.Array | None  # (nb + 1, 6, C) joint velocity-product terms, child frame
    f_ext: jax.Array | None  # (nb + 1, 6, C) body-frame external wrenches


def pad(x, axis=0):
    """``x`` with a zero row appended along ``axis`` (the padding body or coordinate)."""
    width = [(0, 0)] * x.ndim
    width[axis] = (0, 1)
    return jnp.pad(x, width)


def joints(model: Model, q, qd=None, f_ext=None) -> Joints:
    """Joint transforms and subspaces of all bodies, from q (nq, C) (and qd (nv, C), f_ext
    (nb, 6, C)): the poses by each joint type's ``placed`` (batch-minor), the subspaces and
    velocity-product terms by its row-wise methods mapped over the states."""
    topo = model.topology
    over_states = lambda f: jax.vmap(f, in_axes=-1, out_axes=-1)  # noqa: E731

    def motion(g):
        at = as_index(g.body)
        axis, qg = take(model.joint_axis, at), rows(q, g.q)
        R, p = g.joint.placed(take(model.joint_rotation, at), take(model.joint_translation, at), axis, qg)
        return R, p, over_states(lambda x: g.joint.motion_subspace(axis, x))(qg)

    R, p, S = map_joints(topo, motion, ("body", "body", "v"))
    cJ = None
    if qd is not None and topo.has_bias:
        cJ = pad(over_states(lambda x, y: joint_bias(model, x, y))(q, qd))
    return Joints(pad(R), pad(p), pad(S), cJ, None if f_ext is None else pad(f_ext))


def body_inertias(model: Model, body):
    """The inertias ``(m, c, I_c)`` of ``body`` (static indices of any shape; nb, the padding
    body: zeros) in their body frames, I_c symmetrised (only its symmetric part is physical).
    Taken once per call, for the levels' bodies stacked, so that the level scans (and the
    chunks' loop around them) only read them: gathered inside the scans they were three kernels
    per level and chunk."""
    Ib = pad(model.inertia)[body]
    return pad(model.mass)[body], pad(model.com)[body], 0.5 * (Ib + jnp.swapaxes(Ib, -1, -2))


def world_inertia(inertia, R, p):
    """World inertias ``(m, h, I_O)`` ((W, 1, 1), (W, 3, C), (W, 3, 3, C)) of bodies with
    inertias ``(m, c, I_c)`` (:func:`body_inertias`, (W,), (W, 3), (W, 3, 3)) at poses (R, p):
    h = m c, I_O = R I_c R^T + m (|c|^2 E - c c^T) (:func:`mbjax.spatial.world_inertia`)."""
    m, com, Ib = inertia
    m, com, Ib = m[:, None, None], com[..., None], Ib[..., None]
    c = mv(R, com) + p
    eye = jnp.eye(3, dtype=p.dtype)[:, :, None]
    # R I_c R^T by two products: reductions, which XLA stores once, where the elementwise form of
    # symmetric_outer was fused into each of its consumers (panda's batched rnea 1.43 -> 1.82 us)
    IO = mm(mm(R, Ib), T(R)) + m[..., None] * (dot(c, c)[:, None, None] * eye - c[:, :, None] * c[:, None, :])
    return m, m * c, IO


def inertia_matrix(m, h, IO):
    """The spatial inertias (..., 6, 6, C) [[m E, -[h]x], [[h]x, I_O]] of world inertias."""
    H = skew(h)
    mE = m[..., None] * jnp.eye(3, dtype=h.dtype)[:, :, None] * jnp.ones_like(H)
    return jnp.concatenate([jnp.concatenate([mE, -H], -2), jnp.concatenate([H, IO], -2)], -3)


def inertia_apply(m, h, IO, x):
    """The momentum I x of a world inertia and a motion x = (v, w): (m v - h x w, h x v + I_O w)."""
    v, w = x[..., :3, :], x[..., 3:, :]
    return jnp.concatenate([m * v - cross(h, w), cross(h, v) + mv(IO, w)], -2)


def bodies(model: Model, jt: Joints, body, dofs, inertia, parent, qd=None) -> Bodies:
    """Body terms of one level (body (W,), dofs (W, w), their :func:`body_inertias`) from its
    parents' poses and velocities ``parent = (R, p, v)`` (each (W, ...), already gathered; the
    world for the roots).

    v = v_parent + S qd,  c = v x (S qd) + Ad(c_J)   (RBDA Sec. 7.3, world coordinates)
    """
    Rp, pp, vp = parent
    Rl, pl = gather(jt.R, body), gather(jt.p, body)
    R = mm(Rp, Rl)
    p = pp + mv(Rp, pl)
    S = transform_motion(R[:, None], p[:, None], gather(jt.S, dofs))
    inertia = world_inertia(inertia, R, p)
    if qd is None:
        return Bodies(R, p, S, None, None, inertia, None)
    vJ = mv(T(S), gather(pad(qd), dofs))
    v = vp + vJ
    c = cross_motion(v, vJ)
    if jt.cJ is not None:
        c = c + transform_motion(R, p, gather(jt.cJ, body))
    p_bias = cross_force(v, inertia_apply(*inertia, v))
    if jt.f_ext is not None:
        p_bias = p_bias - transform_force(R, p, gather(jt.f_ext, body))
    return Bodies(R, p, S, v, c, inertia, p_bias)


def root_parent(model: Model, n, C, dtype):
    """Pose and velocity of the world, as the parent of the n root bodies."""
    R = jnp.broadcast_to(jnp.eye(3, dtype=dtype)[None, :, :, None], (n, 3, 3, C))
    return R, jnp.zeros((n, 3, C), dtype), jnp.zeros((n, 6, C), dtype)


def sweep_down(model: Model, step, carry, xs):
    """Root to leaves: ``lax.scan(step, ...)`` over each segment of the sweep
    (:class:`mbjax.model.topology.Segment`). ``carry``: the root level's values (n0 rows);
    ``xs``: one tuple of stacked per-level inputs per segment; ``step(carry, *inputs, P)``
    gets one level's inputs and its parent table P. Returns the outputs of each segment."""
    outs = []
    for seg, x in zip(model.topology.sweep.segments, xs):
        E, P = _tables(seg, _dtype(carry))
        carry = jax.tree_util.tree_map(lambda c: parent_rows(E, c), carry)
        carry, out = jax.lax.scan(lambda c, a: step(c, *a[0], a[1]), carry, (tuple(x), P))
        outs.append(out)
    return outs


def sweep_up(model: Model, step, zero, xs):
    """Leaves to root: ``lax.scan(step, ..., reverse=True)`` over each segment, the last one
    first. ``step(acc, *inputs, P)`` returns (what the level passes to its parents, summed
    into their slots with ``to_parents(P, .)``, and the level's output); ``zero(W)`` is the
    carry of a level without children. Returns what the roots receive (n0 rows) and the
    outputs of each segment."""
    segments = model.topology.sweep.segments
    outs = [None] * len(segments)
    acc = None
    for i in reversed(range(len(segments))):
        seg = segments[i]
        acc = zero(seg.body.shape[1]) if acc is None else acc
        E, P = _tables(seg, _dtype(acc))
        acc, outs[i] = jax.lax.scan(lambda c, a: step(c, *a[0], a[1]), acc, (tuple(xs[i]), P), reverse=True)
        acc = jax.tree_util.tree_map(lambda c: to_parents(E, c), acc)
    return acc, outs


def _tables(seg, dtype):
    """A segment's entry and parent tables; ``None`` for parent tables that are all the identity
    (every body in its parent's slot: no product in the scan's body)."""
    P = None if seg.chains else jnp.asarray(seg.parent, dtype)
    return jnp.asarray(seg.entry, dtype), P


def _dtype(tree):
    return jax.tree_util.tree_leaves(tree)[0].dtype


def level_bodies(model: Model, jt: Joints, qd=None):
    """Body terms of the root level, then of the other levels stacked per segment
    ((n, W, ...) each) by :func:`sweep_down` (the poses of a level are its parents' composed)."""
    sw = model.topology.sweep
    C = jt.R.shape[-1]
    dtype = jt.R.dtype
    root = sw.root
    n0 = len(root.bodies)
    body0 = np.asarray(root.bodies)
    b0 = bodies(model, jt, body0, root.dofs, body_inertias(model, body0), root_parent(model, n0, C, dtype), qd)

    def step(prev, body, dofs, m, com, Ib, P):
        b = bodies(model, jt, body, dofs, (m, com, Ib), tuple(parent_rows(P, x) for x in prev), qd)
        return (b.R, b.p, b.v if qd is not None else prev[2]), b

    init = (b0.R, b0.p, b0.v if qd is not None else jnp.zeros((n0, 6, C), dtype))
    xs = [(seg.body, seg.dofs) + body_inertias(model, seg.body) for seg in sw.segments]
    return b0, sweep_down(model, step, init, xs)


def slots(x0, xs, lead=1):
    """The rows of every level in one array, in slot order: the root level's (n0, ...) and
    each segment's (n, W, ...); ``lead=2`` for per-coordinate rows (n0, w0, ...), (n, W, w, ...)."""
    flat = [x0.reshape((-1,) + x0.shape[lead:])] + [x.reshape((-1,) + x.shape[lead + 1:]) for x in xs]
    return jnp.concatenate(flat)


def body_slots(model: Model):
    """The slot of :func:`slots` that holds each body (nb,), static."""
    topo = model.topology
    sw = topo.sweep
    bodies = np.concatenate([np.asarray(sw.root.bodies, np.int32)] + [seg.body.reshape(-1) for seg in sw.segments])
    slot = np.empty(topo.nbodies + 1, np.int32)  # entry nb: the padding slots
    slot[bodies] = np.arange(len(bodies))
    return slot[: topo.nbodies]


def coordinates(model: Model, x0, xs):
    """Per-coordinate results (nv, ...) in q order, from the root level's (n0, w0, ...) and
    each segment's (n, W, w, ...)."""
    return gather(slots(x0, xs, lead=2), model.topology.sweep.dof_order)


def spd_inverse(D):
    """Inverse of symmetric positive definite (..., w, w, C) matrices, w small: Cholesky
    D = L L^T, X = L^-1 by substitution, D^-1 = X^T X, written out entry by entry (every
    operation elementwise along the states)."""
    w = D.shape[-2]
    if w == 1:
        return 1.0 / D
    L = [[None] * w for _ in range(w)]
    for j in range(w):
        d = jnp.sqrt(D[..., j, j, :] - sum(L[j][k] ** 2 for k in range(j)))
        L[j][j] = d
        for i in range(j + 1, w):
            L[i][j] = (D[..., i, j, :] - sum(L[i][k] * L[j][k] for k in range(j))) / d
    X = [[None] * w for _ in range(w)]
    for i in range(w):
        X[i][i] = 1.0 / L[i][i]
        for j in range(i):
            X[i][j] = -sum(L[i][k] * X[k][j] for k in range(j, i)) * X[i][i]
    rows = [[sum(X[k][a] * X[k][b] for k in range(max(a, b), w)) for b in range(w)] for a in range(w)]
    return jnp.stack([jnp.stack(r, -2) for r in rows], -3)


# -------------------------------------------------------------------------- batching
def routed(kernel, plain, unpack=None, derivatives=False):
    """``fn(model, *states)``: ``plain(model, *states)``, the same function written for one
    state, whose values come from ``kernel`` when vmapped (:func:`batch_rule`) and whose
    derivatives (forward and reverse mode, with respect to the model too) are plain's."""
    fast = batch_rule(kernel, plain, unpack, derivatives)

    @jax.custom_jvp
    def fn(model, *xs):
        return fast(model, *xs)

    @fn.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(plain, primals, tangents)

    return fn


def batch_rule(kernel, single=None, unpack=None, derivatives=False):
    """``fn(model, *states)`` that runs ``kernel`` on the batch-minor layout when vmapped.

    ``kernel(model, *states)`` takes every state (an array per state, e.g. q (nq,)) with the
    C states in a last axis and returns one output with them last too (or a tuple of them),
    or, with ``unpack``, a packed output that ``unpack(model, out)`` (states first) turns into
    single's. Unbatched calls run ``single(model, *states)``, by default the kernel with C = 1
    (on XLA:CPU a few large matrix products can beat the level sweeps for one state).
    ``kernel=None``: a vmap of ``single`` over each chunk instead (states first). A vmap over
    the model, or over fewer than :func:`min_batch` states, falls back to a vmap of the single
    call. Chunks of :data:`CHUNK` states, or of :data:`DERIVATIVE_CHUNK` for ``derivatives``
    (both read when the vmap is traced).
    """
    if single is None:
        single = one_state(kernel)
    single = jax.jit(single)
    fn = jax.custom_batching.custom_vmap(single)
    # a few states: ``single`` vmapped, unless a vmap around this one makes the batch larger
    # (e.g. steps within segments): then the rule runs again on all the states at once
    few = jax.custom_batching.custom_vmap(lambda model, *xs: jax.vmap(lambda *ys: single(model, *ys))(*xs))

    @fn.def_vmap
    def rule(axis_size, in_batched, model, *xs):
        if _over_models(in_batched):
            return _batched(jax.vmap(single, in_axes=_axes(in_batched))(model, *xs))
        xs = _broadcast(axis_size, xs, in_batched[1:])
        if axis_size < min_batch(model):
            return _batched(few(model, *xs))
        chunk = DERIVATIVE_CHUNK if derivatives else CHUNK
        if kernel is None:
            return _batched(run_chunked(jax.vmap(lambda *ys: single(model, *ys)), axis_size, xs, chunk, minor=False))
        out = run_chunked(lambda *ys: kernel(model, *ys), axis_size, xs, chunk, spread=unpack is not None)
        return _batched(out if unpack is None else unpack(model, out))

    @few.def_vmap
    def few_rule(axis_size, in_batched, model, *xs):
        if _over_models(in_batched):
            return _batched(jax.vmap(few.fun, in_axes=_axes(in_batched))(model, *xs))
        xs = _broadcast(axis_size, xs, in_batched[1:])
        flat = [None if x is None else x.reshape((-1,) + x.shape[2:]) for x in xs]
        out = jax.vmap(lambda *ys: fn(model, *ys))(*flat)
        return _batched(jax.tree_util.tree_map(lambda y: y.reshape((axis_size, -1) + y.shape[1:]), out))

    return fn


def _batched(out):
    """A batching rule's result: ``out`` and, for each of its arrays, that it is batched."""
    return out, jax.tree_util.tree_map(lambda _: True, out)


def _over_models(in_batched) -> bool:
    """Whether a vmap batches the model (then the functions are vmapped as they are)."""
    return any(jax.tree_util.tree_leaves(in_batched[0]))


def _axes(in_batched):
    """``in_axes`` of the batched arguments (model, *states)."""
    return tuple(jax.tree_util.tree_map(lambda b: 0 if b else None, b) for b in in_batched)


def _broadcast(axis_size, xs, batched):
    """The states ``xs`` with the ones a vmap does not batch repeated along its axis."""
    return [x if b or x is None else jnp.broadcast_to(x, (axis_size,) + x.shape) for x, b in zip(xs, batched)]


def one_state(kernel):
    """``kernel`` on one state (C = 1): ``fn(model, *states)`` without the states' last axis."""
    def single(model, *xs):
        out = kernel(model, *(None if x is None else x[..., None] for x in xs))
        return jax.tree_util.tree_map(lambda y: y[..., 0], out)

    return single


def run_chunked(kernel, B, xs, chunk, minor=True, spread=False):
    """``kernel`` over a batch (B, ...) of each of ``xs``, in chunks of ``chunk``; with ``minor`` the
    states of a chunk are moved to the last axis (and the kernel's results back). The kernel
    returns one array or a tuple of them; ``spread``: one array whose rows a gather after the
    loop reads in any order (the mass matrix's entries)."""
    C = min(B, chunk)
    n = -(-B // C)
    last = lambda x: x if x is None or not minor else computed_once(jnp.moveaxis(x, 0, -1))  # noqa: E731
    first = lambda y: jnp.moveaxis(y, -1, 0) if minor else y  # noqa: E731
    if n == 1:
        return jax.tree_util.tree_map(first, kernel(*(last(x) for x in xs)))
    pad = n * C - B
    # padding states repeat the last one (valid input: no division by zero, no NaN)
    xs = [jnp.concatenate([x, jnp.broadcast_to(x[-1:], (pad,) + x.shape[1:])]) if pad and x is not None else x
          for x in xs]
    chunks = [None if x is None else x.reshape((n, C) + x.shape[1:]) for x in xs]

    # the inputs of each chunk are transposed inside the loop, while they are in cache, and
    # stored (a kernel of their own): fused into their consumers, the transposed reads kept
    # them from vectorising (the joints' sines and cosines: 14 against 8 ns per joint and
    # state; ur5's batched rnea 10 %, talos_reduced's 11 % faster; session 36). One
    # result is transposed after it, where XLA fuses the transposition with what takes it (the
    # mass matrix's spread); several results (the derivatives' blocks) each inside it, written
    # states first into their own stacked result, which is then the caller's as it is (one
    # stacked buffer of them all, transposed after the loop, was talos_reduced's batched
    # aba_derivatives' largest temporary: at B = 1024 39 MiB against 9 MiB now, and 111 against
    # 93 µs per state; benchmarks/README.md, session 29)
    #
    # A result to be spread is stored with rows of C + 1 (a zero column): rows of 128 float64,
    # 1 KB apart, fall in 4 of L1's 64 sets, so the gather that reads a state's entries from
    # all rows (talos_reduced's mass matrix: 1444 numbers from 370 rows) found few of them in
    # L1 (talos_reduced's spread 1.26 -> 1.03 us per state, batched crba 5-7 % faster; rnea's
    # transposed result was 6-14 % slower so, and two or more zero columns made the loop's
    # kernels 1.5x slower; session 48)
    def step(ys):
        out = kernel(*(last(y) for y in ys))
        if isinstance(out, tuple):
            return tuple(map(first, out))
        return jnp.pad(out, [(0, 0)] * (out.ndim - 1) + [(0, 1)]) if spread else out

    out = jax.lax.map(step, chunks)  # one (n, ..., C) or (n, C, ...), or a tuple of (n, C, ...)
    if not isinstance(out, tuple) and minor:
        out = jnp.moveaxis(out[..., :C], -1, 1)
    return jax.tree_util.tree_map(lambda y: y.reshape((n * C,) + y.shape[2:])[:B], out)
