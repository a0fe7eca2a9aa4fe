"""Random kinematic trees for property-based tests, and helpers shared by those tests.

A random model is described by a :class:`TreeSpec`: the *structure* (parents, joint types,
which joints carry armature or limits, extra frames), drawn by Hypothesis so that failures
shrink to small trees, plus an integer ``seed`` from which :func:`build_model` draws every
continuous number with NumPy (axes, joint placements, inertias, limits, frame poses).

Compiling is what costs time on a CPU (XLA needs seconds for a 30-body tree, and every new
topology is a new compilation), so the tests compile one function per drawn structure and
evaluate it on a *batch* of models with that structure: :func:`build_batch` builds several
models from one spec with different seeds (same topology, different numbers) and stacks
them into one Model pytree with a leading batch axis, ready for ``jax.vmap``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import mbjax

MOVABLE = tuple(mbjax.JOINT_TYPES)  # revolute, continuous, prismatic, spherical, universal, ...
#: joint types that use ``axis`` (and ``axis2`` for universal joints)
_USES_AXIS = ("revolute", "continuous", "prismatic", "cylindrical", "universal")
#: configuration coordinates that may have finite position limits, per joint type (the unit
#: quaternion and (cos, sin) coordinates never have limits)
LIMITABLE = {
    "revolute": (0,),
    "prismatic": (0,),
    "universal": (0, 1),
    "cylindrical": (0, 1),
    "planar": (0, 1),
    "free": (0, 1, 2),
}


def hypothesis_settings(max_examples: int) -> settings:
    """Settings for the random-tree tests: ``max_examples`` times the environment variable
    ``MBJAX_HYPOTHESIS_SCALE`` (default 1; e.g. 10 for a thorough run), no deadline.

    Every example is a new tree, i.e. new compilations (seconds each), so the counts are
    small; each example checks a batch of models and states instead. The explain phase
    (re-running variations of a failure) is skipped for the same reason.
    """
    scale = float(os.environ.get("MBJAX_HYPOTHESIS_SCALE", "1"))
    return settings(
        max_examples=max(1, round(max_examples * scale)),
        deadline=None,
        # function_scoped_fixture: the only such fixture used with them, runtime_checks_off,
        # sets a flag and is the same for every example
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    )


@dataclass(frozen=True)
class TreeSpec:
    """Structure of a random model; ``seed`` fixes all its continuous parameters.

    ``parents[i] < i`` (``-1`` = world); ``joints[i]`` is a type of ``mbjax.JOINT_TYPES`` or
    ``"fixed"`` (merged by the builder); ``armature[i]`` / ``limited[i]``: whether joint i gets
    a random armature / random finite position limits; ``frames``: parents (body index, or
    ``-1`` for the world) of extra frames added with ``ModelBuilder.add_frame``.
    """

    parents: tuple
    joints: tuple
    armature: tuple
    limited: tuple
    frames: tuple
    seed: int

    def __repr__(self):  # short enough to read in a Hypothesis failure report
        return (f"TreeSpec(parents={self.parents}, joints={self.joints}, armature={self.armature}, "
                f"limited={self.limited}, frames={self.frames}, seed={self.seed})")


@st.composite
def tree_specs(draw, min_bodies=1, max_bodies=30, all_joint_types=False, floating=False, fixed=True,
               armature=True, max_joint_types=None):
    """Hypothesis strategy for :class:`TreeSpec`.

    - Parents: body 0 hangs from the world; each later body hangs from the world (a new root,
      about 1 draw in 10), from the previous body (a chain, about 1 in 2) or from any earlier
      body (a branch).
    - Joints: any movable type, or ``"fixed"`` about 1 draw in 9 (``fixed=False``: never).
      With ``all_joint_types`` (needs ``min_bodies >= 8``) every movable type occurs at least
      once; with ``max_joint_types`` the movable types come from a random subset of that size
      (compile time grows with the number of types present). At least one joint is movable.
    - ``floating``: body 0 is joined to the world by a free joint and no other body is (no
      other roots, and no fixed joint on body 0): a floating-base system.
    - ``armature``: whether joints may carry armature (about one in two does).
    """
    n = draw(st.integers(min_bodies, max_bodies))
    parents = [-1]
    for i in range(1, n):
        kind = draw(st.integers(0, 9))
        if kind == 0 and not floating:
            parents.append(-1)
        elif kind <= 5:
            parents.append(i - 1)
        else:
            parents.append(draw(st.integers(0, i - 1)))
    movable = MOVABLE
    if max_joint_types is not None:
        movable = tuple(draw(st.permutations(MOVABLE))[:max_joint_types])
    choices = movable + (("fixed",) if fixed else ())
    joints = [draw(st.sampled_from(choices)) for _ in range(n)]
    if all_joint_types:
        assert n >= len(MOVABLE), "all_joint_types needs min_bodies >= 8"
        slots = draw(st.permutations(range(n)))[: len(MOVABLE)]
        for slot, jt in zip(slots, draw(st.permutations(MOVABLE))):
            joints[slot] = jt
    if floating:
        joints[0] = "free"
    if all(j == "fixed" for j in joints):
        joints[-1] = movable[0]
    has_armature = tuple(armature and draw(st.booleans()) and j != "fixed" for j in joints)
    limited = tuple(draw(st.booleans()) and j in LIMITABLE for j in joints)
    frames = tuple(draw(st.lists(st.integers(-1, n - 1), max_size=3)))
    seed = draw(st.integers(0, 2**32 - 1))
    return TreeSpec(tuple(parents), tuple(joints), has_armature, limited, frames, seed)


# ------------------------------------------------------------------------- building
def random_rotation(rng):
    """A uniformly distributed rotation matrix."""
    w, x, y, z = (lambda g: g / np.linalg.norm(g))(rng.normal(size=4))
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def random_unit(rng):
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def random_inertia(rng, mass):
    """A physical rotational inertia about the CoM: principal moments (d2 + d3, d1 + d3,
    d1 + d2) with d_k = m <x_k^2> > 0 (so the triangle inequality holds strictly), rotated."""
    d = mass * rng.uniform(0.002, 0.05, size=3)
    principal = np.array([d[1] + d[2], d[0] + d[2], d[0] + d[1]])
    R = random_rotation(rng)
    return R @ np.diag(principal) @ R.T


def _limits(rng, joint, limited):
    """Lower and upper position limits (nq,) for ``joint``: finite on its limitable
    coordinates when ``limited``, infinite elsewhere."""
    nq = mbjax.JOINT_TYPES[joint].nq
    lower, upper = np.full(nq, -np.inf), np.full(nq, np.inf)
    if limited:
        for k in LIMITABLE[joint]:
            a, b = np.sort(rng.uniform(-2.0, 2.0, size=2))
            lower[k], upper[k] = a, max(b, a + 0.1)
    return lower, upper


def build_model(spec: TreeSpec, seed: int | None = None, gravity=(0.0, 0.0, -9.81)) -> mbjax.Model:
    """The model of ``spec``, with continuous parameters drawn from ``seed`` (default
    ``spec.seed``). Models built from one spec share their topology whatever the seed.

    Bodies are named ``b0, b1, ...`` (so names of merged bodies survive as frames); extra
    frames are ``f0, f1, ...``. Every body has mass in [0.5, 2] and a random CoM and inertia.
    """
    rng = np.random.default_rng(spec.seed if seed is None else seed)
    b = mbjax.ModelBuilder("random_tree", gravity=gravity)
    for i, (parent, joint) in enumerate(zip(spec.parents, spec.joints)):
        axis, axis2 = random_unit(rng), random_unit(rng)
        while abs(axis @ axis2) > 0.8:  # keep universal joints away from their singularity
            axis2 = random_unit(rng)
        mass = rng.uniform(0.5, 2.0)
        kwargs = {}
        if joint in _USES_AXIS:
            kwargs["axis"] = axis
        if joint == "universal":
            kwargs["axis2"] = axis2
        if joint != "fixed":
            nv = mbjax.JOINT_TYPES[joint].nv
            kwargs["armature"] = rng.uniform(0.01, 0.2, size=nv) if spec.armature[i] else 0.0
            kwargs["lower"], kwargs["upper"] = _limits(rng, joint, spec.limited[i])
        b.add_body(
            f"b{i}",
            parent=None if parent < 0 else f"b{parent}",
            joint=joint,
            rotation=random_rotation(rng),
            translation=rng.uniform(-0.4, 0.4, size=3),
            mass=mass,
            com=rng.uniform(-0.2, 0.2, size=3),
            inertia=random_inertia(rng, mass),
            **kwargs,
        )
    for k, body in enumerate(spec.frames):
        b.add_frame(f"f{k}", None if body < 0 else f"b{body}", rotation=random_rotation(rng),
                    translation=rng.uniform(-0.3, 0.3, size=3))
    return b.build()


def stack(trees):
    """Stack pytrees with equal structure along a new leading axis (for ``jax.vmap``).

    The leaves become NumPy arrays: stacking and indexing them then compiles nothing (an
    eager ``jnp`` operation on arrays of a new shape is a compilation of its own).
    """
    return jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *trees)


def build_batch(spec: TreeSpec, batch: int, gravity=(0.0, 0.0, -9.81)):
    """``batch`` models of ``spec`` with different continuous parameters, stacked.

    ``gravity``: one vector for all models, or a sequence of ``batch`` vectors.
    """
    gravities = np.broadcast_to(np.asarray(gravity, dtype=float), (batch, 3))
    return stack([build_model(spec, spec.seed + k, gravities[k]) for k in range(batch)])


def unstack(tree, k):
    """Element ``k`` of a stacked pytree (of NumPy leaves, see :func:`stack`)."""
    return jax.tree_util.tree_map(lambda x: x[k], tree)


def floating_arm():
    """A free-floating body (quaternion base) carrying a two-joint arm, under gravity."""
    b = mbjax.ModelBuilder("floating_arm")
    b.add_body("base", joint="free", mass=3.0, inertia=np.diag([0.2, 0.3, 0.25]))
    b.add_body("upper", parent="base", joint="revolute", axis=(0, 1, 0), translation=(0.1, 0.0, 0.2), mass=1.0,
               com=(0.0, 0.0, 0.3), inertia=np.diag([0.02, 0.03, 0.01]), armature=0.05)
    b.add_body("lower", parent="upper", joint="revolute", axis=(1, 0, 0), translation=(0.0, 0.0, 0.6), mass=0.5,
               com=(0.0, 0.1, 0.2), inertia=np.diag([0.01, 0.01, 0.005]), armature=0.05)
    return b.build()


def is_floating_base(model: mbjax.Model) -> bool:
    """True if the only joint attached to the world is one free joint."""
    roots = [i for i, p in enumerate(model.parents) if p < 0]
    return len(roots) == 1 and model.joint_types[roots[0]] == "free"


def quaternion_slices(model: mbjax.Model):
    """(start, stop) in q of every quaternion (spherical and free joints), (w, x, y, z)."""
    out = []
    for i, jt in enumerate(model.joint_types):
        start = model.q_slice(i).start
        if jt == "spherical":
            out.append((start, start + 4))
        elif jt == "free":
            out.append((start + 3, start + 7))
    return out


def same_up_to_quaternion_sign(model: mbjax.Model, q_a, q_b, tol) -> bool:
    """``q_a == q_b`` to ``tol`` (max abs), where q and -q are the same rotation."""
    q_a, q_b = np.array(q_a), np.asarray(q_b)
    for a, b in quaternion_slices(model):
        if np.dot(q_a[a:b], q_b[a:b]) < 0:
            q_a[a:b] = -q_a[a:b]
    return bool(np.max(np.abs(q_a - q_b), initial=0.0) <= tol)


# ------------------------------------------------------------------------ random states
def random_configurations(model: mbjax.Model, key, n: int):
    """``n`` configurations (n, nq) from ``mbjax.random_configuration``.

    One vmapped call: every ``jax.random`` call site costs XLA a fraction of a second to
    compile, so the tests draw everything else (velocities, torques, ...) with NumPy.
    """
    return jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(key, n))


def flow(model: mbjax.Model, q, qd, qdd):
    """The motion ``t -> (q (+) t qd, qd + t qdd)`` through the state (q, qd) with
    acceleration qdd; its derivative at t = 0 is exactly (qd, qdd)."""
    return lambda t: (mbjax.integrate(model, q, t * qd), qd + t * qdd)


def time_derivative(f, dtype):
    """``d/dt f(t)`` at ``t = 0``, exact (forward mode)."""
    return jax.jvp(f, (jnp.zeros((), dtype),), (jnp.ones((), dtype),))[1]


def richardson(d_h, d_2h):
    """Richardson extrapolation of central differences with steps h and 2h: their O(h^2)
    truncation errors cancel, leaving O(h^4) (plus rounding, of order eps |f| / h)."""
    return (4 * d_h - d_2h) / 3


# ------------------------------------------------------------------------- comparisons
def assert_close(actual, expected, rtol, atol=0.0, what="", scale=None):
    """``max|actual - expected| <= atol + rtol * scale``, reporting the largest error.

    ``scale`` defaults to ``max|expected|`` (a norm-wise relative error): entries that cancel
    to near zero carry the rounding error of the largest ones, not their own.
    """
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"{what}: shapes {a.shape} != {e.shape}"
    assert np.all(np.isfinite(a)), f"{what}: non-finite values in {a}"
    if scale is None:
        scale = np.max(np.abs(e), initial=0.0)
    err = np.max(np.abs(a - e), initial=0.0)
    bound = atol + rtol * scale
    assert err <= bound, f"{what}: max error {err:.3e} > {bound:.3e} (scale {scale:.3e})"
