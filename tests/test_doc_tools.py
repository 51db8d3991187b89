"""docs/mcp.md's tools list names every registered tool, in order, with its declared arguments."""

from __future__ import annotations

import re
from pathlib import Path

from ticket_tools.catalog import REGISTRY

MCP_DOC = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"


def listed_tools(page: str) -> list[tuple[str, list[str]]]:
    """Return each row of the "The tools" table: the tool's name and the arguments it names."""
    section = page.split("\n## The tools\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = []
    for row in rows:
        name, arguments = row.split(" | ")[:2]
        # An argument is a code span at the start of the cell or after ", ".
        named = re.findall(r"(?:^|, )`([a-z_]+)`", arguments)
        listed.append((name.removeprefix("| `").removesuffix("`"), named))
    return listed


def test_the_tools_list_is_the_registry() -> None:
    assert listed_tools(MCP_DOC.read_text(encoding="utf-8")) == [
        (tool.name, [arg.name for arg in tool.arguments]) for tool in REGISTRY
    ]


def test_a_tool_missing_from_the_list_is_found() -> None:
    page = "\n## The tools\n\n| Tool | Arguments | Returns |\n|---|---|---|\n"
    page += '| `one` | `a` (required), `b` (`"x"`) | r |\n\n## Next\n| `not` | `this` | r |\n'
    assert listed_tools(page) == [("one", ["a", "b"])]
