"""testkit's primary and hot standbys: physical copies, roles and forced row-level security kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from testkit.postgres import (
    ReplicatedClusters,
    ThrowawayCluster,
    _children,
    create_tickets,
    replicated,
)

OWNER = "ticket_owner"
READER = "ticket_reader"
RECORDS = {
    "alpha:TKT-101": {"id": "TKT-101", "tenant": "alpha", "title": "Printer jam", "status": "open"},
    "beta:TKT-102": {"id": "TKT-102", "tenant": "beta", "title": "VPN down", "status": "closed"},
    "alpha:TKT-103": {
        "id": "TKT-103",
        "tenant": "alpha",
        "title": "Mail bounce",
        "status": "closed",
    },
}


def _setup(primary: ThrowawayCluster) -> None:
    create_tickets(primary, RECORDS, owner=OWNER, reader=READER)


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated(2, _setup) as pair:
        yield pair
    assert not any(Path(c.root).exists() for c in (pair.primary, *pair.standbys))


def _unscoped_read(dsn: str, tenant: str) -> list[tuple[str, str]]:
    """Read every row with no tenant condition: only the policy stands in the way."""
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT set_config('app.tenant', %s, false)", (tenant,))
        rows = connection.execute("SELECT tenant, id FROM tickets ORDER BY id").fetchall()
        return [(row[0], row[1]) for row in rows]


@pytest.mark.parametrize(
    "index", [pytest.param(0, id="standby-1"), pytest.param(1, id="standby-2")]
)
def test_each_standby_is_read_only_in_recovery(clusters: ReplicatedClusters, index: int) -> None:
    standby = clusters.standbys[index]
    assert standby.sql("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')") == (
        "t|on"
    )
    assert clusters.primary.sql("SELECT pg_is_in_recovery()") == "f"


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        pytest.param("alpha", [("alpha", "TKT-101"), ("alpha", "TKT-103")], id="alpha"),
        pytest.param("beta", [("beta", "TKT-102")], id="beta"),
        pytest.param("gamma", [], id="unknown-tenant"),
    ],
)
def test_a_reader_on_a_standby_sees_only_its_tenant(
    clusters: ReplicatedClusters, tenant: str, expected: list[tuple[str, str]]
) -> None:
    for standby in clusters.standbys:
        assert _unscoped_read(standby.dsn(READER, "tickets"), tenant) == expected


def test_a_commit_on_the_primary_is_replayed_on_every_standby(
    clusters: ReplicatedClusters,
) -> None:
    # As the superuser: the owner, too, is under the forced policy.
    clusters.primary.sql(
        "UPDATE tickets SET title = 'Printer fixed' WHERE id = 'TKT-101'", dbname="tickets"
    )
    clusters.wait_replayed()
    for standby in clusters.standbys:
        titles = standby.sql("SELECT title FROM tickets WHERE id = 'TKT-101'", dbname="tickets")
        assert titles == "Printer fixed"


def test_a_stopped_standby_is_skipped_when_waiting(clusters: ReplicatedClusters) -> None:
    last = clusters.standbys[-1]
    last.stop()
    clusters.primary.sql(
        "UPDATE tickets SET status = 'open' WHERE id = 'TKT-102'", dbname="tickets"
    )
    clusters.wait_replayed()
    first = clusters.standbys[0]
    assert first.sql("SELECT status FROM tickets WHERE id = 'TKT-102'", dbname="tickets") == "open"
    assert not last.running()


def test_a_standby_that_never_catches_up_times_out() -> None:
    with replicated(1) as pair:
        pair.standbys[0].sql("SELECT pg_wal_replay_pause()")
        pair.primary.sql("CREATE TABLE later (n int)")
        with pytest.raises(TimeoutError, match=r"^a standby did not replay up to .* in 0\.5 s$"):
            pair.wait_replayed(timeout=0.5)


def _states(cluster: ThrowawayCluster) -> set[str]:
    """Return the process states of the server and its children ('T': stopped)."""
    postmaster = cluster.pid()
    return {
        Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        for pid in (postmaster, *_children(postmaster))
    }


def test_a_frozen_standby_is_stopped_whole_then_resumed(clusters: ReplicatedClusters) -> None:
    standby = clusters.standbys[0]
    with standby.frozen():
        assert _states(standby) == {"T"}
    assert "T" not in _states(standby)
    assert standby.sql("SELECT pg_is_in_recovery()") == "t"


def test_a_promoted_standby_takes_writes_and_keeps_the_policy() -> None:
    with replicated(1, _setup) as pair:
        standby = pair.standbys[0]
        pair.primary.stop()
        standby.promote()
        assert standby.sql("SELECT pg_is_in_recovery()") == "f"
        standby.sql("UPDATE tickets SET title = 'After' WHERE id = 'TKT-101'", dbname="tickets")
        assert _unscoped_read(standby.dsn(READER, "tickets"), "beta") == [("beta", "TKT-102")]
        title = standby.sql("SELECT title FROM tickets WHERE id = 'TKT-101'", dbname="tickets")
        assert title == "After"
