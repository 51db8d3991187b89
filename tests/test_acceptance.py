"""The brief's thirteen acceptance calls, A1-A13, each asserting the whole result."""

from __future__ import annotations

import io
from collections.abc import Mapping

import pytest

from conftest import StoreFactory
from expected import (
    ALPHA,
    ALPHA_NO_READ,
    BETA,
    BETA_T103,
    BETA_T104,
    T101,
    T102,
    T104,
    T107,
    T110,
    T112,
    T115,
)
from ticket_tools import execute_tool, fixture_records
from ticket_tools.acceptance import A101, A104, CALLS, _fail, _page, run_acceptance


def page(*tickets: dict[str, str], next_cursor: str | None) -> dict[str, object]:
    return {"ok": True, "tickets": list(tickets), "next_cursor": next_cursor}


def fail(code: str) -> dict[str, object]:
    return {"ok": False, "code": code}


# call, trusted context, tool, arguments, expected result: the brief's table.
TABLE: list[tuple[str, Mapping[str, object], str, dict[str, object], dict[str, object]]] = [
    ("A1", ALPHA, "get_ticket", {"ticket_id": "TKT-104"}, {"ok": True, "ticket": T104}),
    ("A2", ALPHA, "search_tickets", {}, page(T101, T102, T104, T107, T110, next_cursor="TKT-110")),
    ("A3", ALPHA, "search_tickets", {"cursor": "TKT-110"}, page(T112, T115, next_cursor=None)),
    (
        "A4",
        ALPHA,
        "search_tickets",
        {"status": "open", "query": "LOGIN"},
        page(T101, T107, next_cursor=None),
    ),
    (
        "A5",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-108", "limit": 2},
        page(T110, T112, next_cursor="TKT-112"),
    ),
    (
        "A6",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-107", "limit": 3},
        page(T110, T112, T115, next_cursor=None),
    ),
    (
        "A7",
        ALPHA,
        "search_tickets",
        {"status": "closed", "limit": 10},
        page(T102, T110, T115, next_cursor=None),
    ),
    ("A8", ALPHA, "search_tickets", {"query": "refund"}, page(next_cursor=None)),
    ("A9", ALPHA, "search_tickets", {"limit": 11}, fail("invalid_arguments")),
    (
        "A10",
        ALPHA,
        "search_tickets",
        {"status": "open", "tenant": "alpha"},
        fail("invalid_arguments"),
    ),
    ("A11", ALPHA_NO_READ, "search_tickets", {}, fail("forbidden")),
    (
        "A12",
        BETA,
        "search_tickets",
        {"cursor": "TKT-102", "limit": 2},
        page(BETA_T103, BETA_T104, next_cursor="TKT-104"),
    ),
    ("A13", ALPHA, "list_tickets", {}, fail("unknown_tool")),
]


@pytest.mark.parametrize(
    ("context", "name", "args", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in TABLE],
)
def test_acceptance_call(
    make_store: StoreFactory,
    context: Mapping[str, object],
    name: str,
    args: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert execute_tool(name, args, context, make_store(fixture_records())) == expected


def test_expected_results_are_built_in_the_contract_shape() -> None:
    # CALLS is built once at import; these rebuild its expected values at test time.
    assert _page([A101, A104], "TKT-104") == page(T101, T104, next_cursor="TKT-104")
    assert _page([], None) == page(next_cursor=None)
    assert _fail("forbidden") == fail("forbidden")


def test_make_run_checks_this_same_table() -> None:
    rows = [(c.label, c.context, c.name, c.args, c.expected) for c in CALLS]
    assert rows == TABLE


def test_run_acceptance_prints_thirteen_passes(make_store: StoreFactory) -> None:
    out = io.StringIO()
    assert run_acceptance(make_store(fixture_records()), out) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:13]] == [["PASS", row[0]] for row in TABLE]
    assert lines[0] == (
        'PASS A1  [alpha, can read] get_ticket {"ticket_id": "TKT-104"} -> '
        '{"ok": true, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}}'
    )
    assert (
        lines[10]
        == 'PASS A11 [alpha, cannot read] search_tickets {} -> {"ok": false, "code": "forbidden"}'
    )
    assert lines[13:] == ["13 passed, 0 failed"]


def test_run_acceptance_reports_each_mismatch(make_store: StoreFactory) -> None:
    records = fixture_records()
    records["alpha:TKT-104"]["title"] = "Changed"
    out = io.StringIO()
    assert run_acceptance(make_store(records), out) == 2  # A1 and A2 show TKT-104
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        'FAIL A1  [alpha, can read] get_ticket {"ticket_id": "TKT-104"} -> '
        '{"ok": true, "ticket": {"id": "TKT-104", "title": "Changed", "status": "open"}}'
    )
    assert lines[1] == (
        '         expected {"ok": true, "ticket": '
        '{"id": "TKT-104", "title": "Settings crash", "status": "open"}}'
    )
    assert lines[-1] == "11 passed, 2 failed"
