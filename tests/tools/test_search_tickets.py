"""search_tickets: every argument rule and bound, the check order, the five search steps."""

from __future__ import annotations

import pytest

from conftest import StoreFactory
from expected import (
    ALPHA,
    ALPHA_NO_READ,
    ALPHA_TICKETS,
    BETA,
    FORBIDDEN,
    INVALID,
    T101,
    T102,
    T104,
    T107,
    T110,
    T112,
    T115,
)
from ticket_tools import DictStore, Ticket, execute_tool, fixture_records
from ticket_tools.filters import TicketFilter


def page(tickets: list[dict[str, str]], next_cursor: str | None) -> dict[str, object]:
    return {"ok": True, "tickets": tickets, "next_cursor": next_cursor}


def search(make_store: StoreFactory, args: object, context: object = ALPHA) -> object:
    return execute_tool("search_tickets", args, context, make_store(fixture_records()))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args",
    [
        # args is not a plain object.
        pytest.param(None, id="args-null"),
        pytest.param([], id="args-array"),
        pytest.param("", id="args-string"),
        pytest.param(0, id="args-number"),
        pytest.param(True, id="args-boolean"),
        # A key outside the table, the trusted tenant's name included.
        pytest.param({"tenant": "alpha"}, id="key-tenant-matching"),
        pytest.param({"tenant": "beta"}, id="key-tenant-other"),
        pytest.param({"Status": "open"}, id="key-case"),
        pytest.param({"offset": 5}, id="key-offset"),
        pytest.param({"ticket_id": "TKT-104"}, id="key-ticket_id"),
        pytest.param({"": 1}, id="key-empty"),
        # null is never a value, for every key.
        pytest.param({"status": None}, id="status-null"),
        pytest.param({"query": None}, id="query-null"),
        pytest.param({"limit": None}, id="limit-null"),
        pytest.param({"cursor": None}, id="cursor-null"),
        # status: "open" or "closed", exactly.
        pytest.param({"status": "Open"}, id="status-case"),
        pytest.param({"status": "open "}, id="status-space"),
        pytest.param({"status": "pending"}, id="status-other"),
        pytest.param({"status": ""}, id="status-empty"),
        pytest.param({"status": ["open"]}, id="status-list"),
        pytest.param({"status": {"open": True}}, id="status-dict"),
        pytest.param({"status": 1}, id="status-number"),
        # query: a string of 1 to 40 code points.
        pytest.param({"query": ""}, id="query-0-chars"),
        pytest.param({"query": "x" * 41}, id="query-41-chars"),
        pytest.param({"query": "😀" * 41}, id="query-41-emoji"),
        pytest.param({"query": 42}, id="query-number"),
        pytest.param({"query": ["login"]}, id="query-list"),
        # limit: an integer from 1 to 10; no booleans, fractions or numeric strings.
        pytest.param({"limit": 0}, id="limit-0"),
        pytest.param({"limit": 11}, id="limit-11"),
        pytest.param({"limit": -1}, id="limit-negative"),
        pytest.param({"limit": 1.5}, id="limit-1.5"),
        pytest.param({"limit": 0.0}, id="limit-0.0"),
        pytest.param({"limit": 11.0}, id="limit-11.0"),
        pytest.param({"limit": float("nan")}, id="limit-nan"),
        pytest.param({"limit": float("inf")}, id="limit-inf"),
        pytest.param({"limit": float("-inf")}, id="limit-minus-inf"),
        pytest.param({"limit": 10**100}, id="limit-10**100"),
        pytest.param({"limit": 1e300}, id="limit-1e300"),
        pytest.param({"limit": "5"}, id="limit-string"),
        pytest.param({"limit": True}, id="limit-true"),
        pytest.param({"limit": False}, id="limit-false"),
        pytest.param({"limit": [5]}, id="limit-list"),
        # cursor: a ticket ID in the get_ticket format.
        pytest.param({"cursor": ""}, id="cursor-empty"),
        pytest.param({"cursor": "TKT-10"}, id="cursor-6-chars"),
        pytest.param({"cursor": "TKT-1000"}, id="cursor-8-chars"),
        pytest.param({"cursor": "TKT-١٠٤"}, id="cursor-arabic-digits"),
        pytest.param({"cursor": "TKT-104\n"}, id="cursor-trailing-newline"),
        pytest.param({"cursor": "tkt-104"}, id="cursor-lowercase"),
        pytest.param({"cursor": 104}, id="cursor-number"),
        pytest.param({"cursor": "beta:TKT-104"}, id="cursor-store-key"),
        pytest.param({"cursor": "TKT-"}, id="cursor-no-digits"),
        # One bad value among good ones still fails.
        pytest.param({"status": "open", "query": "login", "limit": 11}, id="one-bad-of-three"),
    ],
)
def test_invalid_arguments(make_store: StoreFactory, args: object) -> None:
    assert search(make_store, args) == INVALID


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({}, page(ALPHA_TICKETS[:5], "TKT-110"), id="empty-defaults-to-5"),
        # limit: both sides of each bound, and 5.0 read as 5.
        pytest.param({"limit": 1}, page([T101], "TKT-101"), id="limit-1"),
        pytest.param({"limit": 10}, page(ALPHA_TICKETS, None), id="limit-10"),
        pytest.param({"limit": 7}, page(ALPHA_TICKETS, None), id="limit-equal-to-matches"),
        pytest.param({"limit": 6}, page(ALPHA_TICKETS[:6], "TKT-112"), id="limit-one-short"),
        pytest.param({"limit": 5.0}, page(ALPHA_TICKETS[:5], "TKT-110"), id="limit-5.0-is-5"),
        pytest.param({"limit": 1.0}, page([T101], "TKT-101"), id="limit-1.0"),
        pytest.param({"limit": 10.0}, page(ALPHA_TICKETS, None), id="limit-10.0"),
        # query: 1 and 40 code points are valid; used as given, case-insensitive.
        pytest.param({"query": "z"}, page([T112], None), id="query-1-char"),
        pytest.param({"query": "x" * 40}, page([], None), id="query-40-chars"),
        pytest.param({"query": "😀" * 40}, page([], None), id="query-40-emoji"),
        pytest.param({"query": "LOGIN"}, page([T101, T107], None), id="query-uppercase"),
        pytest.param({"query": "settings page"}, page([T112], None), id="query-phrase"),
        pytest.param({"query": " crash"}, page([T104], None), id="query-leading-space-kept"),
        pytest.param({"query": "crash "}, page([], None), id="query-trailing-space-kept"),
        pytest.param({"query": "open"}, page([], None), id="query-only-title-searched"),
        pytest.param({"query": "escalated"}, page([], None), id="query-never-internal"),
        # status.
        pytest.param({"status": "open"}, page([T101, T104, T107, T112], None), id="status-open"),
        pytest.param({"status": "closed"}, page([T102, T110, T115], None), id="status-closed"),
        pytest.param(
            {"status": "open", "limit": 2}, page([T101, T104], "TKT-104"), id="status-paged"
        ),
        pytest.param(
            {"status": "closed", "query": "login"}, page([], None), id="status-and-query-empty"
        ),
        # cursor: a position before, between, equal to and after the ids.
        pytest.param(
            {"cursor": "TKT-000"}, page(ALPHA_TICKETS[:5], "TKT-110"), id="cursor-before-all"
        ),
        pytest.param(
            {"cursor": "TKT-100"}, page(ALPHA_TICKETS[:5], "TKT-110"), id="cursor-just-before"
        ),
        pytest.param(
            {"cursor": "TKT-101"},
            page([T102, T104, T107, T110, T112], "TKT-112"),
            id="cursor-equal",
        ),
        pytest.param({"cursor": "TKT-103"}, page(ALPHA_TICKETS[2:7], None), id="cursor-between"),
        pytest.param(
            {"cursor": "TKT-108"}, page([T110, T112, T115], None), id="cursor-beta-only-id"
        ),
        pytest.param({"cursor": "TKT-114"}, page([T115], None), id="cursor-before-last"),
        pytest.param({"cursor": "TKT-115"}, page([], None), id="cursor-equal-last"),
        pytest.param({"cursor": "TKT-999"}, page([], None), id="cursor-after-all"),
        pytest.param(
            {"cursor": "TKT-104", "status": "open", "query": "settings", "limit": 1},
            page([T112], None),
            id="all-four-arguments",
        ),
    ],
)
def test_valid_arguments(
    make_store: StoreFactory, args: dict[str, object], expected: dict[str, object]
) -> None:
    assert search(make_store, args) == expected


