"""Where the tools read tickets from: an interface, and the contract's plain dict behind it."""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Mapping
from operator import itemgetter
from typing import Literal

from ticket_tools.tickets import Ticket, public_view

Records = Mapping[str, Mapping[str, object]]
"""The contract's store: "tenant:TKT-123" -> stored ticket (internal fields allowed)."""


StoreFailure = Literal["missing", "locked", "schema", "unavailable"]
"""Why a store cannot answer: no such database, another process holds a lock, the
file is not a ticket database of this schema version, or any other I/O failure."""


class StoreError(Exception):
    """The store cannot answer (an infrastructure failure, never a model mistake).

    Tool results have no code for this, so it is raised, not returned: the host
    (the CLI, a server) reports it. `reason` says which failure; never parse the text.
    """

    def __init__(self, reason: StoreFailure, message: str) -> None:
        super().__init__(message)
        self.reason: StoreFailure = reason


class TicketStore(ABC):
    """A read-only ticket store. Every method is scoped by a tenant from trusted context."""

    @abstractmethod
    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of one of `tenant`'s tickets, or None."""

    @abstractmethod
    def page(
        self,
        tenant: str,
        *,
        status: str | None,
        query: str | None,
        after: str | None,
        count: int,
    ) -> list[Ticket]:
        """Return up to `count` of `tenant`'s matching tickets with id > `after`, by id.

        `status` keeps tickets with that exact status; `query` keeps tickets whose
        title, lowercased, contains the lowercased query. None means no filter.
        """


class DictStore(TicketStore):
    """The contract's `records` mapping, read in place and never modified."""

    def __init__(self, records: Records) -> None:
        self._records = records

    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of the ticket stored under "tenant:ticket_id", or None."""
        stored = self._records.get(f"{tenant}:{ticket_id}")
        return None if stored is None else public_view(stored)

    def page(
        self,
        tenant: str,
        *,
        status: str | None,
        query: str | None,
        after: str | None,
        count: int,
    ) -> list[Ticket]:
        """Make one pass over the mapping, then keep the `count` lowest ids.

        A plain mapping has no index, so the pass is the irreducible cost; the
        heap keeps the sort at O(matches log count) instead of sorting them all.
        A key belongs to the tenant before its last ":", so "alpha:x:TKT-001"
        (tenant "alpha:x") is not one of alpha's tickets although it starts
        with "alpha:".
        """
        prefix = f"{tenant}:"
        start = len(prefix)
        needle = None if query is None else query.lower()
        matches = [
            stored
            for key, stored in self._records.items()
            if key.startswith(prefix)
            and ":" not in key[start:]
            and (status is None or stored["status"] == status)
            and (needle is None or needle in str(stored["title"]).lower())
            and (after is None or str(stored["id"]) > after)
        ]
        lowest = heapq.nsmallest(count, matches, key=itemgetter("id"))
        return [public_view(stored) for stored in lowest]
