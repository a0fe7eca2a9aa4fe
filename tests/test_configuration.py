"""Configuration manifold on random trees: integrate / difference / normalize / neutral /
random_configuration, and integrate / difference against Pinocchio.

Every joint type's configuration space is a Lie group (R^n, S^1, SO(3), SE(2), SE(3));
``integrate(q, v) = q * exp(v)`` and ``difference`` is its inverse, which gives exact round
trips as long as the rotation angles stay below pi (beyond, log picks the other branch).

One compiled function per drawn tree structure evaluates everything for BATCH models of that
structure (compiling is what costs time); the properties are checked by named helpers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given

import mbjax
from random_models import (
    LIMITABLE,
    assert_close,
    build_batch,
    hypothesis_settings,
    random_configurations,
    same_up_to_quaternion_sign,
    tree_specs,
    unstack,
)

BATCH = 4  # models with one drawn structure, evaluated in one compiled call
KEYS = 16  # random configurations drawn per model

#: half-width of the range that random_configuration uses on a limitable coordinate without
#: limits (see LIMITABLE): pi for angles, 1 for translations
DEFAULT_RANGE = {
    "revolute": (np.pi,),
    "prismatic": (1.0,),
    "universal": (np.pi, np.pi),
    "cylindrical": (1.0, np.pi),
    "planar": (1.0, 1.0),
    "free": (1.0, 1.0, 1.0),
}


def _unit_blocks(model):
    """(start, stop) of every block of q that must have unit norm."""
    out = []
    for i, jt in enumerate(model.joint_types):
        start = model.q_slice(i).start
        out += [(start + s.start, start + s.stop) for s in mbjax.JOINT_TYPES[jt].unit_slices]
    return out


def _manifold_quantities(model, key, v, scale):
    """Everything the manifold checks compare, for one model (vmapped over the batch).

    ``v`` (nv,): a moderate velocity; ``scale`` (nq,): positive factors, one per unit block.
    """
    qs = random_configurations(model, key, KEYS)
    q0, q1 = qs[0], qs[1]
    neutral = mbjax.neutral(model)
    zero = jnp.zeros(model.nv, model.dtype)
    return dict(
        q0=q0,
        q1=q1,
        v_back=mbjax.difference(model, q0, mbjax.integrate(model, q0, v)),
        q1_back=mbjax.integrate(model, q0, mbjax.difference(model, q0, q1)),
        q0_zero=mbjax.integrate(model, q0, zero),
        diff_self=mbjax.difference(model, q0, q0),
        neutral=neutral,
        neutral_zero=mbjax.integrate(model, neutral, zero),
        normalized_neutral=mbjax.normalize(model, neutral),
        normalized=mbjax.normalize(model, q0 * scale),
        random=qs,
        fk_neutral=mbjax.forward_kinematics(model, neutral),
        rate=mbjax.configuration_rate(model, q0 * scale, v),
        rate_of_integrate=jax.jvp(lambda s: mbjax.integrate(model, q0, s * v), (0.0,), (1.0,))[1],
    )


_evaluate = jax.jit(jax.vmap(_manifold_quantities))


def _evaluate_batch(spec):
    """A batch of models of ``spec``, the random inputs and the manifold quantities."""
    models = build_batch(spec, BATCH)
    model = unstack(models, 0)
    rng = np.random.default_rng(spec.seed)
    # moderate velocities: every rotation angle stays below sqrt(3) < pi, where log is exact
    v = rng.uniform(-1.0, 1.0, (BATCH, model.nv))
    # q0 is scaled by a random positive factor per coordinate, one factor per unit block:
    # normalize must undo the scaling of the unit blocks and leave the other coordinates
    scale = rng.uniform(0.5, 2.0, (BATCH, model.nq))
    for a, b in _unit_blocks(model):
        scale[:, a:b] = scale[:, a:a + 1]
    keys = jax.random.split(jax.random.PRNGKey(spec.seed % 2**31), BATCH)
    out = jax.tree_util.tree_map(np.asarray, _evaluate(models, keys, v, scale))
    return models, dict(out, v=v, scale=scale)


def _check_round_trips(model, o):
    assert_close(o["v_back"], o["v"], rtol=1e-12, atol=1e-12, what="difference(q0, integrate(q0, v)) == v")
    assert same_up_to_quaternion_sign(model, o["q1_back"], o["q1"], tol=1e-12), (
        f"integrate(q0, difference(q0, q1)) != q1:\n{o['q1_back']}\n{o['q1']}")
    assert_close(o["q0_zero"], o["q0"], rtol=0.0, atol=1e-15, what="integrate(q0, 0) == q0")
    assert_close(o["diff_self"], np.zeros(model.nv), rtol=0.0, atol=1e-15, what="difference(q0, q0) == 0")


def _check_neutral(model, o):
    # the neutral configuration is on the manifold and the identity of every joint ...
    neutral = o["neutral"]
    assert_close(o["normalized_neutral"], neutral, rtol=0.0, atol=1e-15, what="normalize(neutral)")
    assert_close(o["neutral_zero"], neutral, rtol=0.0, atol=1e-15, what="integrate(neutral, 0)")
    for a, b in _unit_blocks(model):
        assert abs(np.linalg.norm(neutral[a:b]) - 1.0) < 1e-15, "neutral has a non-unit block"
    # ... so at neutral every body sits at the composition of the joint placements
    R, p = _placements_only(model)
    assert_close(o["fk_neutral"][0], R, rtol=1e-14, atol=1e-14, what="FK rotations at neutral")
    assert_close(o["fk_neutral"][1], p, rtol=1e-14, atol=1e-14, what="FK positions at neutral")


def _check_normalize(model, o):
    # normalize undoes a positive rescaling of the unit blocks and leaves the rest alone
    expected = o["q0"] * o["scale"]
    for a, b in _unit_blocks(model):
        expected[a:b] = o["q0"][a:b]
    assert_close(o["normalized"], expected, rtol=1e-15, atol=1e-15, what="normalize")


def _check_rate(model, o):
    # configuration_rate (closed forms for the quaternion joints) is the forward mode of
    # integrate along v, and proportional to the norm of each unit block of q
    expected = o["rate_of_integrate"].copy()
    for a, b in _unit_blocks(model):
        expected[a:b] *= o["scale"][a]
    assert_close(o["rate"], expected, rtol=1e-14, atol=1e-14, what="configuration_rate")


def _check_random_configurations(model, qs):
    lower, upper = np.asarray(model.lower), np.asarray(model.upper)
    finite = np.isfinite(lower) & np.isfinite(upper)
    assert np.all(qs[:, finite] >= lower[finite]) and np.all(qs[:, finite] <= upper[finite]), (
        "random_configuration outside the position limits")
    for a, b in _unit_blocks(model):
        assert_close(np.linalg.norm(qs[:, a:b], axis=-1), np.ones(len(qs)), rtol=1e-14,
                     what="unit blocks of random configurations")
    # unlimited coordinates fall back to the documented default ranges
    for i, jt in enumerate(model.joint_types):
        start = model.q_slice(i).start
        for c, half_width in zip(LIMITABLE.get(jt, ()), DEFAULT_RANGE.get(jt, ())):
            if not finite[start + c]:
                assert np.all(np.abs(qs[:, start + c]) <= half_width), (
                    f"random {jt} coordinate {c} outside [-{half_width}, {half_width}]")


def _placements_only(model):
    """World poses of the bodies when every joint is at its identity (NumPy recursion)."""
    Rj, pj = np.asarray(model.joint_rotation), np.asarray(model.joint_translation)
    R, p = np.zeros_like(Rj), np.zeros_like(pj)
    for i, parent in enumerate(model.parents):
        if parent < 0:
            R[i], p[i] = Rj[i], pj[i]
        else:
            R[i], p[i] = R[parent] @ Rj[i], p[parent] + R[parent] @ pj[i]
    return R, p


@hypothesis_settings(6)
@given(tree_specs())
def test_manifold_operations(spec):
    """integrate / difference round trips; neutral is on the manifold and the identity;
    normalize projects onto the manifold; configuration_rate is integrate's derivative;
    random_configuration respects finite limits."""
    models, out = _evaluate_batch(spec)
    for k in range(BATCH):
        model, o = unstack(models, k), unstack(out, k)
        _check_round_trips(model, o)
        _check_neutral(model, o)
        _check_normalize(model, o)
        _check_rate(model, o)
        _check_random_configurations(model, o["random"])


# ----------------------------------------------------------------------------- Pinocchio
@pytest.fixture(scope="module")
def pin():
    return pytest.importorskip("pinocchio", reason="Pinocchio (pip install pin, in the test extra) is the reference")


def _compare_with_pinocchio(pin, model, pmodel, trials=10, seed=0):
    """mbjax.integrate / difference == pin.integrate / pin.difference on random states."""
    assert (model.nq, model.nv) == (pmodel.nq, pmodel.nv)
    integrate, difference = jax.jit(mbjax.integrate), jax.jit(mbjax.difference)
    rng = np.random.default_rng(seed)
    for t in range(trials):
        q0, q1 = (mbjax.random_configuration(model, jax.random.PRNGKey(2 * t + s)) for s in range(2))
        v = rng.uniform(-1.0, 1.0, model.nv)
        p0, p1 = (mbjax.to_pinocchio_configuration(model, x) for x in (q0, q1))
        assert_close(mbjax.to_pinocchio_configuration(model, integrate(model, q0, v)),
                     pin.integrate(pmodel, p0, v), rtol=1e-13, atol=1e-13, what="integrate vs pin.integrate")
        assert_close(difference(model, q0, q1), pin.difference(pmodel, p0, p1),
                     rtol=1e-12, atol=1e-12, what="difference vs pin.difference")


def test_free_joint_against_pinocchio_solo12(pin):
    """Free-flyer solo12: the free joint's SE(3) integrate / difference (and the revolute legs)."""
    model = mbjax.load_example_robot("solo12", joint_order="pinocchio")
    pmodel = pin.buildModelFromUrdf(str(mbjax.example_robot_path("solo12")), pin.JointModelFreeFlyer())
    assert model.joint_types[0] == "free"
    _compare_with_pinocchio(pin, model, pmodel)


