"""Batched programs never run two large LAPACK calls at once.

jaxlib 0.10's CPU LAPACK kernels split a batch whose work reaches ``mbjax.cholesky.PARALLEL_WORK``
into chunks on XLA's thread pool and block until they finish (`jax::ParallelBatchMap`); when as
many independent such calls run at once as the pool has threads, each holds a thread waiting
for chunks queued behind the others, and the program hangs (found in session 21:
`jax.vmap(contact.rollout)` over 1024 states hung every time, `tests/test_rigid.py` runs that
case; session 43: second derivatives of a vmapped `aba`). The hang needs large batches and luck
to appear, so this checks its precondition instead, in the compiled HLO of each program: every
two LAPACK custom calls of one computation whose work reaches that threshold are ordered by a
data dependency (smaller ones run on the calling thread: :mod:`mbjax.cholesky` factors and
solves its batches in such pieces).
"""

import math
import re

import jax
import jax.numpy as jnp
import pytest

import mbjax
from mbjax import constraints as C
from mbjax import contact
from mbjax.cholesky import PARALLEL_WORK, spd_solve
from mbjax.methods import METHODS

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
SHAPE = re.compile(r"f(?:32|64)\[([\d,]*)\]")


def lapack_work(target: str, instruction: str) -> float:
    """jaxlib 0.10's work estimate of a LAPACK custom call (matrices x flops per matrix, from
    its operands' shapes): Cholesky n^3 / 3, a triangular solve rows x columns x the
    triangular matrix's order; other kernels count as large."""
    shapes = [[int(d) for d in m.split(",") if d] for m in
              SHAPE.findall(instruction.split("operand_layout_constraints=")[-1].split("}}")[0])]
    if "potrf" in target:
        *batch, n, _ = shapes[0]
        return math.prod(batch) * n ** 3 / 3
    if "trsm" in target:
        a, (*batch, rows, cols) = shapes[0][-1], shapes[1]
        return math.prod(batch) * rows * cols * a
    return math.inf


def unordered_lapack_calls(hlo: str) -> list:
    """Pairs of LAPACK custom calls (computation, target, target) whose work reaches jaxlib's
    threshold for splitting it across threads and that no data dependency orders."""
    computations, current = {}, None
    for line in hlo.splitlines():
        if not line.startswith(" ") and (m := HEADER.match(line)):
            current = computations.setdefault(m.group(1), [])
        elif line.startswith("}"):
            current = None
        elif current is not None:
            current.append(line)
    pairs = []
    for name, lines in computations.items():
        operands, calls = {}, []
        for line in lines:
            if not (m := INSTRUCTION.match(line)):
                continue
            operands[m.group(1)] = set(x.lstrip("%") for x in re.findall(r"%[\w.\-]+", m.group(2)))
            target = re.search(r'custom_call_target="(lapack_\w+)"', m.group(2))
            if target and lapack_work(target.group(1), m.group(2)) >= PARALLEL_WORK:
                calls.append((m.group(1), target.group(1)))

        def ancestors(node, seen=None):
            seen = set() if seen is None else seen
            stack = list(operands.get(node, ()))
            while stack:
                x = stack.pop()
                if x not in seen:
                    seen.add(x)
                    stack.extend(operands.get(x, ()))
            return seen

        above = {c: ancestors(c) for c, _ in calls}
        pairs += [(name, ta, tb) for i, (a, ta) in enumerate(calls) for b, tb in calls[i + 1:]
                  if a not in above[b] and b not in above[a]]
    return pairs


