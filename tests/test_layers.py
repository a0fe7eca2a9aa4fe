"""The import graph of ``mbjax/``: no cycle, and no module importing one in a layer above it.

Layers, lowest first (a module may import its own layer and those below):

0. ``spatial``, ``linalg``, ``cholesky``, ``checks``, ``compilation``, ``fused``, ``allocator``, ``tangents``,
   ``plotting``, ``progress``: algebra, batch-safe LAPACK Cholesky, input checks, how entry points are compiled (and fused
   into one function), glibc's reuse of freed memory, symbolic zeros of derivative rules,
   figures, progress bars
1. ``model``: topology, joint types, the Model pytree, builders and file loaders, tree traversals
2. ``configuration``, ``kinematics``, ``robots``
3. ``dynamics``: the recursive algorithms (rnea, aba, crba, derivatives) and energy terms
4. ``formulations``, ``kane``: the maximal-coordinate formulations, Kane's method
5. ``methods`` (the forward-dynamics formulations by name, above all of them), ``simulation``:
   diffrax integration, controllers, events, batches
6. ``constraints``: loop closures, closed-chain dynamics, Huang's stepper; ``contact``: contacts
   with the ground and joint limits
7. ``identify``, ``trajopt``
8. ``animate``, ``interop``, ``cli``, ``__main__`` and the package's ``__init__`` (the public API)

Imports inside functions count too: hiding an import in a function does not remove the arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mbjax"

LAYERS = (
    ("mbjax.spatial", "mbjax.linalg", "mbjax.cholesky", "mbjax.checks", "mbjax.compilation", "mbjax.fused", "mbjax.allocator",
     "mbjax.tangents", "mbjax.plotting", "mbjax.progress"),
    ("mbjax.model",),
    ("mbjax.configuration", "mbjax.kinematics", "mbjax.robots"),
    ("mbjax.dynamics",),
    ("mbjax.formulations", "mbjax.kane"),
    ("mbjax.methods", "mbjax.simulation"),
    ("mbjax.constraints", "mbjax.contact"),
    ("mbjax.identify", "mbjax.trajopt"),
    ("mbjax.animation", "mbjax.interop", "mbjax.cli", "mbjax.__main__", "mbjax"),
)

def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name, path, modules):
    """Modules of mbjax that ``name`` imports (module level and inside functions)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
                target = ".".join(base)
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def _layer(name):
    matches = [(len(prefix), i) for i, names in enumerate(LAYERS) for prefix in names
               if name == prefix or name.startswith(prefix + ".")]
    assert matches, f"{name} is in no layer: add it to LAYERS in tests/test_layers.py"
    return max(matches)[1]


def _graph():
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer():
    for name in _graph():
        _layer(name)


def test_no_upward_imports():
    upward = set()
    for name, targets in _graph().items():
        for target in targets:
            reexport = name != "mbjax" and target.startswith(name + ".")  # a package's __init__
            if _layer(target) > _layer(name) and not reexport:
                upward.add((name, target))
    assert not upward, "imports from a higher layer (see the layers in tests/test_layers.py): " + ", ".join(
        f"{a} -> {b}" for a, b in sorted(upward))


def test_no_import_cycles():
    graph = _graph()
    # packages' __init__ files only re-export their own modules: leave them out
    graph = {m: {t for t in ts if not _is_package(t)} for m, ts in graph.items() if not _is_package(m)}
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_no_private_names_across_modules():
    modules = _modules()
    private = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("mbjax")):
                private += [f"{name} imports {a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert not private, "private names imported across modules (make them public or move them): " + "; ".join(private)


def _is_package(name):
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()


def test_no_module_is_shadowed_by_an_export():
    """``package.name`` is the module ``name`` or nothing: a package exporting a function under
    one of its modules' names hides that module from ``import package.name as m`` readers."""
    import importlib
    import types

    shadowed = []
    for name, path in _modules().items():
        if path.name != "__init__.py":
            continue
        package = importlib.import_module(name)
        for child in path.parent.glob("*.py"):
            value = getattr(package, child.stem, None)
            if child.stem != "__init__" and value is not None and not isinstance(value, types.ModuleType):
                shadowed.append(f"{name}.{child.stem}")
    assert not shadowed, "modules hidden by a same-named export (rename the module): " + ", ".join(shadowed)
