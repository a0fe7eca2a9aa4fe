"""Bad input fails with a message that says what is wrong and what to do."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax


@pytest.fixture(scope="module")
def floating():
    b = mbjax.ModelBuilder("floating")
    b.add_body("base", joint="free", mass=2.0, inertia=np.diag([0.1, 0.2, 0.25]))
    b.add_body("arm", parent="base", joint="revolute", axis=(0, 1, 0), translation=(0.1, 0, 0),
               mass=1.0, com=(0.2, 0, 0), inertia=np.diag([0.01, 0.02, 0.02]))
    return b.build()


def test_wrong_shapes(floating):
    q = mbjax.neutral(floating)
    v = jnp.zeros(floating.nv)
    with pytest.raises(ValueError, match=r"q has shape \(7,\); model 'floating' expects \(8,\)"):
        mbjax.aba(floating, q[:7], v, v)
    with pytest.raises(ValueError, match="tau has shape"):
        mbjax.aba(floating, q, v, v[:3])
    with pytest.raises(ValueError, match="jax.vmap"):
        mbjax.rnea(floating, jnp.stack([q, q]), v, v)
    with pytest.raises(ValueError, match=r"f_ext has shape \(6,\); expected \(2, 6\)"):
        mbjax.rnea(floating, q, v, v, f_ext=jnp.zeros(6))


def test_non_unit_quaternion_is_refused_inside_jit(floating):
    q = mbjax.neutral(floating).at[3].set(2.0)  # quaternion (2, 0, 0, 0)
    v = jnp.zeros(floating.nv)
    for f in (mbjax.aba, jax.jit(mbjax.aba)):
        with pytest.raises(Exception, match="norm is not 1. Normalise it"):
            jax.block_until_ready(f(floating, q, v, v))
    # normalize repairs it
    qn = mbjax.normalize(floating, q)
    assert np.all(np.isfinite(mbjax.aba(floating, qn, v, v)))


def test_every_unit_block_is_checked():
    """Quaternions and (cos, sin) pairs anywhere in q, each one alone off the unit sphere, are
    refused (the checks gather the blocks of each width); a NaN in q is named before them."""
    b = mbjax.ModelBuilder("blocks")
    inertia = np.diag([0.1, 0.2, 0.25])
    b.add_body("base", joint="free", mass=2.0, inertia=inertia)
    b.add_body("wheel", parent="base", joint="continuous", axis=(0, 1, 0), mass=1.0, inertia=inertia)
    b.add_body("ball", parent="base", joint="spherical", translation=(0.3, 0, 0), mass=1.0, inertia=inertia)
    b.add_body("slider", parent="ball", joint="planar", translation=(0.2, 0, 0), mass=1.0, inertia=inertia)
    b.add_body("knob", parent="slider", joint="continuous", axis=(0, 0, 1), mass=1.0, inertia=inertia)
    model = b.build()
    q0, v = mbjax.neutral(model), jnp.zeros(model.nv)
    f = jax.jit(lambda q: mbjax.aba(model, q, v, v))
    assert np.all(np.isfinite(f(q0)))
    topo = model.topology
    starts = [topo.q_start[i] + sl.start for i, joint in enumerate(topo.joints) for sl in joint.unit_slices]
    assert len(starts) == 5
    for start in starts:
        with pytest.raises(Exception, match="norm is not 1"):
            jax.block_until_ready(f(q0.at[start].multiply(1.01)))
    with pytest.raises(Exception, match="q contains NaN"):
        jax.block_until_ready(f(q0.at[starts[1]].set(jnp.nan).at[starts[2]].set(3.0)))


def test_nan_state_is_refused(floating):
    q = mbjax.neutral(floating)
    v = jnp.zeros(floating.nv)
    with pytest.raises(Exception, match="qd contains NaN"):
        jax.block_until_ready(mbjax.aba(floating, q, v.at[0].set(jnp.nan), v))
    with pytest.raises(Exception, match="q contains NaN"):
        jax.block_until_ready(mbjax.crba(floating, q.at[0].set(jnp.nan)))
    batch = jnp.stack([v, v.at[2].set(jnp.inf)])
    with pytest.raises(Exception, match="tau contains NaN or infinite"):
        jax.block_until_ready(jax.vmap(lambda t: mbjax.aba(floating, q, v, t))(batch))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(joint="helical"), "unknown joint type 'helical'"),
        (dict(mass=-1.0), "mass -1.0"),
        (dict(mass=1.0, inertia=np.diag([1.0, 1.0, 3.0])), "triangle inequality"),
        (dict(mass=1.0, inertia=np.diag([-1.0, 1.0, 1.0])), "negative principal moment"),
        (dict(mass=1.0, inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "not symmetric"),
        (dict(joint="revolute", axis=(0, 0, 0)), "zero vector"),
        (dict(rotation=np.diag([1.0, 1.0, -1.0])), "not a rotation matrix"),
        (dict(parent="nobody"), "does not exist"),
        (dict(joint="revolute", lower=1.0, upper=-1.0), "lower limit above upper"),
        (dict(joint="spherical", lower=[0, 0]), "has 2 values; expected 1 or 4"),
    ],
)
def test_builder_refuses_bad_bodies(kwargs, match):
    b = mbjax.ModelBuilder()
    with pytest.raises(ValueError, match=match):
        b.add_body("b", **kwargs)


def test_builder_duplicates_and_unknown_names(floating):
    b = mbjax.ModelBuilder()
    b.add_body("a", joint="revolute", mass=1.0, inertia=np.eye(3))
    with pytest.raises(ValueError, match="already exists"):
        b.add_body("a", joint="revolute")
    with pytest.raises(KeyError, match="no frame named 'arn'. Did you mean"):
        mbjax.frame_jacobian(floating, mbjax.neutral(floating), "arn")
    with pytest.raises(ValueError, match="unknown reference frame 'global'"):
        mbjax.frame_jacobian(floating, mbjax.neutral(floating), "arm", "global")
    with pytest.raises(ValueError, match="unknown method"):
        z = jnp.zeros(floating.nv)
        mbjax.forward_dynamics(floating, mbjax.neutral(floating), z, z, method="lu")


@pytest.mark.parametrize("check", ["raise", "warn"])
def test_massless_subtree_is_refused_or_warns(check):
    b = mbjax.ModelBuilder(inertia_check=check)
    b.add_body("a", joint="revolute", mass=1.0, inertia=np.eye(3))
    b.add_body("tip", parent="a", joint="prismatic")
    if check == "raise":
        with pytest.raises(ValueError, match="body 'tip'.*mass matrix is singular"):
            b.build()
    else:
        with pytest.warns(UserWarning, match="body 'tip'.*mass matrix is singular"):
            b.build()


def test_fixed_only_model_loads_and_has_no_dofs():
    b = mbjax.ModelBuilder()
    b.add_body("base", mass=1.0, inertia=np.eye(3))
    b.add_body("tool", parent="base", translation=(0, 0, 1))
    model = b.build()
    assert (model.nq, model.nv, model.nbodies) == (0, 0, 0)
    R, p = mbjax.frame_placements(model, jnp.zeros(0))
    np.testing.assert_allclose(p[model.frame_index("tool")], [0, 0, 1])
    assert mbjax.aba(model, jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)).shape == (0,)
    # derivatives of nothing are empty too (a jacfwd's solve once divided by the zero order)
    z = jnp.zeros(0)
    assert jax.jacfwd(lambda v: mbjax.aba(model, z, v, z))(z).shape == (0, 0)
    assert jax.grad(lambda v: jnp.sum(mbjax.aba(model, z, v, z)))(z).shape == (0,)
    assert jax.vmap(jax.jacfwd(lambda v: mbjax.aba(model, z, v, z)))(jnp.zeros((3, 0))).shape == (3, 0, 0)
