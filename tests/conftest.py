"""Validation runs in float64.

Tests check numbers, not speed: XLA's backend optimisation is turned down to cut compile
time (most of the suite's time), unless XLA_FLAGS already sets it.
"""

import os

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
