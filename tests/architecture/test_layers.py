"""The package's import graph: no cycles, no upward import between layers, no import
inside a function to hide either, and the public entry points kept thin. The memory guard
runs at the door only: ``mhajax.api`` (above analysis) and the commands; the layers below
``api`` do not import :mod:`mhajax.runtime.memory`, and the experiments (whose command checked
its sizes) do not import ``mhajax.api``.

Every ``import``/``from ... import`` of an ``mhajax`` module anywhere in a file (inside
functions too) is an edge; the test fails on a cycle between modules, on a module
importing a module of a higher layer, and on a function-level import of an ``mhajax``
module (such imports exist only to dodge a cycle or an order problem).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "mhajax"

#: layer of each top-level part of the package (a module or a subpackage); lower = more basic.
LAYERS = {
    "_version": 0, "errors": 1, "validate": 1, "verdict": 1, "linalg": 1, "runtime": 1,
    "data": 2,
    "models": 3,
    "losses": 4,
    "curvature": 5, "train": 5,
    "analysis": 6,
    "api": 7,
    "experiments": 8, "testing": 8,
    "cli": 9,
    "bench": 10, "figures": 10,
    "__init__": 11, "__main__": 11,
}
#: parts of one layer that must not import each other (siblings).
SIBLINGS = [{"curvature", "train"}, {"experiments", "testing"}, {"bench", "figures"}]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> dict:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def part(mod: str) -> str:
    """The top-level part of ``mhajax.a.b`` (``a``), ``__init__`` for the package itself."""
    bits = mod.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def imports(path: Path, mods: dict):
    """``[(target module, lineno, in_function)]`` of every mhajax import in the file."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    is_pkg = path.name == "__init__.py"
    out = []

    def visit(node, in_func):
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = me.split(".") if is_pkg else me.split(".")[:-1]
                    base = base[: len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in child.names]
            else:
                visit(child, f)
                continue
            for n in names:
                while n and n not in mods:
                    n = n.rpartition(".")[0]
                if n and n.startswith("mhajax") and n != me and not me.startswith(n + "."):
                    if (n, child.lineno, f) not in out:
                        out.append((n, child.lineno, f))
    visit(tree, False)
    return out


GRAPH = {m: imports(p, modules()) for m, p in modules().items()}


def test_every_module_has_a_layer():
    missing = sorted({part(m) for m in GRAPH} - set(LAYERS))
    assert not missing, f"modules outside the layer table: {missing}"


def test_no_upward_import():
    bad = []
    for m, edges in GRAPH.items():
        for t, line, _ in edges:
            a, b = part(m), part(t)
            if a == b:
                continue
            if LAYERS[b] > LAYERS[a] or any({a, b} <= s for s in SIBLINGS):
                bad.append(f"{m}:{line} imports {t} ({a} L{LAYERS[a]} -> {b} L{LAYERS[b]})")
    assert not bad, "\n".join(bad)


def test_no_function_level_import_of_the_package():
    bad = [f"{m}:{line} imports {t} inside a function" for m, edges in GRAPH.items()
           for t, line, inner in edges if inner]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    adj = {m: {t for t, _, _ in edges} for m, edges in GRAPH.items()}
    # A package __init__ may import its own submodules (re-exports): not a cycle edge back.
    state, stack, cycles = {}, [], []

    def dfs(u):
        state[u] = 1
        stack.append(u)
        for v in adj.get(u, ()):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif v not in state:
                dfs(v)
        stack.pop()
        state[u] = 2

    for m in adj:
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("top", ["verify", "figures"])
def test_entry_point_folders_are_thin(top):
    """``verify/`` and ``figures/`` only forward to the package: no function of their own."""
    for p in (ROOT / top).glob("*.py"):
        tree = ast.parse(p.read_text())
        defs = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert not defs, f"{p.relative_to(ROOT)} defines {defs}: move it into mhajax"


def test_the_memory_guard_runs_at_the_door_only():
    """No module below ``api`` imports the guard; no experiment imports ``api`` (a check's
    command is checked once, by the CLI, before it runs)."""
    below = {p for p, layer in LAYERS.items() if 2 <= layer < LAYERS["api"]}
    bad = [f"{m} imports {t}" for m, edges in GRAPH.items() if part(m) in below
           for t, _, _ in edges if t == "mhajax.runtime.memory"]
    bad += [f"{m} imports {t}" for m, edges in GRAPH.items() if part(m) == "experiments"
            for t, _, _ in edges if part(t) == "api"]
    assert not bad, "\n".join(bad)
    assert any(t == "mhajax.runtime.memory" for t, _, _ in GRAPH["mhajax.api"])


def test_experiments_do_not_import_each_other():
    exps = {m for m in GRAPH if m.startswith("mhajax.experiments.")}
    shared = {"mhajax.experiments.base", "mhajax.experiments.configs", "mhajax.experiments.registry"}
    bad = [f"{m} imports {t}" for m in exps - shared for t, _, _ in GRAPH[m] if t in exps - shared]
    assert not bad, "\n".join(bad)


def private_uses(path: Path, mods: dict) -> list:
    """``[(lineno, name)]``: private names (one leading underscore) of *another* mhajax module
    that ``path`` uses — imported (``from mhajax.m import _x``) or reached through an imported
    module (``m._x``)."""
    tree = ast.parse(path.read_text())
    aliases, out = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mhajax"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in mods:
                    aliases[a.asname or a.name] = full
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    out.append((node.lineno, full))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mhajax") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append((node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return out


def test_no_module_uses_another_modules_private_names():
    """One copy of each proof: a module that needs another's helper uses its public name
    (the census and SLQ once re-derived inertia's count through its private functions)."""
    mods = modules()
    bad = [f"{module_name(p)}:{line} uses {name}" for p in mods.values() for line, name in private_uses(p, mods)]
    assert not bad, "\n".join(bad)


def test_private_uses_sees_both_forms(tmp_path):
    mods = {"mhajax.curvature.inertia": None, "mhajax.curvature.census": None}
    f = tmp_path / "m.py"
    f.write_text("from mhajax.curvature import inertia\nfrom mhajax.curvature.census import _check, counts_of\n"
                 "import mhajax.curvature.census as C\nx = inertia._groups(4, None) + C._points\ny = inertia.count\n")
    assert sorted(private_uses(f, mods)) == [(2, "mhajax.curvature.census._check"),
                                             (4, "mhajax.curvature.census._points"),
                                             (4, "mhajax.curvature.inertia._groups")]
