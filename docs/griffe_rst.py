"""A griffe extension for the API pages: mbjax's docstrings use two reStructuredText habits that
Markdown does not know, and this rewrites them when the docs are built (the sources are left
alone).

- roles such as :func:`mbjax.aba`, :class:`~.levels.Levels` or :mod:`.terms` become inline
  code, showing the name as written (``~`` keeps the last component only, as Sphinx does);
- a paragraph ending in ``::`` followed by an indented block becomes that paragraph ending in
  ``:`` followed by a fenced code block.
"""

from __future__ import annotations

import re
import textwrap

import griffe

_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    tilde, target = match.groups()
    target = target.lstrip(".")
    if tilde:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _literal_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            indent = len(line) - len(line.lstrip())
            j = i + 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
                j -= 1
            if block:
                head = line.rstrip()[:-1]
                out.append(head if head.strip() else "")
                out.append("")
                out.append(" " * indent + "```python")
                out.extend(" " * indent + b for b in textwrap.dedent("\n".join(block)).strip("\n").split("\n"))
                out.append(" " * indent + "```")
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrite Sphinx roles and ``::`` literal blocks of every docstring as Markdown."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _literal_blocks(_ROLE.sub(_role, obj.docstring.value))
