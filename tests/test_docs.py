"""The manual builds and its code runs.

- ``mkdocs build --strict`` from the repository root (docs/, mkdocs.yml): any warning (a broken
  link or anchor, a page missing from the nav, a docstring that mkdocstrings cannot render)
  fails it. Skipped, with the reason, where the documentation tools are not installed
  (``pip install -e ".[docs]"``; the test extra has them too).
- The ```python blocks of every page of docs/ run, the blocks of one page in one namespace
  and in order, as tests/test_examples.py runs README.md's. They run in a subprocess, which
  inherits the compile-time XLA flags that conftest.py sets (measured: 44 CPU-s instead of 70).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TIMEOUT_S = 900


def _missing_tools() -> list[str]:
    missing = []
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # the parent package of a dotted name is missing
            found = False
        if not found:
            missing.append(module)
    return missing


MISSING = _missing_tools()

DOCS_RUNNER = r"""
import re, sys
from pathlib import Path
for page in sorted(Path(sys.argv[1]).glob("*.md")):
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    namespace = {"__name__": "__main__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"<{page.name} block {i}>", "exec"), namespace)
    print(f"{page.name}: {len(blocks)} blocks OK", flush=True)
print("DOCS OK")
"""


@pytest.mark.skipif(bool(MISSING), reason=f"the documentation tools are not installed (missing: {', '.join(MISSING)}); "
                                          'pip install -e ".[docs]"')
def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # mkdocs-material's notice about MkDocs 2.0
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "dynamics" / "index.html").is_file()
    # the API pages were rendered from the docstrings, not left as ::: directives
    api = (tmp_path / "site" / "api" / "dynamics" / "index.html").read_text(encoding="utf-8")
    assert "articulated" in api.lower() or "accelerations" in api.lower(), "API page without docstrings"


def test_every_page_in_nav():
    """Every Markdown page of docs/ is in mkdocs.yml's nav (the strict build also warns, but
    this says which page without needing the tools)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert pages, "no pages in docs/"
    missing = [p for p in pages if p not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def test_docs_code_blocks(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-c", DOCS_RUNNER, str(DOCS)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "DOCS OK" in log, f"a code block of docs/ failed:\n{log[-6000:]}"
    pages_with_code = [p.name for p in sorted(DOCS.glob("*.md"))
                       if re.search(r"```python\n", p.read_text(encoding="utf-8"))]
    for name in pages_with_code:
        assert f"{name}: " in log, name
