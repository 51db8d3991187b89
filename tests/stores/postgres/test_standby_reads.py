"""A reader store on a multi-host DSN preferring a standby: reads there, moves on its loss."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters
from ticket_tools import TicketFilter
from ticket_tools.stores import StoreFailure, index_writes
from ticket_tools.stores.feed import Change
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter
from ticket_tools.tickets import Ticket

OWNER = "ticket_owner"
READER = "ticket_reader"
RECORDS = {
    "alpha:TKT-101": {"id": "TKT-101", "tenant": "alpha", "title": "Jam", "status": "open"},
    "beta:TKT-101": {"id": "TKT-101", "tenant": "beta", "title": "VPN", "status": "open"},
}
# Generous: a loaded 2-core machine; the test asserts what happens, never how fast.
DEADLINE_SECONDS = 60
SET_CLOSED = "UPDATE tickets SET status = 'closed' WHERE tenant = 'alpha' AND id = 'TKT-101'"
SET_PENDING = "UPDATE tickets SET title = 'Jam again' WHERE tenant = 'alpha' AND id = 'TKT-101'"


@pytest.fixture
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets(RECORDS) as pair:
        yield pair


def _poll(store: PostgresStore, expected: Ticket) -> list[str]:
    """Read until `expected` shows; return the failure reasons met on the way."""
    reasons: list[str] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            if store.get("alpha", "TKT-101") == expected:
                return reasons
        except StoreFailure as error:
            reasons.append(error.reason)
        assert time.monotonic() < deadline, f"not seen in {DEADLINE_SECONDS} s: {expected}"
        time.sleep(0.05)


def test_prefer_standby_reads_the_standby_then_the_primary_when_it_stops(
    clusters: ReplicatedClusters,
) -> None:
    standby = clusters.standbys[0]
    dsn = (
        f"host={standby.root},{clusters.primary.root} dbname=tickets user={READER} "
        "target_session_attrs=prefer-standby"
    )
    store = PostgresStore.open(dsn)
    try:
        assert store.get("beta", "TKT-101") == {"id": "TKT-101", "title": "VPN", "status": "open"}
        # Replay paused: a read that still sees the old row came from the standby.
        standby.sql("SELECT pg_wal_replay_pause()")
        clusters.primary.sql(SET_CLOSED, dbname="tickets")
        assert store.get("alpha", "TKT-101") == {"id": "TKT-101", "title": "Jam", "status": "open"}
        standby.sql("SELECT pg_wal_replay_resume()")
        closed: Ticket = {"id": "TKT-101", "title": "Jam", "status": "closed"}
        assert _poll(store, closed) == []
        # The standby gone: the calls move to the primary, failing meanwhile only retryably.
        standby.stop()
        clusters.primary.sql(SET_PENDING, dbname="tickets")
        reasons = _poll(store, {"id": "TKT-101", "title": "Jam again", "status": "closed"})
        assert set(reasons) <= {"unavailable"}
    finally:
        store.close()


def test_a_change_committed_on_the_primary_is_searchable_on_the_standby(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The index is written in the change's own transaction: replayed with it, whole.
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
    with replicated_tickets(RECORDS) as pair:
        standby = pair.standbys[0]
        reader = f"host={standby.root} dbname=tickets user={READER}"
        with (
            PostgresStore.open(reader) as store,
            PostgresWriter.open(f"host={pair.primary.root} dbname=tickets user={OWNER}") as writer,
        ):
            search = TicketFilter(text="kerberos")
            assert store.find("alpha", search, limit=None) == []
            standby.sql("SELECT pg_wal_replay_pause()")
            writer.apply([Change("upsert", "alpha", "TKT-102", 1, "Kerberos fails", "open")])
            assert store.find("alpha", search, limit=None) == []
            standby.sql("SELECT pg_wal_replay_resume()")
            pair.wait_replayed()
            assert store.find("alpha", search, limit=None) == [
                {"id": "TKT-102", "title": "Kerberos fails", "status": "open"}
            ]
