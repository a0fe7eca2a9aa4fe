"""mbjax.spatial.sincos and stored_sincos (the batches' joint transforms), the float64 sine and
cosine, against mpmath (40 significant digits): the argument reduction over seventeen orders of
magnitude (to 3e9, where the quadrant count nears 2^31) and at the quadrant boundaries, the
derivatives, and the special values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mbjax.spatial import sincos, stored_sincos

mpmath = pytest.importorskip("mpmath", reason="mpmath (installed with SymPy, in the test extra) is the reference")
mpmath.mp.dps = 40


def _exact(x):
    return (np.array([float(mpmath.sin(mpmath.mpf(float(v)))) for v in x]),
            np.array([float(mpmath.cos(mpmath.mpf(float(v)))) for v in x]))


@pytest.mark.parametrize("fun", [sincos, stored_sincos])
@pytest.mark.parametrize("magnitude", [1e-8, 1.0, 10.0, 1e4, 1e9, 3e9])
def test_sincos_within_an_ulp_of_exact(magnitude, fun):
    rng = np.random.default_rng(int(np.log10(magnitude)) + 10)
    quarter_turns = np.arange(-12, 13) * np.pi / 4  # the quadrant boundaries and their midpoints
    x = np.concatenate([rng.uniform(-magnitude, magnitude, 1500), quarter_turns, np.nextafter(quarter_turns, 10)])
    s, c = (np.asarray(v) for v in jax.jit(fun)(jnp.asarray(x)))
    s_ref, c_ref = _exact(x)
    # 1 ulp of 1 is 2.2e-16: within one rounding of the exact value, like libm (numpy: 1.1e-16)
    assert np.abs(s - s_ref).max() <= 2.3e-16
    assert np.abs(c - c_ref).max() <= 2.3e-16


@pytest.mark.parametrize("fun", [sincos, stored_sincos])
def test_sincos_derivatives_and_special_values(fun):
    x = jnp.asarray([-2.5, -0.3, 0.0, 0.7, 3.0, 1e5])
    ds = jax.vmap(jax.grad(lambda t: fun(t)[0]))(x)
    dc = jax.vmap(jax.grad(lambda t: fun(t)[1]))(x)
    d2s = jax.vmap(jax.grad(jax.grad(lambda t: fun(t)[0])))(x)
    s, c = _exact(np.asarray(x))
    np.testing.assert_allclose(ds, c, rtol=0, atol=2.3e-16)
    np.testing.assert_allclose(dc, -s, rtol=0, atol=2.3e-16)
    np.testing.assert_allclose(d2s, -s, rtol=0, atol=2.3e-16)
    assert fun(jnp.float64(0.0)) == (0.0, 1.0)
    assert all(np.isnan(v) for v in fun(jnp.asarray([np.nan, np.inf, -np.inf]))[0])
    s32, c32 = fun(jnp.float32(0.5))  # other precisions: jnp.sin, jnp.cos
    assert s32.dtype == jnp.float32 and s32 == jnp.sin(jnp.float32(0.5)) and c32 == jnp.cos(jnp.float32(0.5))
