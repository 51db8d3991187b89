"""Changes for the writers' tests, and the version rule every writer must follow.

`up` and `delete` build the `Change`s that `parse_change` would; `check_the_version_rule`
is the one sequence of point 1 of docs/feed.md that the SQLite and PostgreSQL writers'
tests both run, on the fixture tickets as imported (every ticket at version 0).
"""

from __future__ import annotations

from ticket_tools.cli.apply import FeedWriter
from ticket_tools.store import TicketStore
from ticket_tools.stores.feed import Change, Counts


def up(ticket_id: str, version: int, title: str = "t", tenant: str = "alpha") -> Change:
    """Return an upsert of an open ticket."""
    return Change("upsert", tenant, ticket_id, version, title, "open")


def delete(ticket_id: str, version: int, tenant: str = "alpha") -> Change:
    """Return a delete."""
    return Change("delete", tenant, ticket_id, version)


def check_the_version_rule(writer: FeedWriter, store: TicketStore) -> None:
    """Per key the highest version wins, and a tombstone's version holds (alpha's TKT-101, 102)."""
    # Imported tickets are at version 0: an upsert at 0 is stale.
    assert writer.apply([up("TKT-101", 0, "old")]) == Counts(0, 0, 1)
    assert writer.apply([up("TKT-101", 5, "Login works again")]) == Counts(1, 0, 0)
    assert store.get("alpha", "TKT-101") == {
        "id": "TKT-101",
        "title": "Login works again",
        "status": "open",
    }
    assert writer.apply([up("TKT-101", 3, "older")]) == Counts(0, 0, 1)
    assert writer.apply([delete("TKT-102", 8)]) == Counts(0, 1, 0)
    assert store.get("alpha", "TKT-102") is None
    # The tombstone's version holds: an older upsert does not bring it back.
    assert writer.apply([up("TKT-102", 7), delete("TKT-102", 8)]) == Counts(0, 0, 2)
    assert store.get("alpha", "TKT-102") is None
    assert writer.apply([up("TKT-102", 9, "back")]) == Counts(1, 0, 0)
    assert store.get("alpha", "TKT-102") == {"id": "TKT-102", "title": "back", "status": "open"}
