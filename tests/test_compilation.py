"""mbjax.jit and the entry points compiled with XLA:CPU options (mbjax.compilation): the same
values as a plain jax.jit, called from Python and inside every transformation (JAX refuses
compiler options on a nested jit, so they must fall back to a plain one there)."""

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import pytest

import mbjax


@pytest.fixture(scope="module")
def arm():
    model = mbjax.load_bundled("quadruped")
    q = mbjax.random_configuration(model, jax.random.PRNGKey(3))
    rng = np.random.default_rng(3)
    return model, q, jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=model.nv))


def test_entry_points_equal_plain_jit_everywhere(arm):
    model, q, qd, tau = arm
    plain = jax.jit(mbjax.aba.__wrapped__)(model, q, qd, tau)
    # other compiler options (single_state_options): the same formulas, other rounding (bitwise
    # equality with the same options: test_entry_points_choose_their_options)
    np.testing.assert_allclose(mbjax.aba(model, q, qd, tau), plain, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jax.jit(mbjax.aba)(model, q, qd, tau), plain, rtol=1e-12, atol=1e-12)
    batched = jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0))(model, q[None], qd[None], tau[None])
    np.testing.assert_allclose(batched[0], plain, rtol=1e-12, atol=1e-12)
    # reverse mode through the entry point against central differences along a torque direction
    d = jnp.linspace(-1.0, 1.0, model.nv)
    loss = lambda t: jnp.sum(jnp.sin(mbjax.aba(model, q, qd, t)))  # noqa: E731
    h = 1e-6
    fd = (loss(tau + h * d) - loss(tau - h * d)) / (2 * h)
    np.testing.assert_allclose(jnp.dot(jax.grad(loss)(tau), d), fd, rtol=1e-7)
    # a filter_jit entry point (static argument) inside jit and from Python
    R, p = mbjax.forward_kinematics(model, q)
    np.testing.assert_allclose(jax.jit(lambda x: mbjax.forward_kinematics(model, x)[1])(q), p, rtol=1e-14, atol=1e-14)


def test_entry_points_choose_their_options(arm):
    """An entry point's program for one state of a small model is compiled with the single-state
    options (bitwise the same as a jax.jit with them), a large model's or a batch's with
    cpu_options."""
    from mbjax.compilation import YNN_MIN_NV, _one_state, cpu_options, single_state_options

    model, q, qd, tau = arm
    assert model.nv < YNN_MIN_NV
    # one state's program is traced in the context that lets mbjax.fused make it one function
    for options, traced, m, args in ((single_state_options(), _one_state, model, (q, qd, tau)),
                                     (cpu_options(), lambda f: f, mbjax.load_example_robot("talos_reduced"), None)):
        if args is None:
            args = (mbjax.random_configuration(m, jax.random.PRNGKey(0)), jnp.ones(m.nv), jnp.ones(m.nv))
        expected = jax.jit(traced(mbjax.aba.__wrapped__), compiler_options=options)(m, *args)
        np.testing.assert_array_equal(mbjax.aba(m, *args), expected)
    batch = [x[None] for x in (q, qd, tau)]
    expected = jax.jit(jax.vmap(mbjax.aba.__wrapped__, in_axes=(None, 0, 0, 0)), compiler_options=cpu_options())
    np.testing.assert_array_equal(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0))(model, *batch),
                                  expected(model, *batch))
    assert single_state_options() != cpu_options()


