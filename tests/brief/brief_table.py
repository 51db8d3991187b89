"""The brief's tables written out by hand: the fixture store, its three contexts, A1-A13.

Nothing here is computed by the code under test: every expected result is written once,
here, and the tests and `make run` read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

# Alpha's seven tickets as a result shows them (id, title, status), by id.
T101 = {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"}
T102 = {"id": "TKT-102", "title": "CSV export times out", "status": "closed"}
T104 = {"id": "TKT-104", "title": "Settings crash", "status": "open"}
T107 = {"id": "TKT-107", "title": "Login page slow on mobile", "status": "open"}
T110 = {"id": "TKT-110", "title": "Invoice PDF missing logo", "status": "closed"}
T112 = {"id": "TKT-112", "title": "Settings page shows wrong time zone", "status": "open"}
T115 = {"id": "TKT-115", "title": "Password reset email delayed", "status": "closed"}
ALPHA_TICKETS = [T101, T102, T104, T107, T110, T112, T115]

# Beta's three tickets, by id. Beta's TKT-104 shares its id with alpha's.
BETA_T103 = {"id": "TKT-103", "title": "Refund not received", "status": "open"}
BETA_T104 = {"id": "TKT-104", "title": "Private billing issue", "status": "closed"}
BETA_T108 = {"id": "TKT-108", "title": "Login fails after SSO change", "status": "open"}
BETA_TICKETS = [BETA_T103, BETA_T104, BETA_T108]

# The fixture store as the brief lists it: insertion order (not id order), each ticket
# id, title, status, then its internal fields.
FIXTURE_ROWS: tuple[tuple[str, dict[str, str]], ...] = (
    ("alpha:TKT-104", {**T104}),
    ("beta:TKT-104", {**BETA_T104}),
    ("alpha:TKT-112", {**T112}),
    ("alpha:TKT-101", {**T101, "internal_note": "Escalated by the on-call engineer"}),
    ("beta:TKT-108", {**BETA_T108, "internal_note": "Security review pending"}),
    ("alpha:TKT-107", {**T107}),
    ("alpha:TKT-115", {**T115}),
    ("beta:TKT-103", {**BETA_T103}),
    ("alpha:TKT-102", {**T102}),
    ("alpha:TKT-110", {**T110, "internal_note": "Refund approved by finance"}),
)
INTERNAL_NOTES = (
    "Escalated by the on-call engineer",
    "Security review pending",
    "Refund approved by finance",
)

# The starting adapter's own fixtures: the first two rows.
STARTING_ROWS = FIXTURE_ROWS[:2]

# The brief's three trusted contexts.
ALPHA = {"tenant": "alpha", "can_read_tickets": True}
ALPHA_NO_READ = {"tenant": "alpha", "can_read_tickets": False}
BETA = {"tenant": "beta", "can_read_tickets": True}


def page(*tickets: dict[str, str], next_cursor: str | None) -> dict[str, object]:
    """Write a successful search result."""
    return {"ok": True, "tickets": list(tickets), "next_cursor": next_cursor}


def fail(code: str) -> dict[str, object]:
    """Write a failure result."""
    return {"ok": False, "code": code}


class AcceptanceCall(NamedTuple):
    """One row of the brief's acceptance table: the call and its whole result."""

    label: str
    context: Mapping[str, object]
    name: str
    args: dict[str, object]
    expected: dict[str, object]


ACCEPTANCE: tuple[AcceptanceCall, ...] = (
    AcceptanceCall(
        "A1", ALPHA, "get_ticket", {"ticket_id": "TKT-104"}, {"ok": True, "ticket": T104}
    ),
    AcceptanceCall(
        "A2", ALPHA, "search_tickets", {}, page(T101, T102, T104, T107, T110, next_cursor="TKT-110")
    ),
    AcceptanceCall(
        "A3", ALPHA, "search_tickets", {"cursor": "TKT-110"}, page(T112, T115, next_cursor=None)
    ),
    AcceptanceCall(
        "A4",
        ALPHA,
        "search_tickets",
        {"status": "open", "query": "LOGIN"},
        page(T101, T107, next_cursor=None),
    ),
    AcceptanceCall(
        "A5",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-108", "limit": 2},
        page(T110, T112, next_cursor="TKT-112"),
    ),
    AcceptanceCall(
        "A6",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-107", "limit": 3},
        page(T110, T112, T115, next_cursor=None),
    ),
    AcceptanceCall(
        "A7",
        ALPHA,
        "search_tickets",
        {"status": "closed", "limit": 10},
        page(T102, T110, T115, next_cursor=None),
    ),
    AcceptanceCall("A8", ALPHA, "search_tickets", {"query": "refund"}, page(next_cursor=None)),
    AcceptanceCall("A9", ALPHA, "search_tickets", {"limit": 11}, fail("invalid_arguments")),
    AcceptanceCall(
        "A10",
        ALPHA,
        "search_tickets",
        {"status": "open", "tenant": "alpha"},
        fail("invalid_arguments"),
    ),
    AcceptanceCall("A11", ALPHA_NO_READ, "search_tickets", {}, fail("forbidden")),
    AcceptanceCall(
        "A12",
        BETA,
        "search_tickets",
        {"cursor": "TKT-102", "limit": 2},
        page(BETA_T103, BETA_T104, next_cursor="TKT-104"),
    ),
    AcceptanceCall("A13", ALPHA, "list_tickets", {}, fail("unknown_tool")),
)
