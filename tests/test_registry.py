"""The registry: exact-name lookup, one shared order of checks, a third tool in one entry."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from expected import ALPHA, FORBIDDEN, INVALID, TOOL_NAMES, UNKNOWN
from store_cases import EVERY
from ticket_tools import (
    Arg,
    Outcome,
    TicketStore,
    Tool,
    ToolRegistry,
    execute_tool,
    fixture_records,
    run_tool,
    tool_declarations,
)
from ticket_tools.arguments import Arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.filters import STATUS_ARG, filter_from
from ticket_tools.outcome import success
from tool_cases import valid_arguments

ALPHA_104 = {"ok": True, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("Get_Ticket", id="case"),
        pytest.param("GET_TICKET", id="upper"),
        pytest.param(" get_ticket", id="leading-space"),
        pytest.param("get_ticket\n", id="trailing-newline"),
        pytest.param("get_ticket\x00", id="nul"),
        pytest.param("", id="empty"),
        pytest.param("list_tickets", id="unregistered"),
        pytest.param("__class__", id="dunder-class"),
        pytest.param("__getitem__", id="dunder-getitem"),
        pytest.param("keys", id="dict-method-keys"),
        pytest.param("get", id="dict-method-get"),
        pytest.param("constructor", id="js-prototype"),
        pytest.param(None, id="none"),
        pytest.param(1, id="int"),
        pytest.param(True, id="bool"),
        pytest.param(b"get_ticket", id="bytes"),
        pytest.param(["get_ticket"], id="list"),
        pytest.param({"name": "get_ticket"}, id="dict"),
        pytest.param(("get_ticket",), id="tuple"),
    ],
)
def test_only_an_exact_registered_name_is_a_tool(name: object) -> None:
    assert REGISTRY.get(name) is None
    assert execute_tool(name, {"ticket_id": "TKT-104"}, ALPHA, fixture_records()) == UNKNOWN


def test_a_str_subclass_is_not_looked_up() -> None:
    class Sneaky(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            return True

    assert REGISTRY.get(Sneaky("anything")) is None


def test_registry_order_is_the_declaration_order() -> None:
    assert [tool.name for tool in REGISTRY] == list(TOOL_NAMES)


def test_registering_a_name_twice_raises() -> None:
    registry = ToolRegistry()
    tool = REGISTRY.get("get_ticket")
    assert tool is not None
    registry.add(tool)
    with pytest.raises(ValueError, match=r"^tool 'get_ticket' is already registered$"):
        registry.add(tool)
    with pytest.raises(ValueError, match=r"^tool 'get_ticket' is already registered$"):
        ToolRegistry([tool, tool])


# A name no real tool will take, so the demo never collides with one that is added.
DEMO_NAME = "demo_count_tool_for_tests"


def _count(args: Arguments, tenant: str, store: TicketStore) -> Outcome:
    found = store.find(tenant, filter_from(args), limit=EVERY)
    return success(count=len(found))


DEMO_TOOL = Tool(
    name=DEMO_NAME,
    description="Count the organisation's tickets, optionally of one status.",
    arguments=(STATUS_ARG,),
    handler=_count,
)


def test_a_third_tool_is_one_registry_entry() -> None:
    registry = ToolRegistry([*REGISTRY, DEMO_TOOL])
    records = fixture_records()

    def call(name: str, args: object, context: Mapping[str, object] = ALPHA) -> object:
        return run_tool(name, args, context, records, registry=registry).result

    assert call(DEMO_NAME, {}) == {"ok": True, "count": 7}
    assert call(DEMO_NAME, {"status": "closed"}) == {"ok": True, "count": 3}
    # The shared checks hold for it without a line of its own.
    assert call(DEMO_NAME, {"tenant": "beta"}) == INVALID
    assert call(DEMO_NAME, {"status": None}) == INVALID
    assert call(DEMO_NAME, {}, {"tenant": "alpha", "can_read_tickets": False}) == FORBIDDEN
    # The other tools are unchanged, and the shared registry does not know it.
    assert call("get_ticket", {"ticket_id": "TKT-104"}) == ALPHA_104
    assert execute_tool(DEMO_NAME, {}, ALPHA, records) == UNKNOWN
    names = [d["name"] for d in tool_declarations(registry)]
    assert names == [*TOOL_NAMES, DEMO_NAME]


class RecordingHandler:
    """A handler that records whether it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[Mapping[str, object], str]] = []

    def __call__(self, args: Arguments, tenant: str, store: TicketStore) -> Outcome:
        self.calls.append((dict(args), tenant))
        return success(ran=True)


