"""How far a reader's server is behind its primary: 0 caught up (however idle), else a bound.

A primary and a hot standby on the embedded binaries, read as the real reader role (no
pg_read_all_stats). The replay is paused on the standby, as the superuser, to hold it behind.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import pytest

from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters, ThrowawayCluster
from ticket_tools.stores.postgres import store as store_module
from ticket_tools.stores.postgres.store import PostgresStore

OWNER = "ticket_owner"
READER = "ticket_reader"
RECORDS = {"alpha:TKT-101": {"id": "TKT-101", "tenant": "alpha", "title": "Jam", "status": "open"}}
COMMIT = "UPDATE tickets SET title = title || '!' WHERE tenant = 'alpha' AND id = 'TKT-101'"
REPLAY_AGE = "SELECT extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
IDLE_SECONDS = 2.0  # the primary's idle time after which the naive measure says "behind"
# Generous: a loaded 2-core machine; the tests assert values and states, never how fast.
DEADLINE_SECONDS = 60


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets(RECORDS) as pair:
        yield pair


@pytest.fixture
def fresh() -> Iterator[ReplicatedClusters]:
    """A pair whose standby has replayed no commit since it started."""
    with replicated_tickets(RECORDS) as pair:
        yield pair


def _poll(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"not seen in {DEADLINE_SECONDS} s: {what}"
        time.sleep(0.05)


def _commit_unreplayed(clusters: ReplicatedClusters) -> None:
    """Pause the standby's replay, commit on the primary, wait until the standby has it."""
    standby = clusters.standbys[0]
    standby.sql("SELECT pg_wal_replay_pause()")
    clusters.primary.sql(COMMIT, dbname="tickets")
    target = clusters.primary.sql("SELECT pg_current_wal_insert_lsn()")
    received = f"SELECT pg_last_wal_receive_lsn() >= '{target}'::pg_lsn"
    _poll(lambda: standby.sql(received) == "t", "the commit received")


def _caught_up_and_idle(clusters: ReplicatedClusters) -> None:
    """Commit, wait until replayed, then until the primary has been idle IDLE_SECONDS."""
    clusters.primary.sql(COMMIT, dbname="tickets")
    clusters.wait_replayed()
    standby = clusters.standbys[0]
    _poll(lambda: float(standby.sql(REPLAY_AGE)) > IDLE_SECONDS, "the primary idle")


def _reader(cluster: ThrowawayCluster) -> PostgresStore:
    return PostgresStore.open(cluster.dsn(READER, "tickets"))


def test_a_primary_is_never_behind(clusters: ReplicatedClusters) -> None:
    with _reader(clusters.primary) as store:
        assert store.staleness_seconds() == 0.0


def test_a_caught_up_standby_of_an_idle_primary_is_not_behind(
    clusters: ReplicatedClusters,
) -> None:
    _caught_up_and_idle(clusters)
    with _reader(clusters.standbys[0]) as store:
        assert store.staleness_seconds() == 0.0
    # The measure the issue warns about would have called it IDLE_SECONDS behind.
    assert float(clusters.standbys[0].sql(REPLAY_AGE)) > IDLE_SECONDS


def test_a_paused_standby_is_behind_since_it_was_last_seen_caught_up(
    clusters: ReplicatedClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(store_module, "_now", lambda: now[0])
    standby = clusters.standbys[0]
    _caught_up_and_idle(clusters)
    with _reader(standby) as store:
        assert store.staleness_seconds() == 0.0
        try:
            _commit_unreplayed(clusters)
            now[0] = 100.5
            # Not the last replayed commit's age (above IDLE_SECONDS): the tighter bound.
            assert store.staleness_seconds() == 0.5
        finally:
            standby.sql("SELECT pg_wal_replay_resume()")
        clusters.wait_replayed()
        assert store.staleness_seconds() == 0.0


def test_a_standby_behind_with_no_commit_replayed_since_its_start_is_unknown(
    fresh: ReplicatedClusters,
) -> None:
    standby = fresh.standbys[0]
    with _reader(standby) as store:
        try:
            _commit_unreplayed(fresh)
            assert standby.sql(REPLAY_AGE) == ""  # NULL: nothing to date the replay by
            assert store.staleness_seconds() == math.inf
        finally:
            standby.sql("SELECT pg_wal_replay_resume()")
        fresh.wait_replayed()
        assert store.staleness_seconds() == 0.0


def test_a_standby_seen_caught_up_before_its_restart_is_not_remembered(
    clusters: ReplicatedClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(store_module, "_now", lambda: now[0])
    standby = clusters.standbys[0]
    _caught_up_and_idle(clusters)
    with _reader(standby) as store:
        assert store.staleness_seconds() == 0.0
        standby.stop("fast")
        standby.start()
        try:
            _commit_unreplayed(clusters)
            now[0] = 100.5
            # Another server instance: only the replayed commit's age bounds it.
            assert store.staleness_seconds() > IDLE_SECONDS
        finally:
            standby.sql("SELECT pg_wal_replay_resume()")
        clusters.wait_replayed()
