"""The forward-dynamics protocol (``mbjax.Dynamics``, ``mbjax.methods``): every registered
formulation agrees with the ABA, checked and unchecked forms, and the three ways of naming a
formulation (a name, a Dynamics, a plain function) reach the same numbers everywhere."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax.methods import METHODS, as_dynamics

jax.config.update("jax_enable_x64", True)


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    q = mbjax.integrate(model, mbjax.neutral(model), jnp.asarray(0.3 * rng.normal(size=model.nv)))
    return q, jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=model.nv))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_agrees_with_aba(method):
    """A free-floating chain of revolute joints (the bundled space robot, no armature): every
    formulation in the registry gives the ABA's accelerations, with and without f_ext."""
    model = mbjax.load_bundled("space_robot")
    q, qd, tau = _state(model)
    f_ext = jnp.asarray(np.random.default_rng(1).normal(size=(model.nbodies, 6)))
    for f in (None, f_ext):
        ref = mbjax.aba(model, q, qd, tau, f)
        got = mbjax.forward_dynamics(model, q, qd, tau, f, method=method)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * (1 + float(jnp.abs(ref).max())))
        np.testing.assert_allclose(as_dynamics(method).unchecked()(model, q, qd, tau, f), got, rtol=1e-12, atol=1e-12)


def test_checked_and_unchecked_forms():
    model = mbjax.load_bundled("double_pendulum")
    q, qd, tau = _state(model)
    aba = as_dynamics("aba")
    assert aba.checked and not aba.unchecked().checked and aba.unchecked().unchecked() == aba.unchecked()
    bad = qd.at[0].set(jnp.nan)
    with pytest.raises(Exception, match="qd contains NaN"):
        jax.block_until_ready(jax.jit(aba)(model, q, bad, tau))
    assert np.isnan(np.asarray(jax.jit(aba.unchecked())(model, q, bad, tau))).any()
    with pytest.raises(ValueError, match="qd has shape"):
        aba(model, q, qd[:1], tau)


def test_names_dynamics_and_functions_are_interchangeable():
    model = mbjax.load_bundled("double_pendulum")
    q, qd, tau = _state(model)

    def plain(model, q, qd, tau):
        return mbjax.aba(model, q, qd, 2.0 * tau)

    ref = mbjax.aba(model, q, qd, 2.0 * tau)
    np.testing.assert_allclose(mbjax.forward_dynamics(model, q, qd, tau, method=plain), ref, rtol=1e-14)
    assert as_dynamics(as_dynamics("crba")) is as_dynamics("crba")
    traj = mbjax.simulate(model, q, qd, 0.0, 0.2, method=as_dynamics("crba"), saveat=jnp.array([0.2]))
    by_name = mbjax.simulate(model, q, qd, 0.0, 0.2, method="crba", saveat=jnp.array([0.2]))
    np.testing.assert_allclose(traj.q, by_name.q, rtol=1e-13)
    with pytest.raises(ValueError, match="unknown method 'abba'"):
        as_dynamics("abba")
    with pytest.raises(TypeError, match="method must be"):
        as_dynamics(3)
    with pytest.raises(ValueError, match="unknown maximal-coordinate formulation"):
        mbjax.methods.Maximal("lu")
