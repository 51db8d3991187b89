"""No test spells out the registered tools: "each tool" comes from the registry or the golden file.

The rule, read from each test module's syntax tree: no list, tuple or set literal, and no
dict literal's keys, holds two or more registered tool names as strings, and no string
holds two of them (a joined list such as "get_ticket, search_tickets"). A call that names
one tool (the brief's acceptance table, one `pytest.param` per case) is not a list of the
tools. A new tool then changes the golden files and no test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ticket_tools.catalog import REGISTRY

NAMES = frozenset(tool.name for tool in REGISTRY)
TESTS = Path(__file__).parent
# This module is the one that must spell names: its table is the rule's own test.
MODULES = sorted(path for path in TESTS.rglob("*.py") if path != Path(__file__))


def tool_lists(source: str) -> list[int]:
    """Return the line of each literal in `source` that spells two or more tool names."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Constant) and type(node.value) is str:
            if sum(name in node.value for name in NAMES) >= 2:
                lines.append(node.lineno)
            continue
        else:
            continue
        named = [e.value for e in elements if isinstance(e, ast.Constant) and e.value in NAMES]
        if len(named) >= 2:
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize(
    ("source", "lines"),
    [
        pytest.param('x = ["get_ticket", "search_tickets"]', [1], id="list"),
        pytest.param('x = ("search_tickets", 1, "get_ticket")', [1], id="tuple"),
        pytest.param('x = {"get_ticket", "search_tickets"}', [1], id="set"),
        pytest.param('x = {"get_ticket": 1,\n "search_tickets": 2}', [1], id="dict-keys"),
        pytest.param('x = "get_ticket, search_tickets"', [1], id="joined"),
        pytest.param('x = [("get_ticket", {}), ("search_tickets", {})]', [], id="one-per-call"),
        pytest.param('call("get_ticket", {"ticket_id": "TKT-104"})', [], id="single-call"),
        pytest.param('x = ["get_ticket", "get_tickets"]', [], id="one-name"),
    ],
)
def test_the_rule(source: str, lines: list[int]) -> None:
    assert tool_lists(source) == lines


def test_the_rule_knows_at_least_the_briefs_two_tools() -> None:
    assert {"get_ticket", "search_tickets"} <= NAMES


def test_no_test_module_lists_the_tools() -> None:
    found = {
        str(path.relative_to(TESTS)): tool_lists(path.read_text(encoding="utf-8"))
        for path in MODULES
    }
    assert {path: lines for path, lines in found.items() if lines} == {}
