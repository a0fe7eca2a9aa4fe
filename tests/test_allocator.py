"""mbjax.allocator: with mbjax's CPU settings, glibc's malloc keeps the memory a large result
of an mbjax entry point frees for the next one."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mbjax.allocator import MALLOC_SETTINGS, _mallopt, reuse_freed_memory

SCRIPT = """
import resource, sys
from mbjax.compilation import set_cpu_flags
set_cpu_flags(reuse_memory=sys.argv[1] == "reuse")
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import mbjax

def faults(f, *args):
    for _ in range(3):
        jax.block_until_ready(f(*args))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        jax.block_until_ready(f(*args))
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5

n = 6_000_000  # a 48 MB result, above glibc's largest mmap threshold (32 MB)
model = mbjax.load_bundled("quadruped")
q = jnp.broadcast_to(mbjax.neutral(model), (n // model.nv**2 + 1, model.nq))
print(faults(jax.jit(jax.vmap(lambda q: mbjax.crba(model, q))), q))
print(faults(mbjax.jit(jax.vmap(lambda q: mbjax.crba(model, q))), q))
"""


@pytest.mark.skipif(_mallopt() is None, reason="the settings are glibc's (mallopt); this C library keeps its own allocator")
def test_large_results_reuse_freed_memory(tmp_path):
    script = tmp_path / "faults.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS and k != "XLA_FLAGS"}
    faults = {}
    for mode in ("reuse", "glibc"):
        run = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        faults[mode] = [float(line) for line in run.stdout.split()]
    pages = 48e6 / os.sysconf("SC_PAGE_SIZE")  # of one result
    assert all(f < 0.02 * pages for f in faults["reuse"]), faults
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[always]" not in thp.read_text():  # huge pages would fault 512 times less
        assert all(f > 0.5 * pages for f in faults["glibc"]), faults  # fresh pages on every call


def test_settings_keep_what_is_set():
    env = {"MALLOC_MMAP_MAX_": "4", "PATH": "/bin"}
    added = reuse_freed_memory(env)
    assert added == {k: v for k, v in MALLOC_SETTINGS.items() if k != "MALLOC_MMAP_MAX_"}
    assert env == {"PATH": "/bin", "MALLOC_MMAP_MAX_": "4", **added}
    assert reuse_freed_memory(env) == {}  # idempotent
