"""search_tickets on the fixture store: a failing value per rule, both sides of every bound.

The arguments table of the brief, rule by rule: args a plain object; no key outside
status, query, limit, cursor (tenant included, even the trusted tenant's own name); null
never a value; status "open" or "closed"; query 1 to 40 characters, used as given; limit
an integer 1 to 10 (no booleans, fractions or numeric strings), 5 when absent; cursor a
ticket ID. Then the order of checks: unknown_tool, invalid_arguments, forbidden; a search
never answers not_found; and the sentence `run_tool` gives a host beside a failure names the
rule, never the value. Every result is asserted whole.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from brief_calls import call, detail
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
    page,
)
from ticket_tools.catalog import REGISTRY

INVALID = fail("invalid_arguments")


def search(args: object, context: Mapping[str, object] = ALPHA) -> object:
    return call("search_tickets", args, context)


@pytest.mark.parametrize(
    "args",
    [
        # args must be a plain object.
        pytest.param(None, id="args-null"),
        pytest.param([], id="args-array"),
        pytest.param([["limit", 2]], id="args-array-of-pairs"),
        pytest.param("", id="args-string"),
        pytest.param("{}", id="args-json-text"),
        pytest.param(0, id="args-number"),
        pytest.param(True, id="args-boolean"),
        # Any key outside the table is invalid, tenant included.
        pytest.param({"tenant": "alpha"}, id="key-tenant-matching-trusted"),
        pytest.param({"tenant": "beta"}, id="key-tenant-other"),
        pytest.param({"status": "open", "tenant": "alpha"}, id="key-tenant-beside-valid"),
        pytest.param({"Status": "open"}, id="key-case"),
        pytest.param({"offset": 5}, id="key-offset"),
        pytest.param({"ticket_id": "TKT-104"}, id="key-ticket_id"),
        pytest.param({"": 1}, id="key-empty"),
        # A key that is present must hold a valid value, so null is invalid.
        pytest.param({"status": None}, id="status-null"),
        pytest.param({"query": None}, id="query-null"),
        pytest.param({"limit": None}, id="limit-null"),
        pytest.param({"cursor": None}, id="cursor-null"),
        # status: "open" or "closed", exactly.
        pytest.param({"status": "Open"}, id="status-case"),
        pytest.param({"status": "OPEN"}, id="status-upper"),
        pytest.param({"status": "open "}, id="status-trailing-space"),
        pytest.param({"status": "pending"}, id="status-other-word"),
        pytest.param({"status": ""}, id="status-empty"),
        pytest.param({"status": ["open"]}, id="status-list"),
        pytest.param({"status": True}, id="status-boolean"),
        # query: a string of 1 to 40 characters.
        pytest.param({"query": ""}, id="query-0-chars"),
        pytest.param({"query": "x" * 41}, id="query-41-chars"),
        pytest.param({"query": "😀" * 41}, id="query-41-emoji"),
        pytest.param({"query": 42}, id="query-number"),
        pytest.param({"query": ["login"]}, id="query-list"),
        # limit: an integer from 1 to 10; booleans, fractions, numeric strings are not.
        pytest.param({"limit": 0}, id="limit-0"),
        pytest.param({"limit": 11}, id="limit-11"),
        pytest.param({"limit": -1}, id="limit-negative"),
        pytest.param({"limit": 1.5}, id="limit-fraction"),
        pytest.param({"limit": 10.5}, id="limit-fraction-under-11"),
        pytest.param({"limit": 0.0}, id="limit-0.0"),
        pytest.param({"limit": 11.0}, id="limit-11.0"),
        pytest.param({"limit": float("nan")}, id="limit-nan"),
        pytest.param({"limit": float("inf")}, id="limit-inf"),
        pytest.param({"limit": "5"}, id="limit-numeric-string"),
        pytest.param({"limit": True}, id="limit-true"),
        pytest.param({"limit": False}, id="limit-false"),
        pytest.param({"limit": [5]}, id="limit-list"),
        # cursor: a ticket ID in the get_ticket format (its every edge: test_brief_get_ticket).
        pytest.param({"cursor": ""}, id="cursor-empty"),
        pytest.param({"cursor": "TKT-10"}, id="cursor-two-digits"),
        pytest.param({"cursor": "TKT-1000"}, id="cursor-four-digits"),
        pytest.param({"cursor": "tkt-104"}, id="cursor-lowercase"),
        pytest.param({"cursor": "TKT-104\n"}, id="cursor-trailing-newline"),
        pytest.param({"cursor": "TKT-١٠٤"}, id="cursor-arabic-indic-digits"),
        pytest.param({"cursor": "beta:TKT-104"}, id="cursor-store-key"),
        pytest.param({"cursor": 104}, id="cursor-number"),
        # One bad value among valid ones still fails.
        pytest.param({"status": "open", "query": "login", "limit": 11}, id="one-bad-of-three"),
    ],
)
def test_a_failing_value_per_rule(args: object) -> None:
    assert search(args) == INVALID


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({}, page(*ALPHA_TICKETS[:5], next_cursor="TKT-110"), id="empty-limit-5"),
        # limit: 1 and 10 are valid (0 and 11 are above); 5 when absent.
        pytest.param({"limit": 1}, page(T101, next_cursor="TKT-101"), id="limit-1"),
        pytest.param({"limit": 10}, page(*ALPHA_TICKETS, next_cursor=None), id="limit-10"),
        pytest.param({"limit": 5}, page(*ALPHA_TICKETS[:5], next_cursor="TKT-110"), id="limit-5"),
        pytest.param(
            {"limit": 6}, page(*ALPHA_TICKETS[:6], next_cursor="TKT-112"), id="limit-one-short"
        ),
        pytest.param({"limit": 7}, page(*ALPHA_TICKETS, next_cursor=None), id="limit-exact"),
        # JSON has one number type: 2.0 is the integer 2, not a fraction (the brief is
        # silent on integral floats; README, "Decisions").
        pytest.param({"limit": 2.0}, page(T101, T102, next_cursor="TKT-102"), id="limit-2.0"),
        # query: 1 and 40 characters are valid (0 and 41 are above), used as given.
        pytest.param({"query": "z"}, page(T112, next_cursor=None), id="query-1-char"),
        pytest.param({"query": "x" * 40}, page(next_cursor=None), id="query-40-chars"),
        pytest.param({"query": "😀" * 40}, page(next_cursor=None), id="query-40-emoji"),
        pytest.param(
            {"query": "Settings page shows wrong time zone"},
            page(T112, next_cursor=None),
            id="query-whole-title",
        ),
        pytest.param({"query": "LOGIN"}, page(T101, T107, next_cursor=None), id="query-upper"),
        pytest.param({"query": "lOgIn"}, page(T101, T107, next_cursor=None), id="query-mixed"),
        pytest.param({"query": " crash"}, page(T104, next_cursor=None), id="query-space-kept"),
        pytest.param({"query": "crash "}, page(next_cursor=None), id="query-no-trimming"),
        pytest.param({"query": "open"}, page(next_cursor=None), id="query-not-the-status"),
        pytest.param({"query": "TKT-101"}, page(next_cursor=None), id="query-not-the-id"),
        pytest.param({"query": "escalated"}, page(next_cursor=None), id="query-not-internal"),
        # status.
        pytest.param(
            {"status": "open"}, page(T101, T104, T107, T112, next_cursor=None), id="status-open"
        ),
        pytest.param(
            {"status": "closed"}, page(T102, T110, T115, next_cursor=None), id="status-closed"
        ),
        # cursor: a position, on both sides of stored ids, not necessarily one of them.
        pytest.param(
            {"cursor": "TKT-000"}, page(*ALPHA_TICKETS[:5], next_cursor="TKT-110"), id="cursor-000"
        ),
        pytest.param(
            {"cursor": "TKT-100"},
            page(*ALPHA_TICKETS[:5], next_cursor="TKT-110"),
            id="cursor-below-lowest",
        ),
        pytest.param(
            {"cursor": "TKT-101"},
            page(T102, T104, T107, T110, T112, next_cursor="TKT-112"),
            id="cursor-equal-excluded",
        ),
        pytest.param(
            {"cursor": "TKT-103"},
            page(T104, T107, T110, T112, T115, next_cursor=None),
            id="cursor-not-stored",
        ),
        pytest.param(
            {"cursor": "TKT-108"}, page(T110, T112, T115, next_cursor=None), id="cursor-beta-id"
        ),
        pytest.param({"cursor": "TKT-114"}, page(T115, next_cursor=None), id="cursor-below-last"),
        pytest.param({"cursor": "TKT-115"}, page(next_cursor=None), id="cursor-equal-last"),
        pytest.param({"cursor": "TKT-999"}, page(next_cursor=None), id="cursor-999"),
        # All four together.
        pytest.param(
            {"status": "open", "query": "settings", "limit": 1, "cursor": "TKT-104"},
            page(T112, next_cursor=None),
            id="all-four",
        ),
        pytest.param(
            {"status": "open", "query": "s", "limit": 1, "cursor": "TKT-101"},
            page(T104, next_cursor="TKT-104"),
            id="all-four-more-remain",
        ),
    ],
)
def test_valid_values_and_the_valid_side_of_each_bound(
    args: dict[str, object], expected: dict[str, object]
) -> None:
    assert search(args) == expected


def test_beta_sees_its_own_three() -> None:
    assert search({"limit": 10}, BETA) == page(BETA_T103, BETA_T104, BETA_T108, next_cursor=None)


@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        pytest.param("list_tickets", None, ALPHA_NO_READ, "unknown_tool", id="unknown-first"),
        pytest.param(
            "Search_Tickets", {"limit": 11}, ALPHA, "unknown_tool", id="unknown-before-invalid"
        ),
        pytest.param(
            "search_tickets ", {}, ALPHA_NO_READ, "unknown_tool", id="unknown-before-forbidden"
        ),
        pytest.param(
            "search_tickets", None, ALPHA_NO_READ, "invalid_arguments", id="not-object-first"
        ),
        pytest.param(
            "search_tickets",
            {"tenant": "alpha"},
            ALPHA_NO_READ,
            "invalid_arguments",
            id="tenant-key-before-forbidden",
        ),
        pytest.param(
            "search_tickets",
            {"limit": 0},
            ALPHA_NO_READ,
            "invalid_arguments",
            id="bad-value-before-forbidden",
        ),
        pytest.param(
            "search_tickets",
            {"cursor": "TKT-999"},
            ALPHA_NO_READ,
            "forbidden",
            id="forbidden-even-for-an-empty-page",
        ),
    ],
)
def test_checks_run_in_order(
    name: str, args: object, context: Mapping[str, object], expected: str
) -> None:
    assert call(name, args, context) == fail(expected)


@pytest.mark.parametrize(
    ("args", "context"),
    [
        pytest.param({"cursor": "TKT-999"}, ALPHA, id="past-every-id"),
        pytest.param({"query": "refund"}, ALPHA, id="no-match"),
        pytest.param({"status": "closed", "query": "login"}, ALPHA, id="filters-exclude-all"),
        pytest.param({}, {"tenant": "gamma", "can_read_tickets": True}, id="tenant-no-tickets"),
    ],
)
def test_a_search_never_answers_not_found(args: object, context: Mapping[str, object]) -> None:
    assert search(args, context) == page(next_cursor=None)


ID_RULE = "a ticket ID: TKT- followed by exactly three digits, such as TKT-104"


@pytest.mark.parametrize(
    ("name", "args", "context", "sentence"),
    [
        pytest.param(
            "search_tickets", {"limit": 11}, ALPHA, "limit: an integer from 1 to 10", id="limit-11"
        ),
        pytest.param(
            "search_tickets",
            {"query": ""},
            ALPHA,
            "query: a string of 1 to 40 characters",
            id="query-0",
        ),
        pytest.param(
            "search_tickets", {"status": "x"}, ALPHA, 'status: one of "open", "closed"', id="status"
        ),
        pytest.param(
            "search_tickets", {"cursor": "beta:TKT-104"}, ALPHA, f"cursor: {ID_RULE}", id="cursor"
        ),
        pytest.param("get_ticket", {}, ALPHA, f"ticket_id: required, {ID_RULE}", id="no-ticket_id"),
        pytest.param(
            "search_tickets",
            {"<b>secret</b>": 1},
            ALPHA,
            "the only arguments accepted are: status, query, limit, cursor",
            id="unknown-key-not-named",
        ),
        pytest.param(
            "search_tickets", [], ALPHA, "the arguments must be a JSON object", id="args-array"
        ),
        pytest.param(
            "search_tickets", {}, ALPHA_NO_READ, "this session may not read tickets", id="forbidden"
        ),
        pytest.param(
            "Search_Tickets",
            {},
            ALPHA,
            "unknown tool; the tools are: " + ", ".join(tool.name for tool in REGISTRY),
            id="unknown-tool",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-103"},
            ALPHA,
            "no ticket with that ID is visible in this session",
            id="not-found",
        ),
        pytest.param("search_tickets", {}, ALPHA, None, id="success-has-none"),
    ],
)
def test_a_failure_tells_a_host_the_rule_never_the_value(
    name: str, args: object, context: Mapping[str, object], sentence: str | None
) -> None:
    # The result keeps the bare code; run_tool's sentence beside it names the rule broken.
    assert detail(name, args, context) == sentence
