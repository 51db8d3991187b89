"""The catalog: one registry per ID width, the brief's built at import and left as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from jsonschema import Draft202012Validator

from argument_edges import argument_objects
from ticket_tools import (
    ArgError,
    Records,
    TicketStore,
    Tool,
    fixture_records,
    run_tool,
)
from ticket_tools.arguments import parse_arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.declarations.exports import (
    FORMATS,
    ExportFormat,
    declaration_schema,
    export_declarations,
)
from ticket_tools.declarations.widths import make_registry
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.sqlite.store import SQLiteStore
from tool_cases import ID_ARGUMENTS, valid_arguments
from wide_ids import SIX, widened

GOLDEN = Path(__file__).parent / "golden"
ALPHA = {"tenant": "alpha", "can_read_tickets": True}
SIX_DIGIT_RULE = "a ticket ID: TKT- followed by exactly six digits, such as TKT-000104"
STORES: dict[str, Callable[[Records], Records | TicketStore]] = {
    "dict": lambda records: records,
    "sqlite": lambda records: SQLiteStore.from_records(records, id_format=SIX),
}


def test_the_default_registry_is_the_briefs_tool_for_tool() -> None:
    assert list(make_registry()) == list(REGISTRY)
    assert list(make_registry(IdFormat(3))) == list(REGISTRY)


@pytest.mark.parametrize("fmt", FORMATS)
def test_three_digits_export_byte_for_byte_as_the_golden_file(fmt: ExportFormat) -> None:
    rendered = json.dumps(
        export_declarations(fmt, make_registry(IdFormat(3))), indent=2, ensure_ascii=False
    )
    assert rendered + "\n" == (GOLDEN / f"{fmt}.json").read_text(encoding="utf-8")


def test_the_six_digit_get_ticket_declaration() -> None:
    get_ticket = export_declarations("json-schema", make_registry(SIX))[0]
    assert get_ticket == {
        "name": "get_ticket",
        "description": (
            "Read one support ticket by its ID, such as TKT-000104. Use it when the user names "
            "a ticket. Returns the ticket's id, title and status. Only tickets of the signed-in "
            "agent's organisation are visible: the organisation comes from the session and is "
            "never an argument. Fails with not_found when no such ticket is visible."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ticket_id": {
                    "type": "string",
                    "description": (
                        "The ticket's ID: TKT- followed by exactly six digits, such as TKT-000104."
                    ),
                    "minLength": 10,
                    "maxLength": 10,
                    "pattern": "^TKT-[0-9]{6}$",
                }
            },
            "required": ["ticket_id"],
            "additionalProperties": False,
        },
    }


def test_the_six_digit_search_declaration_differs_in_the_cursor_only() -> None:
    three = json.dumps(export_declarations("json-schema")[1])
    bounds = '"minLength": {0}, "maxLength": {0}, "pattern": "^TKT-[0-9]{{{1}}}$"'
    assert three.count(bounds.format(7, 3)) == 1
    expected = json.loads(three.replace(bounds.format(7, 3), bounds.format(10, 6)))
    assert export_declarations("json-schema", make_registry(SIX))[1] == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_declares_six_digits(fmt: ExportFormat) -> None:
    declarations = export_declarations(fmt, make_registry(SIX))
    properties = {}
    for tool, declaration in zip(make_registry(SIX), declarations, strict=True):
        schema = declaration_schema(fmt, declaration)
        validator = Draft202012Validator(schema)
        for argument in ID_ARGUMENTS[tool.name]:
            id_schema = schema["properties"][argument]  # type: ignore[index]
            properties[tool.name, argument] = {
                key: id_schema[key] for key in ("minLength", "maxLength", "pattern")
            }
            verdicts = [
                validator.is_valid({**valid_arguments(tool, SIX), argument: value})
                for value in ("TKT-000104", "TKT-104", "TKT-000104\n", "TKT-0001040")
            ]
            assert verdicts == [True, False, False, False]
    six = {"minLength": 10, "maxLength": 10, "pattern": "^TKT-[0-9]{6}$"}
    brief_ids = [
        (name, argument) for name, arguments in ID_ARGUMENTS.items() for argument in arguments
    ]
    assert brief_ids[:2] == [("get_ticket", "ticket_id"), ("search_tickets", "cursor")]
    assert properties == dict.fromkeys(brief_ids, six)


@pytest.mark.parametrize("tool", list(make_registry(SIX)), ids=lambda tool: tool.name)
def test_six_digit_schemas_accept_exactly_what_the_parser_accepts(tool: Tool) -> None:
    index = [registered.name for registered in make_registry(SIX)].index(tool.name)
    validators = [
        Draft202012Validator(
            declaration_schema(fmt, export_declarations(fmt, make_registry(SIX))[index])
        )
        for fmt in FORMATS
    ]

    @given(argument_objects(tool.arguments))
    def check(args: object) -> None:
        expected = not isinstance(parse_arguments(tool.arguments, args), ArgError)
        assert [validator.is_valid(args) for validator in validators] == [expected] * len(FORMATS)

    check()


@pytest.mark.parametrize("kind", sorted(STORES))
def test_six_digit_calls_get_and_walk_as_the_brief_does(kind: str) -> None:
    registry = make_registry(SIX)
    store = STORES[kind](widened(SIX))

    def call(name: str, args: object) -> dict[str, object]:
        return run_tool(name, args, ALPHA, store, registry=registry).result

    assert call("get_ticket", {"ticket_id": "TKT-000104"}) == {
        "ok": True,
        "ticket": {"id": "TKT-000104", "title": "Settings crash", "status": "open"},
    }
    walk, cursor = [], None
    while True:
        args: dict[str, object] = {"limit": 3} if cursor is None else {"limit": 3, "cursor": cursor}
        page = call("search_tickets", args)
        walk.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    brief = fixture_records()
    # The brief's walk, every id widened: the same pages, the same cursors.
    expected, cursor = [], None
    while True:
        args = {"limit": 3} if cursor is None else {"limit": 3, "cursor": cursor}
        page = run_tool("search_tickets", args, ALPHA, brief).result
        expected.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert json.dumps(walk) == json.dumps(expected).replace('"TKT-', '"TKT-000')


@pytest.mark.parametrize(
    ("name", "args"),
    [
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, id="get-three-digits"),
        pytest.param("get_ticket", {"ticket_id": "TKT-0001040"}, id="get-seven-digits"),
        pytest.param("search_tickets", {"cursor": "TKT-104"}, id="cursor-three-digits"),
    ],
)
def test_a_six_digit_deployment_refuses_another_width(name: str, args: object) -> None:
    (argument,) = ID_ARGUMENTS[name]
    outcome = run_tool(name, args, ALPHA, widened(SIX), registry=make_registry(SIX))
    assert (outcome.result, outcome.detail) == (
        {"ok": False, "code": "invalid_arguments"},
        f"{argument}: {SIX_DIGIT_RULE}",
    )
