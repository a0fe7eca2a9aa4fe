"""Derivatives of forward dynamics, and JAX transformations of the library, on random trees.

- jax.jacfwd, jax.jacrev and jax.grad of ``aba`` with respect to q (along the tangent
  space: ``q (+) dq`` at dq = 0), qd and tau agree with each other and with central finite
  differences;
- jax.grad of a scalar of ``aba`` with respect to the Model pytree agrees with finite
  differences of its mass, centre-of-mass, inertia, joint-placement and armature leaves;
- derivatives are finite (no NaN) at the neutral configuration with zero velocity, where
  quaternion logarithms, norms and rotation-vector formulas meet their removable
  singularities;
- jax.jit and jax.vmap of ``aba`` agree with plain calls.

Finite differences: central differences with Richardson extrapolation,
(4 D(H) - D(2H)) / 3, whose truncation error O(H^4 |f^(5)|) is negligible at H = 1e-5 (plain
central differences, whose error is H^2/6 |f'''|, reach 2e-7 relative at H = 1e-5 on light
bodies, where aba ~ M^-1 has large higher derivatives). What remains is rounding: the error
of each evaluation (~1e-16 |f|, amplified by cond(M) in aba) divided by H, i.e. ~1e-11 to
1e-9 relative to the largest entry of the Jacobian (the worst seen over 80 random models was
1.5e-9). FD_RTOL = 1e-7 leaves a margin of ~60x for worse-conditioned trees. The AD
results among themselves (forward vs reverse mode, grad vs Jacobian) are exact up to
rounding and are checked to AD_RTOL = 1e-10.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given

import mbjax
from random_models import (
    TreeSpec,
    assert_close,
    build_batch,
    build_model,
    hypothesis_settings,
    random_configurations,
    richardson,
    tree_specs,
    unstack,
)

H = 1e-5
FD_RTOL = 1e-7
AD_RTOL = 1e-10
BATCH = 4  # models (each at its own random state) per drawn structure


def _central_differences(f, x, h=H):
    """Jacobian (m, n) of f at x (n,) by central differences with steps h and 2h combined by
    Richardson extrapolation: all 4n evaluations in one vmapped call (one compilation)."""
    E = h * jnp.eye(x.shape[0], dtype=x.dtype)
    plus, minus, plus2, minus2 = jnp.split(jax.vmap(f)(x + jnp.concatenate([E, -E, 2 * E, -2 * E])), 4)
    return richardson((plus - minus) / (2 * h), (plus2 - minus2) / (4 * h)).T


def _state_inputs(spec, model):
    """Random qd, tau and output weights w, each (BATCH, nv), NumPy."""
    rng = np.random.default_rng(spec.seed)
    return tuple(rng.normal(size=(BATCH, model.nv)) for _ in range(3))


def _keys(spec):
    return jax.random.split(jax.random.PRNGKey(spec.seed % 2**31), BATCH)


# --------------------------------------------------------- d aba / d (q, qd, tau)
def _aba_derivatives(model, key, qd, tau, w):
    """At a random q: the Jacobians of aba w.r.t. (dq, qd, tau) by jacfwd, jacrev and
    central differences, and jax.grad of w . aba."""
    q = mbjax.random_configuration(model, key)

    def f(dq, qd, tau):
        return mbjax.aba(model, mbjax.integrate(model, q, dq), qd, tau)

    nv = qd.shape[0]
    x = (jnp.zeros_like(qd), qd, tau)
    args = (0, 1, 2)
    # central differences w.r.t. (dq, qd, tau) stacked into one vector of size 3 nv
    fd = _central_differences(lambda y: f(y[:nv], y[nv:2 * nv], y[2 * nv:]), jnp.concatenate(x))
    return dict(
        fwd=jax.jacfwd(f, argnums=args)(*x),
        rev=jax.jacrev(f, argnums=args)(*x),
        grad=jax.grad(lambda *a: jnp.dot(w, f(*a)), argnums=args)(*x),
        fd=jnp.split(fd, 3, axis=1),
    )


_evaluate_aba_derivatives = jax.jit(jax.vmap(_aba_derivatives))


@hypothesis_settings(2)
@given(tree_specs(max_bodies=8))
def test_aba_derivatives_match_finite_differences(spec):
    """jacfwd == jacrev, grad == w^T jacfwd, and jacfwd == central differences, for aba
    w.r.t. q (tangent), qd and tau."""
    models = build_batch(spec, BATCH)
    qd, tau, w = _state_inputs(spec, unstack(models, 0))
    o = jax.tree_util.tree_map(np.asarray, _evaluate_aba_derivatives(models, _keys(spec), qd, tau, w))
    # one scale for the three Jacobians: a Jacobian can vanish (d qdd / d qd of a single
    # revolute joint) and then carries the rounding of the others
    scale = max(np.max(np.abs(J)) for J in o["fwd"])
    for k, name in enumerate(("q (tangent)", "qd", "tau")):
        fwd, rev, fd, grad = o["fwd"][k], o["rev"][k], o["fd"][k], o["grad"][k]
        assert_close(rev, fwd, AD_RTOL, scale=scale, what=f"jacrev vs jacfwd of aba w.r.t. {name}")
        assert_close(grad, np.einsum("...i,...ij->...j", w, fwd), AD_RTOL,
                     scale=scale * np.max(np.abs(w)) * fwd.shape[-2],
                     what=f"grad of w . aba vs w^T jacfwd, w.r.t. {name}")
        assert_close(fwd, fd, FD_RTOL, scale=scale, what=f"jacfwd of aba vs central differences, w.r.t. {name}")


# ------------------------------------------------------------ d aba / d model
_UPPER = np.triu_indices(3)


def _symmetric(u):
    """Symmetric 3x3 matrices (..., 3, 3) from their upper triangles (..., 6)."""
    S = jnp.zeros(u.shape[:-1] + (3, 3), u.dtype)
    return S.at[..., _UPPER[0], _UPPER[1]].set(u).at[..., _UPPER[1], _UPPER[0]].set(u)


#: Model leaves checked against finite differences, as (flat parameters of the leaf, leaf
#: from those parameters, derivative w.r.t. those parameters from the leaf's gradient).
#: Inertias are perturbed symmetrically (entries (i, j) and (j, i) together): only
#: symmetric inertias are physical, and only there is aba's analytic derivative defined.
PARAMETERS = {
    "mass": (lambda x: x, lambda t, x: t, lambda g: g),
    "com": (lambda x: x.reshape(-1), lambda t, x: t.reshape(x.shape), lambda g: g.reshape(-1)),
    "inertia": (lambda x: x[:, _UPPER[0], _UPPER[1]].reshape(-1),
                lambda t, x: _symmetric(t.reshape(-1, 6)),
                lambda g: (g + np.swapaxes(g, -1, -2) - g * np.eye(3))[:, _UPPER[0], _UPPER[1]].reshape(-1)),
    "joint_translation": (lambda x: x.reshape(-1), lambda t, x: t.reshape(x.shape), lambda g: g.reshape(-1)),
    "armature": (lambda x: x, lambda t, x: t, lambda g: g),
}


def _model_gradient(model, q, qd, tau, w):
    """jax.grad of w . aba w.r.t. the whole Model, and central differences w.r.t. the flat
    parameters of the leaves in PARAMETERS (concatenated)."""

    def scalar(m):
        return jnp.dot(w, mbjax.aba(m, q, qd, tau))

    leaves = [getattr(model, name) for name in PARAMETERS]
    flat = [to_flat(x) for (to_flat, _, _), x in zip(PARAMETERS.values(), leaves)]
    sizes = [t.size for t in flat]

    def of_flat(theta):
        parts = jnp.split(theta, np.cumsum(sizes)[:-1])
        new = [from_flat(t, x) for (_, from_flat, _), t, x in zip(PARAMETERS.values(), parts, leaves)]
        return scalar(eqx.tree_at(lambda m: [getattr(m, n) for n in PARAMETERS], model, new))[None]

    return jax.grad(scalar)(model), _central_differences(of_flat, jnp.concatenate(flat))[0]


_evaluate_model_gradient = jax.jit(_model_gradient)


@hypothesis_settings(2)
@given(tree_specs(max_bodies=8))
# a light universal-jointed body (eigenvalue 0.013 of M) where plain central differences err
# by 2e-7 relative: the reason for the Richardson extrapolation
@example(TreeSpec(parents=(-1, -1), joints=("revolute", "universal"), armature=(False, False),
                  limited=(False, False), frames=(), seed=34581))
def test_model_parameter_gradient(spec):
    """jax.grad of w . aba w.r.t. the Model: finite everywhere, zero for the limits, and equal
    to central differences for masses, CoMs, inertias, joint placements and armatures."""
    model = build_model(spec)
    q = mbjax.random_configuration(model, jax.random.PRNGKey(spec.seed % 2**31))
    qd, tau, w = (x[0] for x in _state_inputs(spec, model))
    grad, fd = _evaluate_model_gradient(model, q, qd, tau, w)
    grad = jax.tree_util.tree_map(np.asarray, grad)
    for leaf in jax.tree_util.tree_leaves(grad):
        assert np.all(np.isfinite(leaf)), "jax.grad w.r.t. the model has non-finite entries"
    for name in ("lower", "upper", "velocity_limit", "effort_limit"):  # aba does not use them
        assert not np.any(getattr(grad, name)), f"nonzero gradient w.r.t. model.{name}"
    ad = np.concatenate([of_grad(getattr(grad, name)) for name, (_, _, of_grad) in PARAMETERS.items()])
    assert_close(ad, fd, FD_RTOL, what="jax.grad w.r.t. model parameters vs central differences")


# --------------------------------------------------------- no NaN at the neutral state
def _singular_arm():
    """A straight arm (identity rotations, each joint straight above the last) through the
    joint types whose configurations are not plain angles or lengths: free base, spherical,
    universal, planar, continuous; and a fixed frame "tip" at its end."""
    b = mbjax.ModelBuilder("straight_arm")
    parent = None
    for i, jt in enumerate(["free", "spherical", "universal", "planar", "continuous"]):
        b.add_body(f"b{i}", parent=parent, joint=jt, axis=(0, 0, 1), axis2=(0, 1, 0),
                   translation=(0, 0, 0.3 if i else 0.0), mass=1.0, com=(0, 0, 0.15),
                   inertia=np.diag([0.02, 0.02, 0.01]))
        parent = f"b{i}"
    b.add_body("tip", parent=parent, translation=(0, 0, 0.3))
    return b.build()


def _derivatives_at_rest(model):
    """Derivatives of the dynamics and kinematics at q = neutral, qd = 0, tau = 0."""
    q0 = mbjax.neutral(model)
    z = jnp.zeros(model.nv, q0.dtype)

    def aba_tangent(dq, qd, tau):
        return mbjax.aba(model, mbjax.integrate(model, q0, dq), qd, tau)

    def scalars(q, qd):  # through the raw coordinates of q (quaternions, (cos, sin) pairs)
        return jnp.stack([
            jnp.sum(mbjax.aba(model, q, qd, z)),
            mbjax.kinetic_energy(model, q, qd) + mbjax.potential_energy(model, q),
            jnp.sum(mbjax.frame_jacobian(model, q, "tip", "local")),
        ])

    def round_trip(v):  # identity near v = 0
        return mbjax.difference(model, q0, mbjax.integrate(model, q0, v))

    return {
        "jacfwd aba": jax.jacfwd(aba_tangent, argnums=(0, 1, 2))(z, z, z),
        "grad aba": jax.grad(lambda *a: jnp.sum(aba_tangent(*a)), argnums=(0, 1, 2))(z, z, z),
        "jacfwd scalars (raw q)": jax.jacfwd(scalars, argnums=(0, 1))(q0, z),
        "grad aba w.r.t. the model": jax.grad(lambda m: jnp.sum(mbjax.aba(m, q0, z, z)))(model),
        "jacfwd round trip": jax.jacfwd(round_trip)(z),
        "jacrev round trip": jax.jacrev(round_trip)(z),
    }


def test_derivatives_finite_at_neutral_and_rest():
    """q = neutral (identity quaternions, zero angles, straight arm), qd = 0, tau = 0:
    grad and jacfwd of aba (w.r.t. the state, the torques and the model), and jacfwd of
    other dynamics and kinematics through the raw coordinates of q, are finite there; the
    round trip v -> difference(q0, integrate(q0, v)) has the identity as derivative."""
    model = _singular_arm()
    results = jax.tree_util.tree_map(np.asarray, jax.jit(_derivatives_at_rest)(model))
    for what, tree in results.items():
        for leaf in jax.tree_util.tree_leaves(tree):
            assert np.all(np.isfinite(leaf)), f"{what}: non-finite derivative at the neutral state"
    for what in ("jacfwd round trip", "jacrev round trip"):
        assert_close(results[what], np.eye(model.nv), 1e-12, what=what)


# ------------------------------------------------------------------- jit and vmap
@hypothesis_settings(2)
@given(tree_specs(max_bodies=15, max_joint_types=3))
def test_jit_and_vmap_agree_with_plain_calls(spec):
    """jax.jit(mbjax.aba) with the model as an argument, jax.vmap over states and over models
    agree with one plain call per state; the jitted call is compiled with XLA's fusion emitters
    (conftest.py turns them off for the rest of the suite). (This tests the plumbing, pytrees and static
    topology, not joint kinematics: up to 3 joint types per tree keep compilations short.)"""
    n = 3
    models = build_batch(spec, n)
    model = unstack(models, 0)
    qs = np.asarray(random_configurations(model, jax.random.PRNGKey(spec.seed % 2**31), n))
    rng = np.random.default_rng(spec.seed)
    qd, tau = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    f_ext = rng.normal(size=(n, model.nbodies, 6))

    plain = np.stack([mbjax.aba(model, qs[i], qd[i], tau[i], f_ext[i]) for i in range(n)])
    jitted = jax.jit(mbjax.aba, compiler_options={"xla_cpu_use_fusion_emitters": True})  # XLA's default emitters
    assert_close(np.stack([jitted(model, qs[i], qd[i], tau[i], f_ext[i]) for i in range(n)]), plain,
                 1e-12, what="jax.jit(aba) vs aba")
    over_states = jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0, 0))(model, qs, qd, tau, f_ext)
    assert_close(over_states, plain, 1e-12, what="jax.vmap(aba) over states vs aba")

    # one state, a batch of models (same structure, different parameters)
    over_models = jax.vmap(mbjax.aba, in_axes=(0, None, None, None, None))(models, qs[0], qd[0], tau[0], f_ext[0])
    one_by_one = np.stack([mbjax.aba(unstack(models, k), qs[0], qd[0], tau[0], f_ext[0]) for k in range(n)])
    assert_close(over_models, one_by_one, 1e-12, what="jax.vmap(aba) over models vs aba")
