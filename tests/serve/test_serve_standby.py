"""`serve http` and `serve stdio` on a multi-host DSN: reads on the standby, the primary after it.

Real servers (subprocesses) on a primary and one hot standby, given the reader DSN of
docs/postgres.md: `target_session_attrs=prefer-standby load_balance_hosts=random`. The
standby's replay is paused and the primary given a newer title, so each answer names its
host: OLD from the standby, NEW from the primary. Then the standby stops: the server's
calls move to the primary, failing meanwhile only with the retryable "unavailable".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from live_servers import HttpCaller, StdioServer
from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.serve.server import UNAVAILABLE_DETAIL

OWNER = "ticket_owner"
READER = "ticket_reader"
OLD = {"id": "TKT-101", "title": "old", "status": "open"}
NEW = {"id": "TKT-101", "title": "new", "status": "open"}
UNAVAILABLE = {"ok": False, "code": "unavailable", "detail": UNAVAILABLE_DETAIL}
# Only reached when a server never moves: the tests never wait for time to pass.
GIVE_UP_CALLS = 200


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets({"alpha:TKT-101": {**OLD, "tenant": "alpha"}}) as pair:
        yield pair


@pytest.fixture
def dsn(clusters: ReplicatedClusters) -> Iterator[str]:
    """The reader's DSN; the standby running, its replay paused, the primary one title ahead."""
    standby, primary = clusters.standbys[0], clusters.primary
    if not standby.running():
        standby.start()
    clusters.wait_replayed()
    standby.sql("SELECT pg_wal_replay_pause()")
    primary.sql("UPDATE tickets SET title = 'new'", dbname="tickets")
    yield (
        f"host={standby.root},{primary.root} dbname=tickets user={READER} "
        "target_session_attrs=prefer-standby load_balance_hosts=random"
    )
    if standby.running():
        standby.sql("SELECT pg_wal_replay_resume()")
    primary.sql("UPDATE tickets SET title = 'old'", dbname="tickets")


def _moves_to_the_primary(clusters: ReplicatedClusters, call: Callable[[], object]) -> None:
    assert call() == {"ok": True, "ticket": OLD}  # the standby answers
    clusters.standbys[0].stop()
    outcomes = [call()]
    while outcomes[-1] != {"ok": True, "ticket": NEW} and len(outcomes) < GIVE_UP_CALLS:
        outcomes.append(call())
    # Any number of "unavailable" (none in our runs: the lost connection is replaced within
    # the call), then the primary, and it stays there.
    outcomes += [call(), call()]
    failed = len(outcomes) - 3
    assert outcomes == [UNAVAILABLE] * failed + [{"ok": True, "ticket": NEW}] * 3


def test_serve_http_reads_the_standby_then_the_primary_when_it_stops(
    clusters: ReplicatedClusters, dsn: str, tmp_path: Path
) -> None:
    idp = Issuer("standby")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    server = HttpServer(tmp_path / "server", jwks, "--stateless", "--postgres", dsn)
    caller = HttpCaller(server, idp.sign(claims("alpha", "standby-user")))
    try:
        _moves_to_the_primary(clusters, lambda: caller.call("get_ticket", {"ticket_id": "TKT-101"}))
    finally:
        assert server.stop() == 0, server.stderr()


def test_serve_stdio_reads_the_standby_then_the_primary_when_it_stops(
    clusters: ReplicatedClusters, dsn: str
) -> None:
    server = StdioServer("--postgres", dsn)
    try:
        _moves_to_the_primary(clusters, lambda: server.call("get_ticket", {"ticket_id": "TKT-101"}))
    finally:
        assert server.stop() == 0
