"""Every served result against `execute_tool` on the same records, for the token's context.

A call ends in one of three ways. *correct*: exactly what the MCP adapter makes of the
core's outcome (the result dict as structuredContent, with the failure's detail beside
"ok" and "code" and `isError` on a failure, the same text; an unknown tool as the
protocol error -32602). *error*: the server could not
answer, in a way a client can tell apart from an answer: the fixed internal error
(-32603 "Internal error"), the `unavailable` tool error (what a store failure that ends by
itself becomes: the database restarting) or a transport failure (a replica gone).
*wrong*: anything else, including any other protocol error. Independently, every ticket
whose title names another tenant is counted as cross-tenant.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from load.records import owner_of
from load.workload import ID_SPACE, Call, Walk
from ticket_tools import Context, Records, execute_tool, run_tool

INTERNAL_ERROR_CODE = -32603
INTERNAL_ERROR_MESSAGE = "Internal error"
INVALID_PARAMS_CODE = -32602
INTERNAL_ERROR = "internal_error"
UNAVAILABLE = "unavailable"
"""The server's answer when the store did not answer in time (a tool error, never one of
the contract's codes): the call may be retried, as after the internal error."""
# A walk never needs more pages than there are ids; the bound keeps the oracle finite.
MAX_ORACLE_PAGES = ID_SPACE + 1
ORACLE_LIMIT = 10

Outcome = Literal["correct", "wrong", "error"]


@dataclass(frozen=True)
class Observation:
    """What a client saw for one call: a tool result, a protocol error or a failure."""

    result: dict[str, object] | None = None
    """structuredContent of a tool result."""
    is_error: bool = False
    text: str | None = None
    """The first text block of a tool result."""
    protocol_code: int | None = None
    protocol_message: str | None = None
    failure: str | None = None
    """A transport failure: the exception's type name (no reply from a server)."""


@dataclass(frozen=True)
class Verdict:
    """How one call ended, and how many other tenants' tickets it showed."""

    outcome: Outcome
    error_kind: str | None = None
    """For an error: internal_error or transport:<exception type>."""
    cross_tenant: int = 0
    store_read: bool = False
    """The expected answer came from the store (a page or a ticket, or not_found)."""
    expected: str = "ok"
    """The expected result's code, or "ok"."""


def check(call: Call, context: Context, records: Records, seen: Observation) -> Verdict:
    """Compare one observation with what `execute_tool` returns for the same call."""
    outcome = run_tool(call.name, call.args, context, records)
    expected = outcome.result
    code = "ok" if expected["ok"] is True else str(expected.get("code"))
    store_read = code in ("ok", "not_found")
    crossed = _cross_tenant(seen.result, str(context.get("tenant")))
    if seen.failure is not None:
        return Verdict("error", f"transport:{seen.failure}", crossed, store_read, code)
    if is_unavailable(seen):
        return Verdict("error", UNAVAILABLE, crossed, store_read, code)
    if seen.protocol_code is not None:
        if (seen.protocol_code, seen.protocol_message) == (
            INTERNAL_ERROR_CODE,
            INTERNAL_ERROR_MESSAGE,
        ):
            return Verdict("error", INTERNAL_ERROR, crossed, store_read, code)
        unknown = code == "unknown_tool"
        message = f"unknown_tool: {outcome.detail}"
        right = unknown and (seen.protocol_code, seen.protocol_message) == (
            INVALID_PARAMS_CODE,
            message,
        )
        return Verdict("correct" if right else "wrong", None, crossed, store_read, code)
    # What the MCP adapter writes: the result and its JSON, or for a failure the result
    # with its detail beside "ok" and "code", and the text "code: detail".
    if code == "ok":
        structured, text = expected, json.dumps(expected, ensure_ascii=False)
    else:
        structured, text = {**expected, "detail": outcome.detail}, f"{code}: {outcome.detail}"
    right = (
        code != "unknown_tool"
        and seen.result == structured
        and seen.is_error is (expected["ok"] is not True)
        and seen.text == text
    )
    return Verdict("correct" if right else "wrong", None, crossed, store_read, code)


def is_unavailable(seen: Observation) -> bool:
    """Say whether a tool result is the server's "store unavailable, retry" failure."""
    result = seen.result
    return seen.is_error and result is not None and result.get("code") == UNAVAILABLE


def _cross_tenant(result: Mapping[str, object] | None, tenant: str) -> int:
    """Count the tickets in a result whose title names a tenant other than `tenant`."""
    if result is None:
        return 0
    tickets: list[object] = []
    single = result.get("ticket")
    if single is not None:
        tickets.append(single)
    many = result.get("tickets")
    if isinstance(many, list):
        tickets.extend(many)
    return sum(
        1
        for ticket in tickets
        if isinstance(ticket, dict)
        and isinstance(ticket.get("title"), str)
        and owner_of(ticket["title"]) not in (None, tenant)
    )


@dataclass(frozen=True)
class WalkCheck:
    """One page walk against the oracle's walk over the same filter and start."""

    seen: int
    """Ticket ids received over all its pages."""
    skipped: int
    """Ids the oracle walk has, up to the last id received, that never arrived."""
    repeated: int
    """Ids received more than once."""
    in_order: bool
    """The ids received are exactly the oracle's, in order, up to the last one received."""
    complete: bool
    """The walk reached its last page."""
    replicas: int
    """How many replicas answered its pages (2: it crossed a switch)."""


def oracle_walk(walk: Walk, context: Context, records: Records) -> list[str]:
    """Return every id the walk should see: `execute_tool` pages from its start to the end."""
    ids: list[str] = []
    cursor = walk.start
    for _ in range(MAX_ORACLE_PAGES):
        args: dict[str, object] = {**walk.filters, "limit": ORACLE_LIMIT}
        if cursor is not None:
            args["cursor"] = cursor
        result = execute_tool("search_tickets", args, context, records)
        tickets = result.get("tickets")
        if not isinstance(tickets, list):
            break
        ids.extend(str(ticket["id"]) for ticket in tickets)
        next_cursor = result.get("next_cursor")
        if not isinstance(next_cursor, str):
            break
        cursor = next_cursor
    return ids


def check_walk(walk: Walk, oracle: list[str]) -> WalkCheck:
    """Compare the ids a walk received with the oracle's, up to where the walk got."""
    seen = [ticket_id for page in walk.pages for ticket_id in page]
    if walk.done:
        reference = oracle
    else:
        last = max(seen, default=None)
        reference = [] if last is None else [ticket_id for ticket_id in oracle if ticket_id <= last]
    received = set(seen)
    return WalkCheck(
        seen=len(seen),
        skipped=sum(1 for ticket_id in reference if ticket_id not in received),
        repeated=len(seen) - len(received),
        in_order=seen == reference,
        complete=walk.done,
        replicas=len(walk.replicas),
    )


@dataclass
class Tally:
    """The counts of one phase: outcomes, errors by kind, result codes, cross-tenant tickets."""

    calls: int = 0
    correct: int = 0
    wrong: int = 0
    cross_tenant: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    """The expected result of each correct call: ok, or the failure code."""

    def add(self, verdict: Verdict) -> None:
        """Count one checked call."""
        self.calls += 1
        self.cross_tenant += verdict.cross_tenant
        if verdict.outcome == "correct":
            self.correct += 1
            self.codes[verdict.expected] += 1
        elif verdict.outcome == "wrong":
            self.wrong += 1
        else:
            self.errors[str(verdict.error_kind)] += 1
