"""The declarations the model receives: shape, order, wording, a schema that matches the code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from conftest import StoreFactory
from strategies import tool_args
from ticket_tools import execute_tool, fixture_records, tool_declarations
from ticket_tools.catalog import REGISTRY
from ticket_tools.exports import FORMATS, export_declarations

ALPHA = {"tenant": "alpha", "can_read_tickets": True}
TICKET_ID_SCHEMA = {"type": "string", "minLength": 7, "maxLength": 7, "pattern": "^TKT-[0-9]{3}$"}


def declaration(name: str) -> dict[str, object]:
    (found,) = (d for d in tool_declarations() if d["name"] == name)
    return found


def parameters(name: str) -> Mapping[str, object]:
    return cast("Mapping[str, object]", declaration(name)["parameters"])


def without_descriptions(schema: object) -> object:
    assert isinstance(schema, dict)
    return {
        **schema,
        "properties": {
            name: {k: v for k, v in prop.items() if k != "description"}
            for name, prop in schema["properties"].items()
        },
    }


def test_one_declaration_per_tool_in_registry_order() -> None:
    declarations = tool_declarations()
    assert [d["name"] for d in declarations] == [tool.name for tool in REGISTRY]
    assert [d["name"] for d in declarations] == ["get_ticket", "search_tickets"]
    assert [sorted(d) for d in declarations] == [["description", "name", "parameters"]] * 2


def test_get_ticket_parameters() -> None:
    assert without_descriptions(declaration("get_ticket")["parameters"]) == {
        "type": "object",
        "properties": {"ticket_id": TICKET_ID_SCHEMA},
        "required": ["ticket_id"],
        "additionalProperties": False,
    }


def test_search_tickets_parameters() -> None:
    assert without_descriptions(declaration("search_tickets")["parameters"]) == {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["open", "closed"]},
            "query": {"type": "string", "minLength": 1, "maxLength": 40},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            "cursor": TICKET_ID_SCHEMA,
        },
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("name", "phrases"),
    [
        pytest.param(
            "search_tickets",
            ("next_cursor", "cursor", "is never an argument", "same filters", "null"),
            id="search_tickets",
        ),
        pytest.param("get_ticket", ("TKT-104", "is never an argument", "not_found"), id="get"),
    ],
)
def test_descriptions_tell_the_model_how_to_call(name: str, phrases: tuple[str, ...]) -> None:
    description = declaration(name)["description"]
    assert isinstance(description, str)
    assert [phrase for phrase in phrases if phrase not in description] == []


def test_cursor_description_says_where_it_comes_from() -> None:
    parameters = declaration("search_tickets")["parameters"]
    assert isinstance(parameters, dict)
    assert "next_cursor" in parameters["properties"]["cursor"]["description"]


def test_every_property_has_a_description() -> None:
    for d in tool_declarations():
        parameters = d["parameters"]
        assert isinstance(parameters, dict)
        assert [p for p, s in parameters["properties"].items() if not s.get("description")] == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_schema_is_valid_draft_2020_12(fmt: str) -> None:
    key = "parameters" if fmt == "json-schema" else "inputSchema"
    for d in export_declarations(fmt):  # type: ignore[arg-type]
        Draft202012Validator.check_schema(cast("Mapping[str, object]", d[key]))


def test_json_schema_export_is_tool_declarations() -> None:
    assert export_declarations("json-schema") == tool_declarations()


def test_mcp_export_shape() -> None:
    assert export_declarations("mcp") == [
        {
            "name": d["name"],
            "description": d["description"],
            "inputSchema": d["parameters"],
            "annotations": {
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        }
        for d in tool_declarations()
    ]


def test_declarations_are_fresh_each_call() -> None:
    first = tool_declarations()
    first[0]["name"] = "changed"
    assert tool_declarations()[0]["name"] == "get_ticket"


@given(name=st.sampled_from(("get_ticket", "search_tickets")), args=tool_args())
def test_schema_accepts_exactly_what_the_code_accepts(
    make_store: StoreFactory, name: str, args: object
) -> None:
    # The schema the model reads and the runtime check come from one declaration.
    schema = parameters(name)
    result = execute_tool(name, args, ALPHA, make_store(fixture_records()))
    schema_valid = Draft202012Validator(schema).is_valid(args)
    assert schema_valid == (result != {"ok": False, "code": "invalid_arguments"})


@pytest.mark.parametrize(
    ("name", "args", "valid"),
    [
        pytest.param("search_tickets", {"limit": 5.0}, True, id="limit-5.0"),
        pytest.param("search_tickets", {"limit": 1.5}, False, id="limit-1.5"),
        pytest.param("search_tickets", {"limit": True}, False, id="limit-true"),
        pytest.param("search_tickets", {"query": "😀" * 40}, True, id="query-40-emoji"),
        pytest.param("search_tickets", {"query": "😀" * 41}, False, id="query-41-emoji"),
        pytest.param("search_tickets", {"cursor": "TKT-104\n"}, False, id="cursor-newline"),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-\u0661\u0660\u0664"}, False, id="arabic-digits"
        ),
        pytest.param("search_tickets", {"tenant": "alpha"}, False, id="tenant"),
        pytest.param("search_tickets", {"status": None}, False, id="null"),
    ],
)
def test_schema_and_code_agree_on_the_traps(
    make_store: StoreFactory, name: str, args: dict[str, object], valid: bool
) -> None:
    schema = parameters(name)
    result = execute_tool(name, args, ALPHA, make_store(fixture_records()))
    code_valid = result != {"ok": False, "code": "invalid_arguments"}
    assert (Draft202012Validator(schema).is_valid(args), code_valid) == (valid, valid)
