"""What the brief says the fixture store's tickets look like from outside: id, title, status.

The tickets and contexts are written once, by hand, in the brief suite's
`tests/brief/brief_table.py` (on sys.path through pytest's `pythonpath`); this module
re-exports them for the multi-store suites and adds what only those need.
"""

from __future__ import annotations

import json
from pathlib import Path

from brief_table import (
    ALPHA,
    ALPHA_NO_READ,
    ALPHA_TICKETS,
    BETA,
    BETA_T103,
    BETA_T104,
    BETA_T108,
    T101,
    T102,
    T104,
    T107,
    T110,
    T112,
    T115,
    fail,
)

# The brief's four failure results, whole.
INVALID = fail("invalid_arguments")
FORBIDDEN = fail("forbidden")
NOT_FOUND = fail("not_found")
UNKNOWN = fail("unknown_tool")

__all__ = [
    "ALPHA",
    "ALPHA_NO_READ",
    "ALPHA_TICKETS",
    "BETA",
    "BETA_T103",
    "BETA_T104",
    "BETA_T108",
    "FORBIDDEN",
    "INVALID",
    "NOT_FOUND",
    "T101",
    "T102",
    "T104",
    "T107",
    "T110",
    "T112",
    "T115",
    "TOOL_NAMES",
    "UNKNOWN",
    "UNKNOWN_TOOL_DETAIL",
]

# The registered tools, in order, as the golden declarations pin them: the one place a
# test may list them, so a new tool changes the golden files and nothing else.
_GOLDEN_DECLARATIONS = Path(__file__).parent / "golden" / "json-schema.json"
TOOL_NAMES: tuple[str, ...] = tuple(
    declaration["name"]
    for declaration in json.loads(_GOLDEN_DECLARATIONS.read_text(encoding="utf-8"))
)
UNKNOWN_TOOL_DETAIL = "unknown tool; the tools are: " + ", ".join(TOOL_NAMES)
