"""Where the tools read tickets from: an interface, and the contract's plain dict behind it."""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Mapping
from operator import itemgetter

from ticket_tools.filters import TicketFilter
from ticket_tools.tickets import Ticket, public_view

Records = Mapping[str, Mapping[str, object]]
"""The contract's store: "tenant:TKT-123" -> stored ticket (internal fields allowed)."""


def tenant_of(key: str) -> str:
    """Return the tenant a store key belongs to: everything before its last ":".

    "alpha:TKT-101" is alpha's; "alpha:x:TKT-001" belongs to tenant "alpha:x", not to
    "alpha", although it starts with "alpha:": a deviation from the brief's step 1 (README).
    """
    return key.rpartition(":")[0]


class TicketStore(ABC):
    """A read-only ticket store. Every method is scoped by a tenant from trusted context."""

    @abstractmethod
    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of one of `tenant`'s tickets, or None."""

    @abstractmethod
    def find(self, tenant: str, where: TicketFilter, *, limit: int) -> list[Ticket]:
        """Return the first `limit` of `tenant`'s tickets matching `where`, by id."""


class DictStore(TicketStore):
    """The contract's `records` mapping, read in place and never modified."""

    def __init__(self, records: Records) -> None:
        self._records = records

    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of the ticket stored under "tenant:ticket_id", or None."""
        stored = self._records.get(f"{tenant}:{ticket_id}")
        return None if stored is None else public_view(stored)

    def find(self, tenant: str, where: TicketFilter, *, limit: int) -> list[Ticket]:
        """Make one pass over the mapping, then keep the `limit` lowest ids.

        A plain mapping has no index, so the pass is the irreducible cost; the
        heap keeps the sort at O(matches log limit) instead of sorting them all.
        """
        matches = [
            stored
            for key, stored in self._records.items()
            if tenant_of(key) == tenant and where.matches(stored)
        ]
        lowest = heapq.nsmallest(limit, matches, key=itemgetter("id"))
        return [public_view(stored) for stored in lowest]
