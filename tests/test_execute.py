"""run_tool's safe detail: names the argument and the declared rule, never the value given.

execute_tool returns only the contract's {"ok": False, "code": ...}; the detail
beside it comes from the same `Arg` declaration the schema comes from.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from argument_edges import INJECTION_MARKER, edge_json_values, instruction_texts, invalid_values
from expected import ALPHA, ALPHA_NO_READ, INVALID, UNKNOWN_TOOL_DETAIL
from ticket_tools import Arg, Tool, execute_tool, fixture_records, run_tool
from ticket_tools.catalog import REGISTRY

TICKET_ID_RULE = "a ticket ID: TKT- followed by exactly three digits, such as TKT-104"

ARGUMENT_RULES = [
    pytest.param(tool, arg, id=f"{tool.name}.{arg.name}")
    for tool in REGISTRY
    for arg in tool.arguments
]


@pytest.mark.parametrize(
    ("name", "args", "detail"),
    [
        pytest.param(
            "get_ticket", None, "the arguments must be a JSON object", id="get-not-object"
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104", "tenant": "alpha"},
            "the only arguments accepted are: ticket_id",
            id="get-unknown-key",
        ),
        pytest.param("get_ticket", {}, f"ticket_id: required, {TICKET_ID_RULE}", id="get-missing"),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-104\n"}, f"ticket_id: {TICKET_ID_RULE}", id="get-id"
        ),
        pytest.param(
            "search_tickets", [], "the arguments must be a JSON object", id="search-not-object"
        ),
        pytest.param(
            "search_tickets",
            {"tenant": "alpha"},
            "the only arguments accepted are: status, query, limit, cursor",
            id="search-unknown-key",
        ),
        pytest.param(
            "search_tickets", {"status": "pending"}, 'status: one of "open", "closed"', id="status"
        ),
        pytest.param(
            "search_tickets", {"query": ""}, "query: a string of 1 to 40 characters", id="query"
        ),
        pytest.param(
            "search_tickets", {"limit": 11}, "limit: an integer from 1 to 10", id="limit-11"
        ),
        pytest.param(
            "search_tickets", {"cursor": "TKT-1"}, f"cursor: {TICKET_ID_RULE}", id="cursor"
        ),
    ],
)
def test_detail_names_the_argument_and_rule(name: str, args: object, detail: str) -> None:
    outcome = run_tool(name, args, ALPHA, fixture_records())
    assert (outcome.result, outcome.detail) == (INVALID, detail)
    assert execute_tool(name, args, ALPHA, fixture_records()) == INVALID


@pytest.mark.parametrize(
    ("name", "args", "context", "result", "detail"),
    [
        pytest.param(
            "list_tickets",
            {},
            ALPHA,
            {"ok": False, "code": "unknown_tool"},
            UNKNOWN_TOOL_DETAIL,
            id="unknown-tool",
        ),
        pytest.param(
            "search_tickets",
            {},
            ALPHA_NO_READ,
            {"ok": False, "code": "forbidden"},
            "this session may not read tickets",
            id="forbidden",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-999"},
            ALPHA,
            {"ok": False, "code": "not_found"},
            "no ticket with that ID is visible in this session",
            id="not-found",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104"},
            ALPHA,
            {"ok": True, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}},
            None,
            id="success-has-no-detail",
        ),
    ],
)
def test_detail_of_the_other_outcomes(
    name: str, args: object, context: dict[str, object], result: object, detail: str | None
) -> None:
    outcome = run_tool(name, args, context, fixture_records())
    assert (outcome.result, outcome.detail) == (result, detail)
    assert execute_tool(name, args, context, fixture_records()) == result


@pytest.mark.parametrize(("tool", "arg"), ARGUMENT_RULES)
def test_detail_is_phrased_from_the_declaration(tool: Tool, arg: Arg) -> None:
    # A value of the wrong JSON type breaks every rule; the detail is the Arg's own.
    args = {arg.name: [None]}
    outcome = run_tool(tool.name, args, ALPHA, fixture_records())
    assert (outcome.result, outcome.detail) == (INVALID, f"{arg.name}: {arg.rule}")


@pytest.mark.parametrize(("tool", "arg"), ARGUMENT_RULES)
@given(data=st.data())
def test_detail_never_depends_on_the_value(tool: Tool, arg: Arg, data: st.DataObject) -> None:
    value = data.draw(invalid_values(arg), label="value")
    outcome = run_tool(tool.name, {arg.name: value}, ALPHA, fixture_records())
    # One fixed sentence per rule: nothing of the value can be in it.
    assert (outcome.result, outcome.detail) == (INVALID, f"{arg.name}: {arg.rule}")
    assert execute_tool(tool.name, {arg.name: value}, ALPHA, fixture_records()) == INVALID
    assert INJECTION_MARKER not in str(outcome.detail)


@pytest.mark.parametrize("tool", list(REGISTRY), ids=lambda tool: tool.name)
@given(key=instruction_texts, value=edge_json_values)
def test_unknown_key_is_never_named(tool: Tool, key: str, value: object) -> None:
    outcome = run_tool(tool.name, {key: value}, ALPHA, fixture_records())
    allowed = ", ".join(arg.name for arg in tool.arguments)
    assert (outcome.result, outcome.detail) == (
        INVALID,
        f"the only arguments accepted are: {allowed}",
    )
    assert INJECTION_MARKER not in str(outcome.detail)


@given(name=instruction_texts, args=edge_json_values)
def test_unknown_tool_name_is_never_echoed(name: str, args: object) -> None:
    outcome = run_tool(name, args, ALPHA, fixture_records())
    assert (outcome.result, outcome.detail) == (
        {"ok": False, "code": "unknown_tool"},
        UNKNOWN_TOOL_DETAIL,
    )


# --- What the entry point accepts as arguments (issue 12, item 3) ---


class _SilentDict(dict[str, object]):
    """Iterates over nothing, so a key check that iterates sees no unknown key."""

    def __iter__(self) -> Iterator[str]:
        return iter(())


class _EqualsEverything(str):
    """Equal to every name, so `key not in names` is always False."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True


