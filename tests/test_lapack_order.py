"""Batched programs run their LAPACK calls one after another, never two at once.

jaxlib 0.10's CPU LAPACK kernels split a large batch into chunks on XLA's thread pool and block
until they finish (`jax::ParallelBatchMap`); when as many independent batched calls run at once
as the pool has threads, each holds a thread waiting for chunks queued behind the others, and
the program hangs (found in session 21: `jax.vmap(contact.rollout)` over 1024 states hung every
time; `tests/test_rigid.py` runs that case). The hang needs large batches and luck to appear,
so this checks its precondition instead, in the compiled HLO of each program vmapped over a
small batch: every two LAPACK custom calls of one computation are ordered by a data
dependency.
"""

import re

import jax
import jax.numpy as jnp
import pytest

import mbjax
from mbjax import constraints as C
from mbjax import contact
from mbjax.methods import METHODS

INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
HEADER = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")


def unordered_lapack_calls(hlo: str) -> list:
    """Pairs of LAPACK custom calls (computation, target, target) that no data dependency orders."""
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
            if target := re.search(r'custom_call_target="(lapack_\w+)"', m.group(2)):
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


B = 4
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
    yield "aba_derivatives", _quadruped(lambda q, v, u: mbjax.aba_derivatives(QUADRUPED, q, v, u))
    yield "rnea_derivatives", _quadruped(lambda q, v, u: mbjax.rnea_derivatives(QUADRUPED, q, v, u))
    for method in C.solvers.METHODS:
        yield f"closed chain {method}", (jax.vmap(lambda q, m=method: C.constrained_forward_dynamics(
            FOUR_BAR, LOOPS, q, jnp.zeros(FOUR_BAR.nv), jnp.zeros(FOUR_BAR.nv), method=m).qdd), CLOSED)


PROGRAMS = dict(_programs())


def test_the_check_sees_two_independent_solves():
    """Two solves with one Cholesky factor, independent: flagged; stacked into one: not."""
    A = jnp.tile(jnp.eye(3) * 2.0, (B, 1, 1))
    b = jnp.ones((B, 3))

    def two(A, b):
        c = jax.scipy.linalg.cho_factor(A)
        return jax.scipy.linalg.cho_solve(c, b) + jax.scipy.linalg.cho_solve(c, 2 * b)

    def one(A, b):
        x = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(A), jnp.stack([b, 2 * b], axis=1))
        return x[:, 0] + x[:, 1]

    assert unordered_lapack_calls(_compiled(jax.vmap(two), A, b))
    assert not unordered_lapack_calls(_compiled(jax.vmap(one), A, b))


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_batched_lapack_calls_form_one_chain(name):
    fn, *args = PROGRAMS[name]
    hlo = _compiled(fn, *args)
    assert unordered_lapack_calls(hlo) == [], name