@pytest.mark.parametrize(
    ("args", "context", "expected"),
    [
        pytest.param({"limit": 11}, ALPHA_NO_READ, INVALID, id="invalid-before-forbidden"),
        pytest.param({"tenant": "alpha"}, ALPHA_NO_READ, INVALID, id="tenant-before-forbidden"),
        pytest.param(None, ALPHA_NO_READ, INVALID, id="not-object-before-forbidden"),
        pytest.param({}, ALPHA_NO_READ, FORBIDDEN, id="forbidden-valid-args"),
        pytest.param({"cursor": "TKT-999"}, ALPHA_NO_READ, FORBIDDEN, id="forbidden-empty-page"),
        pytest.param({"cursor": "TKT-999"}, ALPHA, page([], None), id="no-not_found-for-search"),
    ],
)
def test_check_order(
    make_store: StoreFactory,
    args: object,
    context: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert search(make_store, args, context) == expected


def test_unknown_name_comes_first(make_store: StoreFactory) -> None:
    result = execute_tool("Search_Tickets", None, ALPHA_NO_READ, make_store(fixture_records()))
    assert result == {"ok": False, "code": "unknown_tool"}


def test_next_cursor_walks_alpha_in_pages_of_two(make_store: StoreFactory) -> None:
    store = make_store(fixture_records())
    pages = []
    args: dict[str, object] = {"limit": 2}
    while True:
        result = execute_tool("search_tickets", args, ALPHA, store)
        pages.append(result)
        if result["next_cursor"] is None:
            break
        args = {"limit": 2, "cursor": result["next_cursor"]}
    assert pages == [
        page([T101, T102], "TKT-102"),
        page([T104, T107], "TKT-107"),
        page([T110, T112], "TKT-112"),
        page([T115], None),
    ]


def test_beta_sees_only_its_own_three_tickets(make_store: StoreFactory) -> None:
    assert search(make_store, {"limit": 10}, BETA) == page(
        [
            {"id": "TKT-103", "title": "Refund not received", "status": "open"},
            {"id": "TKT-104", "title": "Private billing issue", "status": "closed"},
            {"id": "TKT-108", "title": "Login fails after SSO change", "status": "open"},
        ],
        None,
    )


@pytest.mark.parametrize(
    ("title", "query", "matches"),
    [
        # Python's str.lower(), code point by code point.
        pytest.param("ÉCRAN NOIR", "écran", True, id="accented-upper-title"),
        pytest.param("écran noir", "ÉCRAN", True, id="accented-upper-query"),
        pytest.param("Straße", "STRASSE", False, id="lower-is-not-casefold"),
        pytest.param("😀 login", "😀", True, id="emoji"),
    ],
)
def test_query_lowercases_with_python_lower(
    make_store: StoreFactory, title: str, query: str, matches: bool
) -> None:
    ticket = {"id": "TKT-001", "title": title, "status": "open"}
    records = {"alpha:TKT-001": {**ticket, "internal_note": "secret"}}
    result = execute_tool("search_tickets", {"query": query}, ALPHA, make_store(records))
    assert result == page([ticket] if matches else [], None)


class RecordingStore(DictStore):
    """The fixture store, remembering what each page request asked for."""

    def __init__(self) -> None:
        super().__init__(fixture_records())
        self.requests: list[dict[str, object]] = []

    def find(self, tenant: str, where: TicketFilter, *, limit: int) -> list[Ticket]:
        self.requests.append({"tenant": tenant, "where": where, "limit": limit})
        return super().find(tenant, where, limit=limit)


def test_asks_the_store_for_one_ticket_more_than_the_limit() -> None:
    # The one extra ticket is how the page knows more remain, and all it costs beyond the page.
    store = RecordingStore()
    args = {"status": "open", "query": "login", "cursor": "TKT-100", "limit": 1}
    assert execute_tool("search_tickets", args, ALPHA, store)["next_cursor"] == "TKT-101"
    assert store.requests == [
        {
            "tenant": "alpha",
            "where": TicketFilter(status="open", text="login", after="TKT-100"),
            "limit": 2,
        }
    ]
