"""The package's shape: no import cycle (also none hidden in a function body) and no
package importing one above it (docs/design.md §8)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "servetrace"
# Top to bottom; a package may import those below it. comparison and rules share a level.
LAYERS = (
    ("cli",),
    ("render",),
    ("api",),
    ("comparison", "rules"),
    ("runs",),
    ("analysis",),
    ("sources",),
    ("stats",),
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the servetrace modules it imports anywhere in its body (not for typing)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("servetrace") and target != name:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LEVEL) else ""


def test_no_import_cycle() -> None:
    assert _cycles(_imports(_modules())) == []


def test_the_finder_sees_a_cycle_hidden_in_a_function() -> None:
    graph = {"servetrace.a": {"servetrace.b"}, "servetrace.b": {"servetrace.a"}}
    assert _cycles(graph) == [["servetrace.a", "servetrace.b"]]


@pytest.mark.slow
def test_no_package_imports_one_above_it() -> None:
    upward = []
    for source, targets in _imports(_modules()).items():
        here = _package(source)
        for target in targets:
            there = _package(target)
            if here in LEVEL and there in LEVEL and LEVEL[there] < LEVEL[here]:
                upward.append(f"{source} → {target}")
    assert upward == []
