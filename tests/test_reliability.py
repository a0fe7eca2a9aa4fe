"""Issue 19: no crash, hang or silent NaN on the inputs users actually give."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mbjax
from mbjax import constraints


@pytest.fixture(scope="module")
def pendulum():
    return mbjax.load_bundled("double_pendulum")


# ------------------------------------------------------------------ 1. mixed float types
def test_mixed_float_inputs_are_promoted_to_the_model_dtype(pendulum):
    q, qd = jnp.array([0.3, 0.2]), jnp.array([0.5, -1.0])
    tau32 = np.array([0.1, -0.2], np.float32)
    expected = mbjax.aba(pendulum, q, qd, tau32.astype(np.float64))
    for method in ("aba", "crba", "kkt"):
        out = mbjax.forward_dynamics(pendulum, q, qd, tau32, method=method)
        assert out.dtype == jnp.float64
        np.testing.assert_allclose(out, expected, rtol=1e-10)
    assert mbjax.aba(pendulum, q.astype(np.float32), qd, tau32).dtype == jnp.float64
    state = jax.tree_util.tree_map(lambda x: x.astype(np.float32), mbjax.maximal_state(pendulum, q, qd))
    assert mbjax.maximal_dynamics(pendulum, state, tau32).qdd.dtype == jnp.float64
    # a float32 model rounds float64 inputs to float32
    m32 = pendulum.astype(jnp.float32)
    out = mbjax.aba(m32, q, qd, tau32.astype(np.float64))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, expected, rtol=1e-4)


def test_mixed_float_simulate_and_assemble(pendulum):
    traj = mbjax.simulate(pendulum, jnp.array([0.3, 0.2]), np.zeros(2, np.float32), 0.0, 0.1)
    assert traj.qd.dtype == jnp.float64 and np.all(np.isfinite(traj.q))
    model, closures = constraints.four_bar()
    q = mbjax.assemble(model, closures, np.array([1.0, -0.6, 1.8], np.float32))
    assert q.dtype == jnp.float64
    assert np.max(np.abs(mbjax.loop_residual(model, closures, q))) < 1e-12
