"""What every example shares: precision, command line, figures and a JSON summary of results.

Each example imports this module before anything else (``python examples/X.py`` puts the
script's folder first on ``sys.path``, so it is found there)::

    from _common import Example

Importing it fixes JAX's precision before any array exists (mbjax makes a few at import):
float64 (``jax_enable_x64``), unless ``--float32`` is on the command line of an example that
offers it. It also keeps OpenBLAS to one thread (the examples' solves are small, and worker
threads only add wake-up latency on a busy machine; set before numpy loads OpenBLAS).

:class:`Example` parses the common options

- ``--quick``: a smaller, faster run (the tests use it); also on when the environment variable
  ``MBJAX_QUICK`` is set to anything but ``0`` (as for the notebooks);
- ``--out DIR``: the folder for the figures (default: the current folder) and, only when
  given, ``summary.json``, the example's key results as data (the tests read them);

plus the example's own, draws figures through :mod:`mbjax.plotting` when matplotlib is
installed (without it the example runs and prints as usual) and writes the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", "--float32" not in sys.argv[1:])

from mbjax import animate, plotting  # noqa: E402


class Example:
    """The command line of one example, and where its figures and summary go.

    ``doc``: the example's docstring (its first line is the ``--help`` description);
    ``quick``: what ``--quick`` does (``None``: nothing, the run is already quick);
    ``float32``: offer ``--float32`` (single precision, JAX's default: ``jax_enable_x64`` left
    off; the figures' names then end in ``_float32``); ``options``: a function that adds the
    example's own arguments to the :class:`argparse.ArgumentParser`. The parsed arguments are
    ``args``.
    """

    def __init__(self, doc: str, quick: str | None, float32: bool = False, options=None):
        parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0], allow_abbrev=False)
        quick_env = os.environ.get("MBJAX_QUICK", "") not in ("", "0")
        parser.add_argument("--quick", action="store_true", default=quick_env,
                            help=f"{quick or 'no effect: the run is already quick'} (also on when the environment "
                                 "variable MBJAX_QUICK is set, to anything but 0)")
        parser.add_argument("--out", type=Path, metavar="DIR",
                            help="folder for the figures (default: the current folder) and summary.json, the key "
                                 "results as JSON (written only when this option is given)")
        if float32:
            parser.add_argument("--float32", action="store_true",
                                help="single precision, as JAX does by default (jax_enable_x64 left off)")
        if options is not None:
            options(parser)
        self.args = parser.parse_args()
        self.quick: bool = self.args.quick
        self.folder = Path(".") if self.args.out is None else self.args.out
        self.folder.mkdir(parents=True, exist_ok=True)
        self.results: dict = {"quick": self.quick, "dtype": jax.dtypes.canonicalize_dtype(float).name, "figures": []}
        self.record()

    def record(self, **results) -> None:
        """Add ``results`` (numbers, strings, booleans, arrays) to ``summary.json`` under
        ``--out``; the file is rewritten on every call, so it holds everything recorded so far."""
        self.results.update(results)
        if self.args.out is not None:
            with open(self.args.out / "summary.json", "w", encoding="utf-8") as f:
                json.dump(self.results, f, indent=1, default=lambda x: x.tolist())  # numpy and JAX values

    def figure(self, name: str, draw, dpi: int = 120) -> bool:
        """Save the matplotlib figure that ``draw(pyplot)`` returns as ``name`` in the output
        folder (``name_float32.png`` for ``name.png`` with ``--float32``), and record its file
        name in the summary's ``figures``. Without matplotlib, say how to install it instead.

        **Returns:** whether the figure was saved.
        """
        try:
            plt = plotting.pyplot()
        except ImportError as error:
            print(f"no figure: {error}")
            return False
        plt.switch_backend("Agg")  # files only, never a window
        if getattr(self.args, "float32", False):
            name = f"{Path(name).stem}_float32{Path(name).suffix}"
        path = self.folder / name
        plotting.finish(draw(plt), str(path), dpi=dpi)
        return self._saved(path)


    def animation(self, name: str, model, ts, qs, **options) -> bool:
        """Write the animation of the motion ``qs`` at times ``ts`` (:func:`mbjax.animate`, with
        its ``options``) as ``name`` (a ``.gif``) in the output folder, and record it in the
        summary's ``figures``. Without matplotlib, say how to install it instead.

        **Returns:** whether the animation was written.
        """
        try:
            plotting.pyplot()
        except ImportError as error:
            print(f"no animation: {error}")
            return False
        path = self.folder / name
        animate(model, ts, qs, str(path), **options)
        return self._saved(path)

    def _saved(self, path: Path) -> bool:
        """Say that ``path`` was saved and record its name in the summary's ``figures``."""
        print(f"saved {path}")
        self.record(figures=[*self.results["figures"], path.name])
        return True


def convergence(solution, seconds: float) -> dict:
    """The convergence figures of an :class:`mbjax.trajopt.Solution` and the ``seconds`` its solve
    took (compilation included), for :meth:`Example.record` (``benchmarks/bench_shooting.py``
    reads them)."""
    return {"converged": bool(solution.converged), "cost": float(solution.cost), "violation": float(solution.violation),
            "iterations": int(solution.iterations), "outer_iterations": int(solution.outer_iterations),
            "solve_seconds": seconds}