def test_lie_group_joints_against_pinocchio(pin):
    """Free, spherical, planar and continuous joints (whose q is not in R^n), and revolute
    and prismatic ones, in one chain."""
    kinds = [
        ("free", pin.JointModelFreeFlyer()),
        ("spherical", pin.JointModelSpherical()),
        ("planar", pin.JointModelPlanar()),
        ("continuous", pin.JointModelRUBZ()),
        ("revolute", pin.JointModelRZ()),
        ("prismatic", pin.JointModelPZ()),
    ]
    b = mbjax.ModelBuilder("lie_groups")
    pmodel = pin.Model()
    parent = 0
    for i, (jt, pjoint) in enumerate(kinds):
        b.add_body(f"b{i}", parent=f"b{i - 1}" if i else None, joint=jt, mass=1.0, inertia=np.eye(3))
        parent = pmodel.addJoint(parent, pjoint, pin.SE3.Identity(), f"j{i}")
    _compare_with_pinocchio(pin, b.build(), pmodel)


def test_free_joint_difference_at_small_rotations(pin):
    """``difference`` of free-joint configurations whose attitudes differ by 1e-7 to 0.1 rad
    (and positions by about a metre), against ``pin.difference``. The translation part of
    SE(3)'s log once lost digits there (1 - cos t cancelling: 5e-9 relative at 1e-4 rad,
    3e-5 just above 1e-6 rad)."""
    model = mbjax.ModelBuilder("body").add_body("b", joint="free", mass=1.0, inertia=np.eye(3)).build()
    pmodel = pin.Model()
    pmodel.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "j")
    difference = jax.jit(mbjax.difference)
    rng = np.random.default_rng(5)
    q0 = mbjax.random_configuration(model, jax.random.PRNGKey(0))
    for angle in (1.01e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1):
        axis = rng.normal(size=3)
        v = np.concatenate([rng.uniform(-1.0, 1.0, 3), angle * axis / np.linalg.norm(axis)])
        q1 = mbjax.integrate(model, q0, v)
        p0, p1 = (mbjax.to_pinocchio_configuration(model, x) for x in (q0, q1))
        expected = pin.difference(pmodel, p0, p1)
        assert_close(difference(model, q0, q1), expected, rtol=1e-13, what=f"difference at {angle} rad")


@pytest.mark.parametrize("name", sorted(mbjax.JOINT_TYPES))
@pytest.mark.parametrize("scale", [1.0, 1.3], ids=["unit", "off-manifold"])
def test_difference_tangent_is_the_derivative_of_difference(name, scale):
    """Each joint's closed-form difference_tangent (aba's derivative rule maps q tangents with
    it) equals the forward mode of its difference at x = q, also where the unit blocks of q are
    scaled off the manifold (difference normalises them)."""
    joint = mbjax.JOINT_TYPES[name]
    n = 7
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    lower, upper = np.full((n, joint.nq), -np.inf), np.full((n, joint.nq), np.inf)
    q = np.array(joint.random(keys[0], jnp.asarray(lower), jnp.asarray(upper)), np.float64)
    for sl in joint.unit_slices:
        q[:, sl] *= scale
    q, dq = jnp.asarray(q), jax.random.normal(keys[1], (n, joint.nq), jnp.float64)
    ref = jax.jvp(lambda x: joint.difference(q, x), (q,), (dq,))[1]
    assert_close(joint.difference_tangent(q, dq), ref, rtol=1e-14, atol=1e-14, what=f"{name} difference_tangent")