def _compiled(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


#: a batch as users run (session 21's hang: 1024 states), where the work of LAPACK calls counts
B = 1024
QUADRUPED = mbjax.load_bundled("quadruped")
STAND = jnp.tile(mbjax.neutral(QUADRUPED).at[2].set(0.44), (B, 1))
STILL = jnp.zeros((B, QUADRUPED.nv))
FEET = contact.frame_points(QUADRUPED, ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"])
FOUR_BAR, LOOPS = C.four_bar()
CLOSED = jnp.tile(C.assemble(FOUR_BAR, LOOPS, jnp.array([1.0, -0.6, 1.8])), (B, 1))


def _quadruped(fn):
    return jax.vmap(lambda q, v: fn(q, v, jnp.zeros(QUADRUPED.nv))), STAND, STILL


def _programs():
    rigid = contact.TimeStepping(contact.RigidContact(FEET, contact.Plane.horizontal(0.0), 0.8),
                                 contact.joint_limits(QUADRUPED), iterations=1)
    compliant = contact.CompliantContact(FEET, contact.Plane.horizontal(0.0), contact.SpringDamper(1e4, 100.0),
                                         contact.Friction(0.8, 1e-3))
    yield "rigid step", _quadruped(lambda q, v, u: contact.step(QUADRUPED, rigid, q, v, u, 2e-3).q)
    for method in METHODS:
        yield f"forward_dynamics {method}", _quadruped(
            lambda q, v, u, m=method: mbjax.forward_dynamics(QUADRUPED, q, v, u, method=m))
        yield f"WithContacts {method}", _quadruped(
            lambda q, v, u, m=method: mbjax.forward_dynamics(QUADRUPED, q, v, u, method=contact.WithContacts(
                compliant, m, limits=contact.joint_limits(QUADRUPED))))
    # second derivatives: the solves of aba's derivative rule, differentiated, are independent of
    # each other (session 43: jax.vmap(jax.hessian(loss)) hung)
    yield "hessian of aba", _quadruped(lambda q, v, u: jax.hessian(
        lambda v: jnp.sum(jnp.sin(mbjax.aba(QUADRUPED, q, v, u)) ** 2))(v))
    yield "aba_derivatives", _quadruped(lambda q, v, u: mbjax.aba_derivatives(QUADRUPED, q, v, u))
    yield "rnea_derivatives", _quadruped(lambda q, v, u: mbjax.rnea_derivatives(QUADRUPED, q, v, u))
    for method in C.solvers.METHODS:
        yield f"closed chain {method}", (jax.vmap(lambda q, m=method: C.constrained_forward_dynamics(
            FOUR_BAR, LOOPS, q, jnp.zeros(FOUR_BAR.nv), jnp.zeros(FOUR_BAR.nv), method=m).qdd), CLOSED)


PROGRAMS = dict(_programs())


def test_the_check_sees_two_independent_solves():
    """Two large solves with one Cholesky factor, independent: flagged; stacked into one, or
    in sub-batches (mbjax.cholesky): not. Small ones (below jaxlib's threshold): not."""
    n, batch = 12, 2048  # a triangular solve's work 12 x 12 x 2048 = 295k
    A = jnp.tile(jnp.eye(n) * 2.0, (batch, 1, 1))
    b = jnp.ones((batch, n))

    def two(A, b):
        c = jax.scipy.linalg.cho_factor(A)
        return jax.scipy.linalg.cho_solve(c, b) + jax.scipy.linalg.cho_solve(c, 2 * b)

    def one(A, b):
        x = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(A), jnp.stack([b, 2 * b], axis=1))
        return x[:, 0] + x[:, 1]

    assert unordered_lapack_calls(_compiled(jax.vmap(two), A, b))
    assert not unordered_lapack_calls(_compiled(jax.vmap(one), A, b))
    assert not unordered_lapack_calls(_compiled(jax.vmap(lambda A, b: spd_solve(A, b) + spd_solve(A, 2 * b)), A, b))
    assert not unordered_lapack_calls(_compiled(jax.vmap(two), A[:4], b[:4]))


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_batched_lapack_calls_form_one_chain(name):
    fn, *args = PROGRAMS[name]
    hlo = _compiled(fn, *args)
    assert unordered_lapack_calls(hlo) == [], name