def test_user_jit(arm):
    from mbjax.compilation import cpu_options

    model, q, qd, tau = arm
    f = mbjax.jit(lambda m, q, qd, tau: mbjax.aba(m, q, qd, tau))
    expected = jax.jit(mbjax.aba.__wrapped__, compiler_options=cpu_options())(model, q, qd, tau)
    np.testing.assert_array_equal(f(model, q, qd, tau), expected)
    np.testing.assert_allclose(jax.jit(f)(model, q, qd, tau), expected, rtol=1e-12, atol=1e-12)  # a plain jit
    # wrappers of an entry point are wrappers of it, not of its compiled program (to rounding:
    # with mbjax's loop flag a single state's Cholesky solve is written out, which XLA fuses
    # differently batched and unbatched)
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(None, 0, 0, 0))).trace(
        model, q[None], qd[None], tau[None]).lower().compile()(model, q[None], qd[None], tau[None])[0], expected,
        rtol=1e-12, atol=1e-12)

    @mbjax.jit(static_argnames="n")
    def repeated(model, q, n):
        return sum(mbjax.rnea(model, q, qd, tau) for _ in range(n))

    np.testing.assert_allclose(repeated(model, q, n=2), 2 * mbjax.rnea(model, q, qd, tau), rtol=1e-14, atol=1e-14)


def test_options_reach_top_level_vmaps_only(arm):
    """A vmap at the top level batches the compiled program with its options (simulate_batch);
    jit and grad trace a plain one (JAX refuses options there)."""
    from mbjax.compilation import _unstaged, cpu_options

    seen = []

    def probe(x):
        seen.append(_unstaged())
        return x

    probe(1.0)
    jax.vmap(jax.vmap(probe))(jnp.ones((2, 3)))
    jax.jit(probe)(1.0)
    jax.grad(probe)(1.0)
    jax.vmap(jax.grad(probe))(jnp.ones(2))
    jax.jit(jax.vmap(probe))(jnp.ones(2))
    assert seen == [False, True, None, None, None, None]
    model, q, qd, tau = arm
    qs, qds, taus = (jnp.stack([x, 0.5 * x]) for x in (q, qd, tau))
    qs = jax.vmap(lambda x: mbjax.normalize(model, x))(qs)
    plain = jax.vmap(jax.jit(mbjax.aba.__wrapped__), in_axes=(None, 0, 0, 0))(model, qs, qds, taus)
    np.testing.assert_allclose(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0))(model, qs, qds, taus), plain,
                               rtol=1e-12, atol=1e-12)
    f = mbjax.jit(lambda m, q, qd, tau: mbjax.aba(m, q, qd, tau))
    np.testing.assert_allclose(jax.vmap(f, in_axes=(None, 0, 0, 0))(model, qs, qds, taus), plain, rtol=1e-12,
                               atol=1e-12)
    # the probed options compile on this back end, and the public constant is them
    assert mbjax.compilation.CPU_OPTIONS == cpu_options()
    jax.jit(lambda x: 2 * x, compiler_options=mbjax.compilation.CPU_OPTIONS)(jnp.ones(3)).block_until_ready()


def test_options_probe_leaves_out_an_unknown_option(monkeypatch):
    """An option the installed XLA does not know (a later jaxlib may drop one) is left out and
    the others kept: the probe tries the combinations in order of preference."""
    import mbjax.compilation as c

    def probe_without(name):  # cpu_options() with the option ``name`` replaced by an unknown one
        monkeypatch.setattr(c, name, {"xla_cpu_no_such_option": False})
        c.cpu_options.cache_clear()
        try:
            return c.cpu_options()
        finally:
            c.cpu_options.cache_clear()

    known = c.cpu_options()
    probed = probe_without("CLASSIC_EMITTERS")
    assert "xla_cpu_no_such_option" not in probed
    assert probed == {k: v for k, v in known.items() if k != "xla_cpu_use_fusion_emitters"}
    # without YNNPACK's dots, no 512-bit vectors either (XLA's own dots with them can fail to compile)
    probed = probe_without("_YNN_DOTS")
    assert "xla_cpu_prefer_vector_width" not in probed and "xla_cpu_experimental_ynn_fusion_type" not in probed