class _RaisingKey:
    """Raises from __eq__, as anything comparing it to a name would find out."""

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("compared")


NOT_AN_OBJECT = "the arguments must be a JSON object"


# The rule: arguments are exactly what JSON produces, a plain dict with plain str keys.
# Anything else is invalid_arguments, and no method of it is called.
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            _SilentDict({"ticket_id": "TKT-108", "tenant": "beta"}), id="dict-subclass-hides-keys"
        ),
        pytest.param(_SilentDict(), id="empty-dict-subclass"),
        pytest.param(
            {"ticket_id": "TKT-104", _EqualsEverything("tenant"): "beta"}, id="key-equals-all"
        ),
        pytest.param({_EqualsEverything("ticket_id"): "TKT-104"}, id="str-subclass-key"),
        pytest.param({"ticket_id": "TKT-104", _RaisingKey(): 1}, id="key-eq-raises"),
        pytest.param({"ticket_id": "TKT-104", 1: "x"}, id="int-key"),
        pytest.param({"ticket_id": "TKT-104", None: "x"}, id="none-key"),
        pytest.param({("ticket_id",): "TKT-104"}, id="tuple-key"),
        pytest.param(MappingProxyType({"ticket_id": "TKT-104"}), id="mapping-not-dict"),
        pytest.param(OrderedDict(ticket_id="TKT-104"), id="ordered-dict"),
    ],
)
def test_only_a_plain_dict_with_str_keys_is_an_arguments_object(args: object) -> None:
    outcome = run_tool("get_ticket", args, ALPHA, fixture_records())
    assert (outcome.result, outcome.detail) == (INVALID, NOT_AN_OBJECT)
    assert execute_tool("get_ticket", args, ALPHA, fixture_records()) == INVALID


def test_a_plain_dict_with_str_keys_is_accepted() -> None:
    args = json.loads('{"ticket_id": "TKT-104"}')
    assert execute_tool("get_ticket", args, ALPHA, fixture_records()) == {
        "ok": True,
        "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"},
    }
