"""No untrusted name or args makes execute_tool raise; every result has an exact shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import StoreFactory
from expected import ALPHA, TOOL_NAMES
from ticket_tools import execute_tool, fixture_records
from ticket_tools.catalog import REGISTRY

CODES = ("unknown_tool", "invalid_arguments", "forbidden", "not_found")
TICKET_KEYS = {"id", "title", "status"}
FIXTURE_TICKETS = {
    (t["id"], t["title"], t["status"])
    for key, t in fixture_records().items()
    if key.startswith("alpha:")
}

# Every argument name some tool declares, in registry order.
ARGUMENT_NAMES = tuple(dict.fromkeys(arg.name for tool in REGISTRY for arg in tool.arguments))

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(),  # NaN and the infinities included
    st.text(),
    st.sampled_from(("TKT-104", "TKT-١٠٤", "TKT-104\n", "open", "5", "", "😀" * 41)),
)
"""JSON-like scalars, including the values that trap Python code."""

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=12), children, max_size=4),
    ),
    max_leaves=20,
)
"""Arbitrary JSON-like values: scalars, lists and string-keyed dicts, nested."""


@st.composite
def tool_args(draw: st.DrawFn) -> object:
    """Draw untrusted tool arguments: any JSON value, or a dict using the real argument names."""
    real_keys = st.sampled_from((*ARGUMENT_NAMES, "tenant"))
    return draw(
        st.one_of(
            json_values,
            st.dictionaries(real_keys, json_values, max_size=5),
            st.dictionaries(real_keys, json_scalars, max_size=5),
        )
    )


names = st.one_of(st.sampled_from(TOOL_NAMES), json_values)


def assert_contract_shape(name: object, result: object) -> None:
    """A failure is exactly {ok: False, code}; a success is exactly the tool's success shape."""
    assert type(result) is dict
    if result["ok"] is False:
        assert set(result) == {"ok", "code"}
        assert result["code"] in CODES
        return
    assert result["ok"] is True
    if name == "get_ticket":
        assert set(result) == {"ok", "ticket"}
        tickets = [result["ticket"]]
    elif name == "search_tickets":
        assert set(result) == {"ok", "tickets", "next_cursor"}
        tickets = result["tickets"]
        assert type(tickets) is list
        assert len(tickets) <= 10
        assert result["next_cursor"] is None or result["next_cursor"] == tickets[-1]["id"]
    else:
        # A tool added after this module was written: it has no shape here (its own suite
        # pins it), but its result is still plain JSON, NaN excluded.
        assert name in TOOL_NAMES
        assert json.loads(json.dumps(result, allow_nan=False)) == result
        return
    for ticket in tickets:
        assert type(ticket) is dict
        assert set(ticket) == TICKET_KEYS
        assert (ticket["id"], ticket["title"], ticket["status"]) in FIXTURE_TICKETS


@given(name=names, args=tool_args())
def test_any_call_returns_a_contract_shaped_dict(
    make_store: StoreFactory, name: object, args: object
) -> None:
    assert_contract_shape(name, execute_tool(name, args, ALPHA, make_store(fixture_records())))


def _nested(depth: int, container: str) -> object:
    value: object = "TKT-104"
    for _ in range(depth):
        value = [value] if container == "list" else {"ticket_id": value}
    return value


@pytest.mark.parametrize("name", [*TOOL_NAMES, "nope"])
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(_nested(100_000, "list"), id="list-100000-deep"),
        pytest.param(_nested(100_000, "dict"), id="dict-100000-deep"),
        pytest.param({"ticket_id": _nested(100_000, "list")}, id="ticket_id-deep"),
        pytest.param({"status": _nested(100_000, "dict")}, id="status-deep"),
        pytest.param({"limit": 10**100_000}, id="limit-huge-int"),
        pytest.param({"limit": -(10**100_000)}, id="limit-huge-negative"),
        pytest.param({"query": "x" * 10_000_000}, id="query-10M-chars"),
        pytest.param({"cursor": "TKT-" + "1" * 1_000_000}, id="cursor-1M-digits"),
        pytest.param({"k" * 1_000_000: 1}, id="key-1M-chars"),
        pytest.param({str(i): i for i in range(10_000)}, id="10000-keys"),
        pytest.param({"limit": float("nan"), "query": "\ud800"}, id="nan-and-lone-surrogate"),
        pytest.param({"query": "\x00"}, id="nul-query"),
    ],
)
def test_extreme_inputs_return_a_failure_or_result(
    make_store: StoreFactory, name: str, args: object
) -> None:
    result = execute_tool(name, args, ALPHA, make_store(fixture_records()))
    assert_contract_shape(name, result)
    if name == "nope":
        assert result == {"ok": False, "code": "unknown_tool"}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(_nested(100_000, "list"), id="deep-list-name"),
        pytest.param("get_ticket" * 100_000, id="huge-name"),
        pytest.param(float("nan"), id="nan-name"),
        pytest.param(10**10_000, id="huge-int-name"),
    ],
)
def test_extreme_names_are_unknown(make_store: StoreFactory, name: object) -> None:
    result = execute_tool(name, {}, ALPHA, make_store(fixture_records()))
    assert result == {"ok": False, "code": "unknown_tool"}


# Issue 12, item 1: a lone surrogate is valid JSON ("\ud800") and a non-UTF-8 --tenant
# byte decodes to one; SQLite cannot bind it, and raised UnicodeEncodeError. Stored text
# is always encodable, so nothing can match it: every store says so.
@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        pytest.param(
            "search_tickets",
            {"query": "\ud800"},
            ALPHA,
            {"ok": True, "tickets": [], "next_cursor": None},
            id="query",
        ),
        pytest.param(
            "search_tickets",
            {"query": "login\udcff", "status": "open"},
            ALPHA,
            {"ok": True, "tickets": [], "next_cursor": None},
            id="query-with-status",
        ),
        pytest.param(
            "search_tickets",
            {},
            {"tenant": "\udcff", "can_read_tickets": True},
            {"ok": True, "tickets": [], "next_cursor": None},
            id="tenant-search",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104"},
            {"tenant": "alpha\ud800", "can_read_tickets": True},
            {"ok": False, "code": "not_found"},
            id="tenant-get",
        ),
    ],
)
def test_text_without_a_utf8_form_matches_nothing(
    make_store: StoreFactory,
    name: str,
    args: dict[str, object],
    context: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert execute_tool(name, args, context, make_store(fixture_records())) == expected
