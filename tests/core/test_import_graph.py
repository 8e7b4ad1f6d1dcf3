"""The shape of the package, checked from the source: no import cycles, no edge against the layering.

The graph is built with `ast` from every module under ``exporters/ranklog`` — imports inside
functions included (a lazy import that closes a cycle is still a cycle), imports under
``if TYPE_CHECKING:`` left out of the cycle check (they never run) but held to the layering rules.
Nodes are modules; ``from . import x`` counts as an edge to the submodule ``x`` when one exists.

The layering (docs/design.md, "Architecture"):

- the floor (:data:`FLOOR`: record, the archive layout, file identity, conform, …) imports nothing of
  ranklog outside the floor, and ``record`` imports nothing of ranklog at all;
- ``parse`` imports only the floor (and itself);
- the agent and the archive never import each other; query and triage never import the agent;
- ``log`` (the in-process library) imports only itself and the floor, and everything it loads at
  import time is standard library — no third-party package.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "exporters" / "ranklog"

FLOOR = frozenset({
    "ranklog.record", "ranklog.errors", "ranklog.units", "ranklog.archive_layout", "ranklog.file_identity",
    "ranklog.conform", "ranklog.text_index", "ranklog.signatures", "ranklog.config_loader", "ranklog.object_store",
    "ranklog.alert_notifications", "ranklog.step_durations", "ranklog.source_identity",
})
# (importer package, imported package): never allowed.
FORBIDDEN = (
    ("ranklog.agent", "ranklog.archive"),
    ("ranklog.archive", "ranklog.agent"),
    ("ranklog.query", "ranklog.agent"),
    ("ranklog.triage", "ranklog.agent"),
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function
    type_only: bool  # under `if TYPE_CHECKING:`


def module_names(root: Path) -> dict[str, Path]:
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _function_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def build_graph(root: Path) -> tuple[dict[str, Path], list[Edge], dict[str, set[str]]]:
    """(modules, edges between them, third-party/stdlib top-level names each module imports at load time)."""
    modules = module_names(root)
    top = root.name
    edges: list[Edge] = []
    external: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        type_only, in_function = _type_checking_lines(tree), _function_lines(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
                           for alias in node.names]
            else:
                continue
            lazy, typed = node.lineno in in_function, node.lineno in type_only
            for target in dict.fromkeys(targets):
                if target == top or target.startswith(top + "."):
                    while target not in modules:  # `import ranklog.x.y` of a name inside a module
                        target = target.rpartition(".")[0]
                    if target != name:
                        edges.append(Edge(name, target, node.lineno, lazy, typed))
                elif not lazy and not typed:
                    external[name].add(target.split(".")[0])
    return modules, edges, external


def find_cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        if not edge.type_only:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layering_violations(edges: list[Edge], external: dict[str, set[str]]) -> list[str]:
    found = []
    for edge in edges:
        where = f"{edge.source} imports {edge.target} (line {edge.line})"
        if edge.source == "ranklog.record":
            found.append(f"record imports nothing of ranklog: {where}")
        if edge.source in FLOOR and edge.target not in FLOOR:
            found.append(f"the floor imports only the floor: {where}")
        if _within(edge.source, "ranklog.parse") and not (
                _within(edge.target, "ranklog.parse") or edge.target in FLOOR):
            found.append(f"parse imports only the floor: {where}")
        if _within(edge.source, "ranklog.log") and not (_within(edge.target, "ranklog.log") or edge.target in FLOOR):
            found.append(f"log imports only itself and the floor: {where}")
        for importer, imported in FORBIDDEN:
            if _within(edge.source, importer) and _within(edge.target, imported):
                found.append(f"{importer} never imports {imported}: {where}")
    # Everything `import ranklog.log` loads must be standard library.
    loaded = {"ranklog.log"}
    todo = ["ranklog.log"]
    while todo:
        module = todo.pop()
        for edge in edges:
            if edge.source == module and not edge.lazy and not edge.type_only and edge.target not in loaded:
                loaded.add(edge.target)
                todo.append(edge.target)
    for module in sorted(loaded | {m for m in external if _within(m, "ranklog.log")}):
        third_party = sorted(name for name in external.get(module, ()) if name not in sys.stdlib_module_names)
        if third_party:
            found.append(f"log stays stdlib-only: {module} imports {', '.join(third_party)} at load time")
    return found


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], list[Edge], dict[str, set[str]]]:
    return build_graph(PACKAGE)


def test_the_graph_sees_the_package(graph):
    modules, edges, _ = graph
    assert {"ranklog.record", "ranklog.parse.registry", "ranklog.agent.runner", "ranklog.query.engine"} <= set(modules)
    assert any(e.source == "ranklog.agent.tracked_file" and e.target == "ranklog.parse" for e in edges)
    assert any(e.lazy for e in edges) and any(e.type_only for e in edges)


def test_no_import_cycles(graph):
    _, edges, _ = graph
    assert find_cycles(edges) == []


def test_no_import_against_the_layering(graph):
    _, edges, external = graph
    assert layering_violations(edges, external) == []


def test_every_floor_module_exists(graph):
    modules, _, _ = graph
    assert set(modules) >= FLOOR


def test_the_checks_catch_a_planted_cycle_and_forbidden_edges(tmp_path):
    """The rules above are only worth something if they fail: plant each kind of breach in a copy."""
    root = tmp_path / "ranklog"
    for package in ("", "agent", "archive", "parse", "log", "query"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    (root / "record.py").write_text("from .agent import runner\n")
    (root / "agent" / "runner.py").write_text("from ..archive import app\n")
    (root / "archive" / "app.py").write_text("def later():\n    from ..agent import runner\n")
    (root / "parse" / "fmt.py").write_text("from ranklog.query import engine\n")
    (root / "query" / "engine.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from ..agent.runner import Agent\n")
    (root / "log" / "__init__.py").write_text("import numpy\n")
    _, edges, external = build_graph(root)
    assert find_cycles(edges) == [["ranklog.agent.runner", "ranklog.archive.app"]]
    problems = "\n".join(layering_violations(edges, external))
    for expected in ("record imports nothing of ranklog", "the floor imports only the floor",
                     "ranklog.agent never imports ranklog.archive", "ranklog.archive never imports ranklog.agent",
                     "parse imports only the floor", "ranklog.query never imports ranklog.agent",
                     "log stays stdlib-only: ranklog.log imports numpy"):
        assert expected in problems
