"""Validation runs in float64.

Tests check numbers, not speed: XLA's backend optimisation is turned down and its classic loop
emitters replace the fusion emitters, to cut compile time (most of the suite's time), unless
XLA_FLAGS already sets them; the examples and the docs' code, run as subprocesses, inherit them.

XLA:CPU's multi-threaded Eigen pool is switched off (``--xla_cpu_multi_thread_eigen=false``),
and so is asynchronous dispatch on CPU. With both on, a large vmapped program holding many
host callbacks (every ``eqx.error_if`` check is one) occasionally hung forever in XLA's
``Execute`` on this 2-core machine (seen twice in test_closures.py and once in
test_formulations.py; jax 0.10.2). Both settings are known workarounds for CPU hangs of this
kind (jax-ml/jax#25861). The single-threaded pool was also 1.3-3x faster for batched code
here. The hang still came twice in test_formulations.py's fixed-base test in runs that
dropped the compiled programs after each module (jax.clear_caches), which is therefore not
done; pytest-timeout and pytest-rerunfailures (pyproject.toml) stop such a test and run it once
more.
"""

import os

_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    _flags += " --xla_backend_optimization_level=0"
if "xla_cpu_use_fusion_emitters" not in _flags:  # XLA's classic loop emitters: 876 s for the suite, 1153 s without
    _flags += " --xla_cpu_use_fusion_emitters=false"
if "xla_cpu_multi_thread_eigen" not in _flags:
    _flags += " --xla_cpu_multi_thread_eigen=false"
os.environ["XLA_FLAGS"] = _flags.strip()
# jaxlib's LAPACK calls go to OpenBLAS, whose worker threads on this busy 2-core machine cost ~8 ms
# of wake-up latency per call once a solve has 64 or more right-hand sides (the batched tangents of
# jacfwd through a factorisation): 400x slower than one thread. Set before numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import contextlib  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_enable_async_dispatch", False)


@pytest.fixture
def runtime_checks_off():
    """Trace ``eqx.error_if`` checks out of the programs a test compiles.

    A program that calls dozens of checked public functions under one vmap holds as many host
    callbacks; with them XLA:CPU (jax 0.10.2) hung in ``Execute`` in about one run in two on
    this 2-core machine (test_formulations.py), and never with the checks off. The checks
    themselves are tested in test_errors.py.
    """
    import equinox._errors

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(equinox._errors, "EQX_ON_ERROR", "off")
        yield


@pytest.fixture(scope="session")
def batching():
    """``with batching(CHUNK=8, MIN_BATCH=1, ...):`` mbjax's batching settings
    (``mbjax.dynamics.levels``) for a block of a test.

    JAX caches the batched trace of a jitted function (such as ``mbjax.aba``) by its jaxpr, so
    that a setting changed after a vmap of it at the same shapes, anywhere in the process, would
    not reach the programs traced next: they would silently keep the path of the earlier
    settings (e.g. the one-state fallback instead of the level sweeps). The caches are cleared
    when the settings change and again when they are restored."""
    from mbjax.dynamics import levels

    @contextlib.contextmanager
    def settings(**values):
        try:
            with pytest.MonkeyPatch.context() as patch:
                for name, value in values.items():
                    patch.setattr(levels, name, value)
                jax.clear_caches()
                yield
        finally:
            jax.clear_caches()

    return settings
