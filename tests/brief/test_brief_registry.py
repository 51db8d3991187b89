"""The registry and the declaration the model receives.

`tool_declarations()` is pinned whole, so a changed description or schema keyword fails
here; each bound the schema states is then tried against the runtime check, on both
sides. A third tool is one registry entry and inherits the order of checks; a name
registered twice is refused; the package imports nothing beyond the standard library.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import pytest

import ticket_tools
from brief_calls import call
from brief_table import ALPHA, ALPHA_NO_READ, T104, fail
from ticket_tools import Outcome, TicketStore, Tool, ToolRegistry, tool_declarations
from ticket_tools.arguments import Arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import failure, success
from ticket_tools.tickets import ticket_id_arg

INVALID, FORBIDDEN, NOT_FOUND = (
    fail(code) for code in ("invalid_arguments", "forbidden", "not_found")
)
OK_CLOSED = {"ok": True, "status": "closed"}
GET_104 = {"ok": True, "ticket": T104}
ID_SCHEMA = {"type": "string", "minLength": 7, "maxLength": 7, "pattern": "^TKT-[0-9]{3}$"}
DECLARATIONS = [
    {
        "name": "get_ticket",
        "description": (
            "Read one support ticket by its ID, such as TKT-104. Use it when the user names a "
            "ticket. Returns the ticket's id, title and status. Only tickets of the signed-in "
            "agent's organisation are visible: the organisation comes from the session and is "
            "never an argument. Fails with not_found when no such ticket is visible."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ticket_id": {
                    **ID_SCHEMA,
                    "description": (
                        "The ticket's ID: TKT- followed by exactly three digits, such as TKT-104."
                    ),
                },
            },
            "required": ["ticket_id"],
            "additionalProperties": False,
        },
    },
    {
        "name": "search_tickets",
        "description": (
            "List the support tickets of the signed-in agent's organisation, lowest ID first, "
            "one page at a time, optionally filtered by status and by text in the title. Use "
            'it for questions such as "which of my open tickets mention login?". Returns '
            "tickets (id, title, status) and next_cursor. When next_cursor is not null, more "
            "tickets match: call again with the same filters and cursor set to that "
            "next_cursor. When it is null, this is the last page. An empty list means nothing "
            "matches. The organisation comes from the session and is never an argument."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "status": {
                    "type": "string",
                    "description": "Only tickets with this status. Omit to include both.",
                    "enum": ["open", "closed"],
                },
                "query": {
                    "type": "string",
                    "description": (
                        "Only tickets whose title contains this text, ignoring case (the title "
                        "alone is searched; the text is used as given, spaces included). Omit "
                        "for no text filter."
                    ),
                    "minLength": 1,
                    "maxLength": 40,
                },
                "limit": {
                    "type": "integer",
                    "description": "How many tickets to return at most. Defaults to 5.",
                    "minimum": 1,
                    "maximum": 10,
                    "default": 5,
                },
                "cursor": {
                    **ID_SCHEMA,
                    "description": (
                        "Omit for the first page. For the next page, pass the next_cursor "
                        "returned by the previous page. Returns tickets with an ID greater "
                        "than this one."
                    ),
                },
            },
            "required": [],
            "additionalProperties": False,
        },
    },
]


def test_the_declarations_the_model_receives() -> None:
    assert tool_declarations() == DECLARATIONS


# Every argument's schema as pinned above: (tool, argument, schema).
PROPERTIES = [
    (declaration["name"], key, schema)
    for declaration in DECLARATIONS
    for key, schema in declaration["parameters"]["properties"].items()  # type: ignore[index]
]


def sides_of_each_bound(schema: dict[str, object]) -> dict[object, str]:
    """Return values on both sides of each bound `schema` states, each "valid" or "invalid"."""
    if "enum" in schema:
        values = cast("list[str]", schema["enum"])
        return {**dict.fromkeys(values, "valid"), "pending": "invalid", "Open": "invalid"}
    if "pattern" in schema:
        return {
            "TKT-104": "valid",
            "TKT-1040": "invalid",
            "TKT-10": "invalid",
            "tkt-104": "invalid",
        }
    if schema["type"] == "string":
        low, high = cast(int, schema["minLength"]), cast(int, schema["maxLength"])
        return {
            "a" * (low - 1): "invalid",
            "a" * low: "valid",
            "a" * high: "valid",
            "a" * (high + 1): "invalid",
        }
    low, high = cast(int, schema["minimum"]), cast(int, schema["maximum"])
    return {low - 1: "invalid", low: "valid", high: "valid", high + 1: "invalid"}


@pytest.mark.parametrize(
    ("name", "key", "schema"), PROPERTIES, ids=[f"{n}-{k}" for n, k, _ in PROPERTIES]
)
def test_each_bound_the_schema_states_is_where_the_check_changes_its_answer(
    name: str, key: str, schema: dict[str, object]
) -> None:
    base = {"ticket_id": "TKT-104"} if name == "get_ticket" else {}
    expected = sides_of_each_bound(schema)
    answers = {value: call(name, {**base, key: value}, ALPHA) for value in expected}
    invalid = fail("invalid_arguments")
    assert {v: "invalid" if a == invalid else "valid" for v, a in answers.items()} == expected


def _ticket_status(args: Arguments, tenant: str, store: TicketStore) -> Outcome:
    ticket = store.get(tenant, str(args["ticket_id"]))
    if ticket is None:
        return failure("not_found", "no ticket with that ID is visible in this session")
    return success(status=ticket["status"])


# The third tool: its declaration and handler, one registry entry, nothing else touched.
TICKET_STATUS = Tool(
    "ticket_status",
    "Read only the status of one ticket, by its ID.",
    (ticket_id_arg("ticket_id", "The ticket's ID.", required=True),),
    _ticket_status,
)


@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        pytest.param("ticket_status", {"ticket_id": "TKT-110"}, ALPHA, OK_CLOSED, id="own"),
        pytest.param("ticket_status", {"ticket_id": "TKT-103"}, ALPHA, NOT_FOUND, id="beta-103"),
        pytest.param("ticket_status", {"ticket_id": "TKT-1"}, ALPHA, INVALID, id="bad-id"),
        pytest.param(
            "ticket_status", {"ticket_id": "TKT-110", "tenant": "beta"}, ALPHA, INVALID, id="tenant"
        ),
        pytest.param(
            "ticket_status", {"ticket_id": "TKT-110"}, ALPHA_NO_READ, FORBIDDEN, id="forbidden"
        ),
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, GET_104, id="get-unchanged"),
    ],
)
def test_a_third_tool_is_one_entry_and_inherits_the_order_of_checks(
    name: str, args: object, context: Mapping[str, object], expected: dict[str, object]
) -> None:
    registry = ToolRegistry([*REGISTRY, TICKET_STATUS])
    assert call(name, args, context, registry=registry) == expected


def test_the_briefs_registry_does_not_know_the_third_tool() -> None:
    assert call("ticket_status", {"ticket_id": "TKT-110"}, ALPHA) == fail("unknown_tool")


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^tool 'get_ticket' is already registered$"):
        ToolRegistry([*REGISTRY, REGISTRY.get("get_ticket")])  # type: ignore[list-item]


def test_the_adapter_imports_only_the_standard_library() -> None:
    package = Path(ticket_tools.__file__).parent
    imported: set[str] = set()
    for path in [*package.glob("*.py"), *package.glob("tools/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(str(node.module).partition(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"ticket_tools"}
