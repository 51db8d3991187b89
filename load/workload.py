"""What one simulated assistant calls: page walks, ticket reads, and a share of invalid calls.

A client holds one walk at a time: a filter, an optional start cursor and a page size. Each
page call carries the cursor the previous page returned; the walk moves on only when a page
arrives, so a call that failed (a replica gone, the database down) is sent again with the
same cursor, to whichever replica answers. The plan is deterministic for a given seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from load.records import QUERY_WORDS, tenant_name

INVALID_SHARE = 0.10
GET_SHARE = 0.30
# Walks that start from a cursor instead of the first page.
CURSOR_START_SHARE = 0.25
# Argument sets the contract refuses before any store read, plus an unknown tool.
INVALID_CALLS: tuple[tuple[str, dict[str, object]], ...] = (
    ("search_tickets", {"limit": 11}),
    ("search_tickets", {"limit": 0}),
    ("search_tickets", {"limit": True}),
    ("search_tickets", {"status": "pending"}),
    ("search_tickets", {"cursor": "TKT-\u0663\u0664\u0665"}),
    ("search_tickets", {"tenant": "t001"}),
    ("get_ticket", {"ticket_id": "TKT-1234"}),
    ("get_ticket", {"ticket_id": "t001:TKT-001"}),
    ("get_ticket", {}),
    ("delete_ticket", {"ticket_id": "TKT-001"}),
)
ID_SPACE = 1_000  # TKT-000 .. TKT-999


@dataclass(frozen=True)
class Call:
    """One tool call as the model would send it."""

    name: str
    args: dict[str, object]
    walk: int | None = None
    """The walk this call is a page of, or None."""


@dataclass
class Walk:
    """A page walk in progress: its filter, where it started, and the pages seen so far."""

    number: int
    filters: dict[str, object]
    """status and/or query, as sent with every page."""
    start: str | None
    """The cursor of the first page (None: from the first ticket)."""
    limit: int | None
    """The page size sent (None: the tool's default)."""
    cursor: str | None = None
    pages: list[list[str]] = field(default_factory=list)
    """The ticket ids of each page received, in order."""
    done: bool = False
    """The last page arrived (next_cursor null) or the walk was refused."""
    refused: bool = False
    """A page came back as a failure (e.g. a token without the read scope)."""
    replicas: set[int] = field(default_factory=set)
    """The replicas that answered its pages: two means it crossed a switch."""

    def args(self) -> dict[str, object]:
        """Return the arguments of the next page call."""
        args: dict[str, object] = dict(self.filters)
        if self.limit is not None:
            args["limit"] = self.limit
        cursor = self.cursor if self.pages else self.start
        if cursor is not None:
            args["cursor"] = cursor
        return args


class ClientPlan:
    """One client's calls, drawn from its own seeded generator."""

    def __init__(self, seed: int, tenant_index: int) -> None:
        self._rng = random.Random(seed)  # noqa: S311 - a workload, not a secret
        self.tenant = tenant_name(tenant_index)
        self._other = tenant_name((tenant_index + 1) % ID_SPACE)
        self.walks: list[Walk] = []
        self._walk = self._new_walk()

    def next_call(self) -> Call:
        """Return the next call to send (a new one, never the one in flight)."""
        draw = self._rng.random()
        if draw < INVALID_SHARE:
            name, args = self._rng.choice(INVALID_CALLS)
            return Call(name, dict(args))
        if draw < INVALID_SHARE + GET_SHARE:
            return Call("get_ticket", {"ticket_id": self._random_id()})
        if self._walk.done:
            self._walk = self._new_walk()
        return Call("search_tickets", self._walk.args(), walk=self._walk.number)

    def page_received(self, call: Call, result: dict[str, object], replica: int) -> None:
        """Move the walk on with a page result (any answer that is not a failure to answer)."""
        if call.walk is None:
            return
        walk = self.walks[call.walk]
        walk.replicas.add(replica)
        tickets = result.get("tickets")
        if result.get("ok") is not True or not isinstance(tickets, list):
            walk.done = walk.refused = True  # e.g. no read scope: start another
            return
        walk.pages.append([str(ticket.get("id")) for ticket in tickets])
        next_cursor = result.get("next_cursor")
        walk.cursor = next_cursor if isinstance(next_cursor, str) else None
        walk.done = walk.cursor is None

    def _new_walk(self) -> Walk:
        rng = self._rng
        kind = rng.randrange(6)
        filters: dict[str, object] = {}
        if kind in (1, 2):
            filters["status"] = "open" if kind == 1 else "closed"
        elif kind == 3:
            filters["query"] = rng.choice(QUERY_WORDS)
        elif kind == 4:
            filters["status"] = "open"
            filters["query"] = rng.choice(QUERY_WORDS)
        elif kind == 5:
            # Another tenant's name is in each of its titles, never in ours: an empty walk,
            # unless some layer forgot whose tickets it reads.
            filters["query"] = self._other
        start = self._random_id() if rng.random() < CURSOR_START_SHARE else None
        limit = rng.choice((None, 1, 3, 5, 10))
        walk = Walk(number=len(self.walks), filters=filters, start=start, limit=limit)
        self.walks.append(walk)
        return walk

    def _random_id(self) -> str:
        return f"TKT-{self._rng.randrange(ID_SPACE):03d}"
