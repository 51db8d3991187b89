"""A reader whose standby freezes (SIGSTOP: a partition) moves to the primary in one deadline.

A primary and one hot standby; the reader's DSN prefers a standby and picks hosts at
random, as `serve http` would be given. The standby's replay is paused and the primary
given a newer title, so each answer names its host: OLD from the standby, NEW from the
primary. While the standby is frozen, its connections hang; the tests assert on outcomes
and counts only, never on time, each count following from the deadline (below).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import pytest

from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters
from ticket_tools.serve.workers import StoreCalls, StoreUnavailable, WorkerLimits
from ticket_tools.stores import StoreFailure
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.tickets import Ticket

OWNER = "ticket_owner"
READER = "ticket_reader"
TENANTS = [f"t{n}" for n in range(8)]
OLD: Ticket = {"id": "TKT-101", "title": "old", "status": "open"}
NEW: Ticket = {"id": "TKT-101", "title": "new", "status": "open"}
# Only reached when a reader never moves: the tests never wait for time to pass.
GIVE_UP_CALLS = 60
RECORDS = {f"{tenant}:TKT-101": {**OLD, "tenant": tenant} for tenant in TENANTS}


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets(RECORDS) as pair:
        yield pair


@pytest.fixture
def dsn(clusters: ReplicatedClusters) -> Iterator[str]:
    """The reader's DSN, the standby's replay paused with the primary one title ahead."""
    standby, primary = clusters.standbys[0], clusters.primary
    clusters.wait_replayed()
    standby.sql("SELECT pg_wal_replay_pause()")
    primary.sql("UPDATE tickets SET title = 'new'", dbname="tickets")
    yield (
        f"host={standby.root},{primary.root} dbname=tickets user={READER} "
        "target_session_attrs=prefer-standby load_balance_hosts=random"
    )
    standby.sql("SELECT pg_wal_replay_resume()")
    primary.sql("UPDATE tickets SET title = 'old'", dbname="tickets")


def _outcome(store: PostgresStore, tenant: str) -> Ticket | str | None:
    try:
        return store.get(tenant, "TKT-101")
    except StoreFailure as error:
        return error.reason


def test_one_call_fails_then_the_next_answers_from_the_primary(
    clusters: ReplicatedClusters, dsn: str
) -> None:
    # One caller, one call at a time. The call in flight at the freeze waits out its
    # deadline (timeout + FROZEN_GRACE) and fails as unavailable; before its connection goes
    # back, the standby is left out and the pool drained, so the next call connects to the
    # primary, with its whole timeout to do it: 3 s, where connecting takes milliseconds.
    with PostgresStore.open(dsn, timeout=3.0) as store:
        assert _outcome(store, "t0") == OLD  # from the standby
        with clusters.standbys[0].frozen():
            outcomes = [_outcome(store, "t0")]
            while outcomes[-1] != NEW and len(outcomes) < GIVE_UP_CALLS:
                outcomes.append(_outcome(store, "t0"))
            outcomes += [_outcome(store, tenant) for tenant in TENANTS]
    assert outcomes == ["unavailable", NEW, *[NEW] * len(TENANTS)]


def _store_threads(other: frozenset[int | None]) -> int:
    """Count the store worker threads running now, but those in `other` (another test's)."""
    return sum(
        thread.name == "ticket-tools-store" and thread.ident not in other
        for thread in threading.enumerate()
    )


def _store_thread_idents() -> frozenset[int | None]:
    return frozenset(t.ident for t in threading.enumerate() if t.name == "ticket-tools-store")


def test_under_serves_deadline_and_workers_each_caller_fails_at_most_twice(
    clusters: ReplicatedClusters, dsn: str
) -> None:
    # Eight callers, one per tenant, through StoreCalls with serve's defaults (a 2 s deadline,
    # 4 workers) on a store opened as `serve http` opens it. Every call fails no sooner than
    # the deadline D (waiting for a worker counts), and calls fail only while the frozen
    # connections are out: until D + FROZEN_GRACE (0.5 s) after the freeze, plus the
    # reconnect to the primary. So a caller's calls fail at most ceil((D + 0.5 + c) / D) = 2
    # times for a reconnect c under 1.5 s (1 in practice), and never answer wrongly; no
    # store thread beyond the workers and the probe's ever starts.
    limits = WorkerLimits()
    assert limits.timeout is not None
    # Earlier tests' pools may still have idle workers ending: only this test's are counted.
    other = _store_thread_idents()
    calls = StoreCalls(limits)
    store = PostgresStore.open(dsn, timeout=limits.timeout, max_connections=limits.workers)
    seen: dict[str, list[Ticket | str | None]] = {tenant: [] for tenant in TENANTS}
    threads: list[int] = []

    async def caller(tenant: str) -> None:
        outcomes = seen[tenant]
        while NEW not in outcomes and len(outcomes) < GIVE_UP_CALLS:
            try:
                outcomes.append(await calls.run(tenant, lambda: store.get(tenant, "TKT-101")))
            except StoreUnavailable:
                outcomes.append("unavailable")
            threads.append(_store_threads(other))

    async def warm(tenant: str) -> None:
        assert await calls.run(tenant, lambda: store.get(tenant, "TKT-101")) == OLD

    async def run() -> None:
        async with anyio.create_task_group() as group:  # the pool grows, on the standby
            for tenant in TENANTS:
                group.start_soon(warm, tenant)
        with clusters.standbys[0].frozen():
            async with anyio.create_task_group() as group:
                for tenant in TENANTS:
                    group.start_soon(caller, tenant)

    try:
        anyio.run(run)
    finally:
        calls.close()
        store.close()
    # Each caller: "unavailable" once or twice (or not at all), then the primary's answer.
    failures: list[list[Ticket | str | None]] = [[], ["unavailable"], ["unavailable"] * 2]
    assert {tenant: (o[-1], o[:-1] in failures) for tenant, o in seen.items()} == dict.fromkeys(
        TENANTS, (NEW, True)
    )
    assert max(threads) <= limits.workers + 1
