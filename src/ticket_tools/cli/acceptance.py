"""The brief's thirteen acceptance calls, runnable against any store: `ticket-tools acceptance`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TextIO

from ticket_tools.execute import execute_tool
from ticket_tools.store import Records, TicketStore

ALPHA = {"tenant": "alpha", "can_read_tickets": True}
ALPHA_NO_READ = {"tenant": "alpha", "can_read_tickets": False}
BETA = {"tenant": "beta", "can_read_tickets": True}


def _page(ids_titles: list[tuple[str, str, str]], next_cursor: str | None) -> dict[str, object]:
    tickets = [{"id": i, "title": t, "status": s} for i, t, s in ids_titles]
    return {"ok": True, "tickets": tickets, "next_cursor": next_cursor}


def _fail(code: str) -> dict[str, object]:
    return {"ok": False, "code": code}


A101 = ("TKT-101", "Login fails after password reset", "open")
A102 = ("TKT-102", "CSV export times out", "closed")
A104 = ("TKT-104", "Settings crash", "open")
A107 = ("TKT-107", "Login page slow on mobile", "open")
A110 = ("TKT-110", "Invoice PDF missing logo", "closed")
A112 = ("TKT-112", "Settings page shows wrong time zone", "open")
A115 = ("TKT-115", "Password reset email delayed", "closed")
B103 = ("TKT-103", "Refund not received", "open")
B104 = ("TKT-104", "Private billing issue", "closed")


@dataclass(frozen=True)
class AcceptanceCall:
    """One row of the brief's acceptance table."""

    label: str
    context: Mapping[str, object]
    name: str
    args: dict[str, object]
    expected: dict[str, object]


CALLS: tuple[AcceptanceCall, ...] = (
    AcceptanceCall(
        "A1",
        ALPHA,
        "get_ticket",
        {"ticket_id": "TKT-104"},
        {"ok": True, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}},
    ),
    AcceptanceCall(
        "A2", ALPHA, "search_tickets", {}, _page([A101, A102, A104, A107, A110], "TKT-110")
    ),
    AcceptanceCall("A3", ALPHA, "search_tickets", {"cursor": "TKT-110"}, _page([A112, A115], None)),
    AcceptanceCall(
        "A4",
        ALPHA,
        "search_tickets",
        {"status": "open", "query": "LOGIN"},
        _page([A101, A107], None),
    ),
    AcceptanceCall(
        "A5",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-108", "limit": 2},
        _page([A110, A112], "TKT-112"),
    ),
    AcceptanceCall(
        "A6",
        ALPHA,
        "search_tickets",
        {"cursor": "TKT-107", "limit": 3},
        _page([A110, A112, A115], None),
    ),
    AcceptanceCall(
        "A7",
        ALPHA,
        "search_tickets",
        {"status": "closed", "limit": 10},
        _page([A102, A110, A115], None),
    ),
    AcceptanceCall("A8", ALPHA, "search_tickets", {"query": "refund"}, _page([], None)),
    AcceptanceCall("A9", ALPHA, "search_tickets", {"limit": 11}, _fail("invalid_arguments")),
    AcceptanceCall(
        "A10",
        ALPHA,
        "search_tickets",
        {"status": "open", "tenant": "alpha"},
        _fail("invalid_arguments"),
    ),
    AcceptanceCall("A11", ALPHA_NO_READ, "search_tickets", {}, _fail("forbidden")),
    AcceptanceCall(
        "A12",
        BETA,
        "search_tickets",
        {"cursor": "TKT-102", "limit": 2},
        _page([B103, B104], "TKT-104"),
    ),
    AcceptanceCall("A13", ALPHA, "list_tickets", {}, _fail("unknown_tool")),
)


def _describe(context: Mapping[str, object]) -> str:
    permission = "can read" if context["can_read_tickets"] else "cannot read"
    return f"{context['tenant']}, {permission}"


def run_acceptance(records: Records | TicketStore, out: TextIO) -> int:
    """Print each acceptance call with its result and a pass mark; return the failure count."""
    failures = 0
    for call in CALLS:
        result = execute_tool(call.name, call.args, call.context, records)
        passed = result == call.expected
        failures += not passed
        mark = "PASS" if passed else "FAIL"
        out.write(
            f"{mark} {call.label:<3} [{_describe(call.context)}] {call.name} "
            f"{json.dumps(call.args)} -> {json.dumps(result)}\n"
        )
        if not passed:
            out.write(f"         expected {json.dumps(call.expected)}\n")
    out.write(f"{len(CALLS) - failures} passed, {failures} failed\n")
    return failures