def test_models_pass_packed(arm):
    """Called from Python, mbjax.jit passes a model as one buffer per dtype, made once per model
    object: the same values as the model passed array by array; NumPy leaves (mutable) and
    tracers (a vmap over models) go the plain way; the buffers go when the model goes."""
    import gc

    import mbjax.compilation as c

    model, q, qd, tau = arm
    model = jax.tree.map(lambda x: x + 0.0, model)  # a fresh object of fresh arrays
    # the entry point's options and tracing context
    one = jax.jit(c._one_state(mbjax.aba.__wrapped__), compiler_options=c.single_state_options())
    plain = one(model, q, qd, tau)
    f_ext = jnp.zeros((model.nbodies, 6)).at[-1, 2].set(3.0)
    np.testing.assert_array_equal(mbjax.aba(model, q, qd, tau), plain)
    assert id(model) in c._PACKED
    np.testing.assert_array_equal(mbjax.aba(model, q, qd, tau, f_ext=f_ext), one(model, q, qd, tau, f_ext))
    # an entry point with static arguments (eqx.filter_jit)
    np.testing.assert_array_equal(mbjax.integrate(model, q, qd), jax.jit(
        c._one_state(mbjax.integrate.__wrapped__), compiler_options=c.single_state_options())(model, q, qd))
    # NumPy leaves: changed in place, the next call sees the change
    mutable = jax.tree.map(np.array, model)
    before = mbjax.aba(mutable, q, qd, tau)
    assert id(mutable) not in c._PACKED
    mutable.armature[:] += 1.0
    after = mbjax.aba(mutable, q, qd, tau)
    np.testing.assert_array_equal(after, one(mutable, q, qd, tau))
    assert not np.array_equal(before, after)
    # models batched by vmap (tracers)
    models = jax.tree.map(lambda x: jnp.stack([x, x]), model)
    np.testing.assert_allclose(jax.vmap(mbjax.aba, in_axes=(0, None, None, None))(models, q, qd, tau)[1], plain,
                               rtol=1e-12, atol=1e-12)

    def packed_once():  # a model used once, in a scope of its own
        fresh = jax.tree.map(lambda x: x + 0.0, arm[0])
        mbjax.aba(fresh, q, qd, tau)
        assert id(fresh) in c._PACKED
        return id(fresh)

    key = packed_once()
    gc.collect()
    assert key not in c._PACKED


def test_packed_layout_round_trip():
    """One buffer per dtype, in order of first use; unpacking restores every leaf exactly."""
    import equinox as eqx

    from mbjax.compilation import _packed

    class Leaves(eqx.Module):
        leaves: dict

    tree = Leaves({"a": jnp.arange(6.0).reshape(2, 3), "b": jnp.arange(4, dtype=jnp.int32),
                   "c": jnp.ones((3, 1, 2), jnp.float32), "d": jnp.asarray(2.5), "e": jnp.zeros((0, 3))})
    assert _packed(tree.leaves) is None  # a dict cannot be weakly referenced: not cached
    layout, buffers = _packed(tree)
    assert [b.dtype for b in buffers] == [tree.leaves["a"].dtype, jnp.int32, jnp.float32]
    out = jax.jit(lambda bs: layout.unpack(bs))(buffers)
    assert jax.tree.structure(out) == jax.tree.structure(tree)
    for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(tree)):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_fused_run_keeps_every_dtype_exact():
    """mbjax.fused's loop (its state and constants stored in one floating buffer per dtype,
    integers and booleans bitcast): arguments, constants and results of every dtype come back
    bit for bit, NaN, infinities, -0.0 and the extreme integers included."""
    from mbjax.fused import _run

    table = np.array([-2**62, 2**40 + 1, -1, 0], np.int64)
    mask = np.array([True, False, True])
    odd = np.array([np.nan, -0.0, np.inf, 5e-324])

    def fun(x, i, b, y):
        return {"x": x * 2.0 + odd, "i": i * 3 + table[:2], "b": b & mask, "y": y + np.float32(1.5),
                "k": jnp.take(table, i % 4), "u": (i % 7).astype(jnp.uint32) + np.uint32(2**31)}

    args = (jnp.array([1.0, -3.5, 2.0, 0.25]), jnp.array([7, -9], jnp.int32), jnp.array([True, True, False]),
            jnp.array([2.5, np.nan], jnp.float32))
    got, want = jax.jit(lambda *a: _run(fun, *a))(*args), jax.jit(fun)(*args)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for key in want:
        assert got[key].dtype == want[key].dtype, key
        np.testing.assert_array_equal(np.asarray(got[key]).view(np.uint8), np.asarray(want[key]).view(np.uint8), key)