@pytest.mark.parametrize(
    ("name", "args", "context", "expected", "handler_ran"),
    [
        pytest.param(
            "probe",
            {"n": 1},
            ALPHA,
            Outcome({"ok": True, "ran": True}, None),
            True,
            id="handler-last",
        ),
        pytest.param(
            "nope",
            None,
            {"can_read_tickets": False},
            Outcome(UNKNOWN, "unknown tool; the tools are: probe"),
            False,
            id="unknown_tool-first",
        ),
        pytest.param(
            "probe",
            None,
            {"can_read_tickets": False},
            Outcome(INVALID, "the arguments must be a JSON object"),
            False,
            id="invalid-object-before-forbidden",
        ),
        pytest.param(
            "probe",
            {"n": 0},
            {"can_read_tickets": False},
            Outcome(INVALID, "n: an integer from 1 to 3"),
            False,
            id="invalid-value-before-forbidden",
        ),
        pytest.param(
            "probe",
            {"n": 1},
            {"tenant": "alpha", "can_read_tickets": False},
            Outcome(FORBIDDEN, "this session may not read tickets"),
            False,
            id="forbidden-before-handler",
        ),
    ],
)
def test_shared_order_of_checks(
    name: str,
    args: object,
    context: Mapping[str, object],
    expected: Outcome,
    handler_ran: bool,
) -> None:
    handler = RecordingHandler()
    probe = Tool("probe", "A probe.", (Arg("n", "integer", "", minimum=1, maximum=3),), handler)
    outcome = run_tool(name, args, context, {}, registry=ToolRegistry([probe]))
    assert outcome == expected
    assert handler.calls == ([({"n": 1}, "alpha")] if handler_ran else [])


@pytest.mark.parametrize(
    "context",
    [
        pytest.param({"tenant": "alpha", "can_read_tickets": False}, id="false"),
        pytest.param({"tenant": "alpha", "can_read_tickets": 1}, id="one"),
        pytest.param({"tenant": "alpha", "can_read_tickets": "true"}, id="string-true"),
        pytest.param({"tenant": "alpha", "can_read_tickets": None}, id="none"),
        pytest.param({"tenant": "alpha", "can_read_tickets": [True]}, id="list"),
        pytest.param({"tenant": "alpha"}, id="missing"),
        pytest.param({"tenant": "alpha", "canReadTickets": True}, id="js-spelling"),
        pytest.param({"tenant": "", "can_read_tickets": True}, id="tenant-empty"),
        pytest.param({"tenant": None, "can_read_tickets": True}, id="tenant-none"),
        pytest.param({"tenant": 1, "can_read_tickets": True}, id="tenant-int"),
        pytest.param({"tenant": ["alpha"], "can_read_tickets": True}, id="tenant-list"),
        pytest.param({"can_read_tickets": True}, id="tenant-missing"),
        pytest.param({}, id="empty"),
        pytest.param(None, id="context-none"),
        pytest.param([("tenant", "alpha"), ("can_read_tickets", True)], id="context-list"),
    ],
)
@pytest.mark.parametrize("tool", list(REGISTRY), ids=TOOL_NAMES)
def test_anything_but_a_readable_session_is_forbidden(tool: Tool, context: object) -> None:
    name, args = tool.name, valid_arguments(tool)
    result = execute_tool(name, args, context, fixture_records())  # type: ignore[arg-type]
    assert result == FORBIDDEN


def test_failures_carry_only_a_code_and_the_detail_is_beside_them() -> None:
    outcome = run_tool("search_tickets", {"limit": 11}, ALPHA, fixture_records())
    assert outcome == Outcome(INVALID, "limit: an integer from 1 to 10")
    ok = run_tool("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, fixture_records())
    assert ok == Outcome(ALPHA_104, None)


def test_tool_cases_refuse_a_tool_whose_arguments_they_cannot_derive() -> None:
    code = Arg(
        "code", "string", "", required=True, pattern="[A-Z]{2}", max_length=2, pattern_rule="a code"
    )
    tool = Tool("probe", "A probe.", (code,), RecordingHandler())
    with pytest.raises(
        ValueError, match=r"^tool 'probe': no valid arguments derived; add its case here$"
    ):
        valid_arguments(tool)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param((Arg("n", "integer", "", required=True),), {"n": 1}, id="integer"),
        pytest.param((Arg("n", "integer", "", required=True, minimum=5),), {"n": 5}, id="minimum"),
        pytest.param(
            (Arg("s", "string", "", required=True, enum=("b", "a")),), {"s": "b"}, id="enum"
        ),
        pytest.param(
            (Arg("s", "string", "", required=True, min_length=3),), {"s": "xxx"}, id="text"
        ),
        pytest.param((Arg("s", "string", ""),), {}, id="optional"),
    ],
)
def test_tool_cases_derive_the_fewest_valid_arguments(
    arguments: tuple[Arg, ...], expected: dict[str, object]
) -> None:
    assert valid_arguments(Tool("probe", "A probe.", arguments, RecordingHandler())) == expected
