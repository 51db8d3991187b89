"""The harness's layout (issue 24, point 7): one module per phase, no import circle, no module
over MAX_LINES lines without its reason written here."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

LOAD = Path(__file__).resolve().parents[1]
MAX_LINES = 400
# A module allowed past MAX_LINES, with the reason (none is, today).
LONGER: dict[str, str] = {}
# The phases of `make load`, one module (or package) each, each with its `run`.
PHASES = ("scale", "replica_loss", "db_restart", "soak", "churn", "failover", "bad_day")


def _modules() -> dict[str, Path]:
    """Return every module of the harness (its tests left out) by dotted name."""
    found = {}
    for path in sorted(LOAD.rglob("*.py")):
        relative = path.relative_to(LOAD.parent)
        if "tests" in relative.parts:
            continue
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Return the harness modules `name` imports anywhere in its text (TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {target for target in targets if target in MODULES and target != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return one path per circle found by a depth-first walk (empty: none)."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_finds_a_circle_and_only_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_load_module_imports_itself_back() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert graph["load.run"] >= {f"load.{phase}" for phase in PHASES}  # the parser sees them
    assert _cycles(graph) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_load_module_imports(name: str) -> None:
    assert importlib.import_module(name).__name__ == name


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_load_module_is_longer_than_the_limit_without_a_reason(name: str) -> None:
    lines = len(MODULES[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES or name in LONGER, f"{name}: {lines} lines"


@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_is_a_module_with_its_run(phase: str) -> None:
    assert callable(importlib.import_module(f"load.{phase}").run)