def test_fused_run_writes_reductions_out():
    """In mbjax.fused's one function reductions become elementwise operations (no reduction's
    own computation, whose scalars XLA:CPU allocates on the heap at every call): the same
    minima, maxima and logical reductions bit for bit, sums and products to rounding (halves
    first above 16 terms), over any axes."""
    from mbjax.fused import _run

    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 40, 5)))

    def fun(x):
        return (x.sum(axis=1), x.sum(axis=(0, 2)), x.sum(), x.max(axis=0), x.min(axis=(1, 2)),
                (x > 0).all(axis=1), (x > 2).any(axis=0), (1 + x / 10).prod(axis=1), jnp.sum(x[:, :3], axis=1))

    got, want = jax.jit(lambda x: _run(fun, x))(x), jax.jit(fun)(x)
    assert "reduce(" not in jax.jit(lambda x: _run(fun, x)).lower(x).compile().as_text()
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-14)
    for i in (3, 4, 5, 6, 8):  # the order of a minimum or a logical sum does not matter; 3 terms in order
        np.testing.assert_array_equal(got[i], want[i])


def _hoisted_and_default(body, tmp_path, suffix):
    """A script of ``body`` (after imports of JAX in float64 and mbjax, XLA_FLAGS removed) run in
    fresh processes as ``script mode path``, for the modes "hoisted" (``body`` sets mbjax's
    flags) and "default": each one's printed lines; its arrays saved at ``tmp_path / mode.suffix``."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text("import os, sys\nos.environ.pop('XLA_FLAGS', None)\nimport jax, numpy as np\n"
                      "jax.config.update('jax_enable_x64', True)\nimport mbjax\n" + body)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = {}
    for mode in ("hoisted", "default"):
        run = subprocess.run([sys.executable, str(script), mode, str(tmp_path / f"{mode}.{suffix}")], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        out[mode] = run.stdout.splitlines()
    return out


def test_cpu_flags_hoist_the_level_sweeps(tmp_path):
    """Importing mbjax makes no JAX backend, so that set_cpu_flags() after the import still
    reaches XLA: then the batched sweeps' loops are compiled as small calls, with the same
    accelerations as XLA's own loops; once JAX runs, set_cpu_flags() says it is too late, unless
    the flags are there already."""
    out = _hoisted_and_default(
        "from mbjax.compilation import _backend_made, cpu_options, set_cpu_flags\n"
        "assert not _backend_made()\n"
        "if sys.argv[1] == 'hoisted':\n"
        "    print(set_cpu_flags())\n"
        "model = mbjax.load_bundled('quadruped')\n"
        "q = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(0), 64))\n"
        "v = np.linspace(-1, 1, 64 * model.nv).reshape(64, model.nv)\n"
        "f = jax.jit(jax.vmap(mbjax.aba, in_axes=(None, 0, 0, 0)), compiler_options=cpu_options())\n"
        "print(f.lower(model, q, v, v).compile().as_text().count('xla_cpu_small_call'))\n"
        "np.save(sys.argv[2], np.asarray(f(model, q, v, v)))\n"
        "try:\n"
        "    set_cpu_flags()\n"
        "    print('again: nothing to change')\n"
        "except RuntimeError as e:\n"
        "    print('late:', e)\n", tmp_path, "npy")
    assert out["hoisted"][0] == mbjax.compilation.flags_line()
    assert int(out["hoisted"][1]) >= 2 and int(out["default"][0]) == 0  # the level sweeps' scans
    assert out["hoisted"][-1] == "again: nothing to change"  # a cell run twice
    assert "late: JAX's backend exists already" in out["default"][-1]
    np.testing.assert_allclose(np.load(tmp_path / "hoisted.npy"), np.load(tmp_path / "default.npy"), rtol=1e-12,
                               atol=1e-10)


def test_cli_prints_the_flags(capsys):
    from mbjax import cli
    from mbjax.compilation import set_cpu_flags

    assert cli.main(["flags"]) == 0
    line = capsys.readouterr().out.strip()
    assert line == mbjax.compilation.flags_line() and "xla_cpu_small_while_loop_byte_threshold" in line
    # set_cpu_flags on an environment of its own: kept flags, and the loop option beside another one
    env = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true --xla_backend_extra_options=other=1"}
    # the scheduler flag where jaxlib has it (an unknown flag in XLA_FLAGS ends the process)
    scheduler = " --xla_cpu_scheduler_type=CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED"
    assert (scheduler in f" {line}") == (tuple(map(int, jaxlib.__version__.split(".")[:2])) >= (0, 10))
    assert set_cpu_flags(env) == ("--xla_cpu_multi_thread_eigen=true --xla_backend_extra_options=other=1,"
                                  "xla_cpu_small_while_loop_byte_threshold=100000000"
                                  + (scheduler if scheduler in f" {line}" else ""))
    assert set_cpu_flags(dict(env)) == set_cpu_flags(env)  # idempotent


def test_one_state_programs_fused_with_the_loop_flag(tmp_path):
    """With mbjax's flags, an entry point's program for one state of a small model is one
    function (mbjax.fused: a hoisted loop, no LAPACK call left in it): the same values,
    derivatives and error messages as without the flags, in fresh processes."""
    out = _hoisted_and_default(
        "from mbjax.compilation import _one_state, set_cpu_flags, single_state_options\n"
        "if sys.argv[1] == 'hoisted':\n"
        "    set_cpu_flags()\n"
        "model = mbjax.load_bundled('quadruped')\n"
        "q = mbjax.random_configuration(model, jax.random.PRNGKey(1))\n"
        "v, t = np.linspace(-1, 1, model.nv), np.linspace(2, -3, model.nv)\n"
        "f_ext = np.zeros((model.nbodies, 6)); f_ext[-1, :3] = (1.0, -2.0, 0.5)\n"
        "text = jax.jit(_one_state(mbjax.aba.__wrapped__), compiler_options=single_state_options()).lower(\n"
        "    model, q, v, t).compile().as_text()\n"
        "print(text.count('xla_cpu_small_call'), text.count('lapack'))\n"
        "out = {'aba': mbjax.aba(model, q, v, t), 'aba_f': mbjax.aba(model, q, v, t, f_ext),\n"
        "       'rnea': mbjax.rnea(model, q, v, t, f_ext), 'crba': mbjax.crba(model, q),\n"
        "       'grad': jax.grad(lambda t: mbjax.aba(model, q, v, t) @ v)(t),\n"
        "       'jac': jax.jacfwd(lambda v: mbjax.aba(model, q, v, t))(v)}\n"
        "for name in ('aba_derivatives', 'rnea_derivatives'):\n"
        "    for i, x in enumerate(getattr(mbjax, name)(model, q, v, t)):\n"
        "        out[f'{name}{i}'] = x\n"
        "np.savez(sys.argv[2], **{k: np.asarray(x) for k, x in out.items()})\n"
        "bad_q = np.array(q); bad_q[3:7] *= 2.0\n"
        "for args in ((bad_q, v, t), (q, v * np.nan, t)):\n"
        "    try:\n"
        "        mbjax.aba(model, *args).block_until_ready()\n"
        "    except Exception as e:\n"
        "        print([m for m in ('norm is not 1', 'qd contains NaN') if m in str(e)])\n", tmp_path, "npz")
    calls, lapack = map(int, out["hoisted"][0].split())
    assert calls >= 1 and lapack == 0  # one function, no library call
    assert int(out["default"][0].split()[1]) > 0  # without the flags: LAPACK's Cholesky solve
    assert out["hoisted"][1:] == out["default"][1:] and len(out["default"]) == 3  # the same two errors
    assert out["hoisted"][1:] == ["['norm is not 1']", "['qd contains NaN']"]
    hoisted, default = np.load(tmp_path / "hoisted.npz"), np.load(tmp_path / "default.npz")
    assert sorted(hoisted) == sorted(default)
    for key in default:  # the same values to rounding (a Cholesky solve written out, constants folded)
        np.testing.assert_allclose(hoisted[key], default[key], rtol=1e-11, atol=1e-11, err_msg=key)


def test_user_jit_fused_with_the_loop_flag(tmp_path):
    """With mbjax's flags, a checked entry point inside a user's plain jax.jit is one function
    too (no YNNPACK call, no LAPACK call left: the loop hoisted), and every transformation of
    that jit (vmap, jacfwd, grad, a scan around the call, the model as an argument) gives the
    values and errors it gives without the flags, in fresh processes."""
    out = _hoisted_and_default(
        "from mbjax.compilation import set_cpu_flags\n"
        "if sys.argv[1] == 'hoisted':\n"
        "    set_cpu_flags()\n"
        "model = mbjax.load_bundled('quadruped')\n"
        "q = mbjax.random_configuration(model, jax.random.PRNGKey(1))\n"
        "v, t = np.linspace(-1, 1, model.nv), np.linspace(2, -3, model.nv)\n"
        "qs = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(2), 3))\n"
        "vs, ts = np.outer([1.0, -0.5, 2.0], v), np.outer([0.5, 1.0, -1.0], t)\n"
        "f = jax.jit(lambda q, v, t: mbjax.aba(model, q, v, t))\n"
        "text = f.lower(q, v, t).compile().as_text()\n"
        "print(text.count('xla_cpu_small_call'), text.count('__ynn'), text.count('lapack'))\n"
        "out = {'aba': f(q, v, t), 'vmap': jax.vmap(f)(qs, vs, ts), 'vmap_t': jax.vmap(f, (None, None, 0))(q, v, ts),\n"
        "       'jac': jax.jacfwd(f, argnums=1)(q, v, t), 'grad': jax.grad(lambda t: f(q, v, t) @ v)(t),\n"
        "       'arg': jax.jit(lambda m, q, v, t: mbjax.aba(m, q, v, t))(model, q, v, t),\n"
        "       'rnea': jax.jit(lambda q, v, a: mbjax.rnea(model, q, v, a))(q, v, t),\n"
        "       'crba': jax.jit(lambda q: mbjax.crba(model, q))(q),\n"
        "       'scan': jax.jit(lambda q, v, t: jax.lax.scan(lambda c, _: (mbjax.aba(model, q, v, c), c), t, None,\n"
        "                                                    length=3))(q, v, t)[1]}\n"
        "for name in ('aba_derivatives', 'rnea_derivatives'):\n"
        "    g = jax.jit(lambda q, v, t: getattr(mbjax, name)(model, q, v, t))\n"
        "    for i, x in enumerate(g(q, v, t)):\n"
        "        out[f'{name}{i}'] = x\n"
        "np.savez(sys.argv[2], **{k: np.asarray(x) for k, x in out.items()})\n"
        "bad_q = np.array(q); bad_q[3:7] *= 2.0\n"
        "bad_vs = np.array(vs); bad_vs[1, 2] = np.nan\n"
        "for call in (lambda: f(bad_q, v, t), lambda: jax.vmap(f)(qs, bad_vs, ts)):\n"
        "    try:\n"
        "        call().block_until_ready()\n"
        "    except Exception as e:\n"
        "        print([m for m in ('norm is not 1', 'qd contains NaN') if m in str(e)])\n", tmp_path, "npz")
    calls, ynn, lapack = map(int, out["hoisted"][0].split())
    assert calls >= 1 and ynn == 0 and lapack == 0  # one function, no library call
    assert out["hoisted"][1:] == out["default"][1:] == ["['norm is not 1']", "['qd contains NaN']"]
    hoisted, default = np.load(tmp_path / "hoisted.npz"), np.load(tmp_path / "default.npz")
    assert sorted(hoisted) == sorted(default)
    for key in default:  # the same values to rounding (products as matrix-vector products, constants folded)
        np.testing.assert_allclose(hoisted[key], default[key], rtol=1e-11, atol=1e-11, err_msg=key)


def test_derivative_rule_fused_with_the_loop_flag(tmp_path):
    """With mbjax's flags, aba's derivative rule computes one state's primal part (accelerations,
    state derivatives, M and M^-1) as one function for a model under FUSED_BELOW_NV coordinates:
    no LAPACK call left in a jax.jacfwd, and the Jacobians (q tangent, qd, tau, f_ext), a
    gradient (also with respect to every model parameter), a Hessian (the rule differentiated
    again) and a vmapped Jacobian equal those without the flags, in fresh processes (a free
    base, a revolute, a spherical and a prismatic joint)."""
    out = _hoisted_and_default(
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from random_models import TreeSpec, build_model\n"
        "from mbjax.compilation import set_cpu_flags\n"
        "from mbjax.dynamics.derivatives import FUSED_BELOW_NV\n"
        "if sys.argv[1] == 'hoisted':\n"
        "    set_cpu_flags()\n"
        "out = {}\n"
        "joints = ('free', 'revolute', 'spherical', 'prismatic')\n"
        "model = build_model(TreeSpec(parents=(-1, 0, 1, 1), joints=joints, armature=(True,) * 4,\n"
        "                             limited=(False,) * 4, frames=(), seed=4))\n"
        "assert model.nv < FUSED_BELOW_NV\n"
        "q = mbjax.random_configuration(model, jax.random.PRNGKey(1))\n"
        "v, t = np.linspace(-1, 1, model.nv), np.linspace(2, -3, model.nv)\n"
        "f_ext = np.linspace(-1, 1, model.nbodies * 6).reshape(model.nbodies, 6)\n"
        "def fd(dq, v, t, f):\n"
        "    return mbjax.aba(model, mbjax.integrate(model, q, dq), v, t, f)\n"
        "jac = jax.jit(jax.jacfwd(fd, argnums=(0, 1, 2, 3)))\n"
        "text = jac.lower(np.zeros(model.nv), v, t, f_ext).compile().as_text()\n"
        "print(text.count('lapack') > 0)\n"
        "for i, x in enumerate(jac(np.zeros(model.nv), v, t, f_ext)):\n"
        "    out[f'jac{i}'] = x\n"
        "loss = lambda v, t: jax.numpy.sum(jax.numpy.sin(mbjax.aba(model, q, v, t)))\n"
        "out['grad'] = jax.jit(jax.grad(loss))(v, t)\n"
        "out['hessian'] = jax.jit(jax.hessian(loss))(v, t)\n"
        "g = jax.jit(jax.grad(lambda m: jax.numpy.sum(jax.numpy.sin(mbjax.aba(m, q, v, t)))))(model)\n"
        "out['model'] = np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(g)\n"
        "                               if np.issubdtype(np.asarray(x).dtype, np.floating)])\n"
        "qs = jax.vmap(lambda k: mbjax.random_configuration(model, k))(jax.random.split(jax.random.PRNGKey(2), 3))\n"
        "out['vmap'] = jax.jit(jax.vmap(jax.jacfwd(lambda q, v: mbjax.aba(model, q, v, t), argnums=1),\n"
        "                               in_axes=(0, None)))(qs, v)\n"
        "np.savez(sys.argv[2], **{k: np.asarray(x) for k, x in out.items()})\n", tmp_path, "npz")
    assert out["hoisted"] == ["False"]  # the primal part fused, its solve a product
    assert out["default"] == ["True"]
    hoisted, default = np.load(tmp_path / "hoisted.npz"), np.load(tmp_path / "default.npz")
    assert sorted(hoisted) == sorted(default)
    for key in default:  # the same values to rounding (a Cholesky factor and M^-1 written out)
        np.testing.assert_allclose(hoisted[key], default[key], rtol=1e-10, atol=1e-10 * np.abs(default[key]).max(),
                                   err_msg=key)


@pytest.mark.parametrize("dims, shapes", [
    ((((1,), (0,)), ((), ())), ((13, 18), (18, 6))),
    ((((1,), (0,)), ((), ())), ((3, 9), (9, 10))),  # fewer rows
    ((((2,), (1,)), ((0,), (0,))), ((4, 9, 8), (4, 8, 2))),  # batched
    ((((0, 3), (2, 0)), ((1,), (1,))), ((2, 3, 5, 4), (4, 3, 2, 7, 1))),  # several dims, any order
    ((((1,), (0,)), ((), ())), ((9, 9), (9, 1))),  # a matrix-vector product: left alone
])
def test_fused_products_as_matrix_vector_products(dims, shapes):
    """Matrix products that YNNPACK would take in a user's jax.jit are written as matrix-vector
    products in mbjax.fused (which YNNPACK does not take): the same shape and dtype, the values to
    rounding."""
    from jax import lax

    from mbjax.fused import _vector_products

    rng = np.random.default_rng(0)
    a, b = (jnp.asarray(rng.normal(size=s)) for s in shapes)
    eqn = jax.make_jaxpr(lambda a, b: lax.dot_general(a, b, dims))(a, b).eqns[0]
    got, want = _vector_products(eqn, a, b), lax.dot_general(a, b, dims)
    if shapes[1][-1] == 1 and len(shapes[1]) == 2:
        assert got is None
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    products = jax.make_jaxpr(lambda a, b: _vector_products(eqn, a, b))(a, b).jaxpr.eqns
    for e in products:  # every product left has a vector side
        if e.primitive.name == "dot_general":
            (lc, rc), (lb, rb) = e.params["dimension_numbers"]
            free = [np.prod([x.aval.shape[d] for d in range(x.aval.ndim) if d not in c + bb], dtype=int)
                    for x, c, bb in zip(e.invars, (lc, rc), (lb, rb))]
            assert min(free) == 1


def test_fused_trace_folds_constants_in_one_program(arm, monkeypatch):
    """Tracing a fused call computes its constant equations (the model's, folded at trace time)
    with one compiled program, not one program per primitive (58 of them for panda's aba, 1.1 s
    of its 2 s trace, before session 41); the folded program gives the same values."""
    import mbjax.compilation as compilation

    model, q, qd, tau = arm
    want = jax.jit(lambda q, qd, tau: mbjax.aba(model, q, qd, tau))(q, qd, tau)  # not fused: no loop flag
    monkeypatch.setattr(compilation, "loops_hoisted", lambda: True)
    compilation.run_once_options()
    compiles = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        traced = jax.jit(lambda q, qd, tau: mbjax.aba(model, q, qd, tau)).trace(q, qd, tau)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert len(compiles) == 1
    assert "while" in str(traced.jaxpr)  # the fused loop
    np.testing.assert_allclose(traced.lower().compile()(q, qd, tau), want, rtol=1e-12, atol=1e-12)
