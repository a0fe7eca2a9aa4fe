"""glibc's ``malloc`` set to keep the memory that large results free, for the next ones.

A batched call returns each result in one buffer of its own, which XLA:CPU allocates with
``malloc`` on every call: talos_reduced's mass matrices at B = 4096 are 47 MB. glibc serves
blocks above its mmap threshold (which it raises to at most 32 MB) as fresh pages from the
kernel and unmaps them when they are freed, so each such call takes a page fault on every 4 KB
of its result (11,553 per call there: 6.4-6.9 µs per state against 2.1-2.5 with the memory
reused, Pinocchio's ``crba`` 3.6 µs; ``benchmarks/README.md``, session 42). Two settings keep
freed blocks in the heap, where the next result finds them:

- ``MALLOC_MMAP_MAX_=0``: no block of its own mapping, whatever its size;
- ``MALLOC_TRIM_THRESHOLD_``: free memory at the heap's top goes back to the kernel only above
  1 GiB (glibc's default: 128 KB).

They hold for the whole process: its resident memory does not shrink when a large array is
freed in the middle of the heap. They reach the calling thread's heap, where the results of
mbjax's entry points are made (their input checks have JAX run the program on the calling
thread). A program that JAX runs on a thread of its own (one without checks, e.g. with
``EQX_ON_ERROR=off``) gets its results from that thread's heap, which glibc maps anew for each
large block: ``MALLOC_ARENA_MAX=1`` in the environment gives every thread the one heap, at 3-6 %
of a single call's time (ur5, talos_reduced; not set here). Other C libraries (macOS, musl) are
left as they are.
"""

from __future__ import annotations

import ctypes
import os
import platform

#: glibc's environment variables for :func:`reuse_freed_memory`, with their values
MALLOC_SETTINGS = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}

#: the ``mallopt`` parameter of each variable (glibc's malloc.h: M_MMAP_MAX, M_TRIM_THRESHOLD)
_MALLOPT = {"MALLOC_MMAP_MAX_": -4, "MALLOC_TRIM_THRESHOLD_": -1}


def reuse_freed_memory(environ=None) -> dict:
    """Set :data:`MALLOC_SETTINGS` in ``environ`` (by default ``os.environ``: this process,
    through glibc's ``mallopt``, and the processes it starts), each one that is not set there
    already. Returns the settings it added.

    :func:`mbjax.compilation.set_cpu_flags` calls it (before JAX's first computation).
    Called later it holds from then on."""
    environ = os.environ if environ is None else environ
    added = {name: value for name, value in MALLOC_SETTINGS.items() if name not in environ}
    environ.update(added)
    mallopt = _mallopt() if environ is os.environ else None
    for name, value in added.items():
        if mallopt is not None and not mallopt(_MALLOPT[name], int(value)):
            raise RuntimeError(f"glibc's mallopt refused {name}={value}")
    return added


def _mallopt():
    """glibc's ``mallopt``, or ``None`` under another C library."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return getattr(ctypes.CDLL(None), "mallopt", None)
