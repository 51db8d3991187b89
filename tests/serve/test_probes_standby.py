"""`/readyz` and the staleness gauge of a real server reading a real hot standby.

A primary and a standby on the embedded binaries; the server reads the standby as the
reader role, with a small `--max-staleness`. Caught up it is ready, however long the primary
has been idle; with the standby's replay paused behind a commit it turns 503 "store stale"
and the gauge shows past the bound; resumed, ready again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from replica_support import NO_STORE_TIMEOUT, metric, origin, request, wait_until
from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters
from testkit.server import HttpServer
from testkit.tokens import Issuer
from ticket_tools.serve import probes

OWNER = "ticket_owner"
READER = "ticket_reader"
RECORDS = {"alpha:TKT-101": {"id": "TKT-101", "tenant": "alpha", "title": "Jam", "status": "open"}}
COMMIT = "UPDATE tickets SET title = title || '!' WHERE tenant = 'alpha' AND id = 'TKT-101'"
REPLAY_AGE = "SELECT extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
MAX_STALENESS = 2.0
# Idle this long, the last probe (at most a probe interval ago) already met a replayed commit
# older than MAX_STALENESS: the measure the issue warns about would have said "stale" there.
IDLE_SECONDS = MAX_STALENESS + 2 * probes.PROBE_INTERVAL_SECONDS
GAUGE = "ticket_tools_store_staleness_seconds"
READY = (200, {"status": "ready"})
STALE = (503, {"status": "store stale"})


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets(RECORDS) as pair:
        yield pair


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, clusters: ReplicatedClusters
) -> Iterator[HttpServer]:
    """A stateless server reading the standby, stale past MAX_STALENESS."""
    folder = tmp_path_factory.mktemp("standby-probes")
    jwks = folder / "jwks.json"
    jwks.write_text(json.dumps(Issuer("idp").jwks()), encoding="utf-8")
    reader = clusters.standbys[0].dsn(READER, "tickets")
    started = HttpServer(
        folder / "server", jwks, "--stateless", "--postgres", reader,
        "--max-staleness", str(MAX_STALENESS),
    )  # fmt: skip
    yield started
    assert started.stop() == 0, started.stderr()


def _readyz(server: HttpServer) -> tuple[int, object]:
    status, _, body = request(f"{origin(server.url)}/readyz", timeout=NO_STORE_TIMEOUT)
    return status, json.loads(body)


def _gauge(server: HttpServer) -> float:
    return metric(origin(server.url), GAUGE)


def test_a_caught_up_standby_of_an_idle_primary_is_ready(
    server: HttpServer, clusters: ReplicatedClusters
) -> None:
    clusters.primary.sql(COMMIT, dbname="tickets")
    clusters.wait_replayed()
    standby = clusters.standbys[0]
    wait_until(lambda: float(standby.sql(REPLAY_AGE)) > IDLE_SECONDS, "the primary idle")
    assert (_readyz(server), _gauge(server)) == (READY, 0.0)


def test_a_paused_replay_behind_a_commit_is_stale_until_resumed(
    server: HttpServer, clusters: ReplicatedClusters
) -> None:
    standby = clusters.standbys[0]
    clusters.wait_replayed()
    wait_until(lambda: _readyz(server) == READY, "ready caught up")
    standby.sql("SELECT pg_wal_replay_pause()")
    try:
        clusters.primary.sql(COMMIT, dbname="tickets")
        wait_until(lambda: _readyz(server) == STALE, "stale behind the paused replay")
        # The gauge holds the probe's figure: past the bound (it grows while paused).
        assert _gauge(server) > MAX_STALENESS
        assert metric(origin(server.url), "ticket_tools_ready") == 0
    finally:
        standby.sql("SELECT pg_wal_replay_resume()")
    wait_until(lambda: _readyz(server) == READY, "ready once resumed")
    assert (_gauge(server), metric(origin(server.url), "ticket_tools_ready")) == (0.0, 1)
    lines = [line for line in server.stderr().splitlines() if "max-staleness" in line]
    assert lines[-2:] == [
        "ticket-tools: WARNING the store is behind its primary past --max-staleness",
        "ticket-tools: WARNING the store is within --max-staleness of its primary again",
    ]
