"""The declarations the model receives: shape, order, wording, a schema that matches the code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import pytest

from expected import TOOL_NAMES
from ticket_tools import tool_declarations
from ticket_tools.catalog import REGISTRY

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
    assert [d["name"] for d in declarations] == list(TOOL_NAMES)
    assert [sorted(d) for d in declarations] == [["description", "name", "parameters"]] * len(
        TOOL_NAMES
    )


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


def test_declarations_are_fresh_each_call() -> None:
    first = tool_declarations()
    first[0]["name"] = "changed"
    assert tool_declarations()[0]["name"] == "get_ticket"
