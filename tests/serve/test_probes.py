"""`/healthz` and `/readyz` of a real server on a real PostgreSQL: locked, stopped, back.

The probes need no token and hold no tenant's data; `/readyz` follows the store (503
while it does not answer its background probe), and both answer during the stall.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.requests import Request

from conftest import PostgresDatabase, StoreFactory
from replica_support import NO_STORE_TIMEOUT, locked_table, metric, origin, request, wait_until
from testkit.server import HttpServer
from testkit.tokens import Issuer
from ticket_tools import fixture_records
from ticket_tools.serve import probes
from ticket_tools.serve.probes import Readiness
from ticket_tools.serve.workers import StoreCalls, WorkerLimits
from ticket_tools.store import DictStore
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.tickets import Ticket

HEALTHY = (200, {"status": "ok"})
READY = (200, {"status": "ready"})
NOT_READY = (503, {"status": "store unavailable"})
READYZ = Request({"type": "http", "method": "GET", "path": "/readyz", "headers": []})


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JWKS file: the probes never read a token, but the server needs one to start."""
    path = tmp_path_factory.mktemp("probes") / "jwks.json"
    path.write_text(json.dumps(Issuer("idp").jwks()), encoding="utf-8")
    return path


@pytest.fixture
def pg(postgres_factory: StoreFactory, postgres_database: PostgresDatabase) -> PostgresDatabase:
    """The session's database, holding the fixture records."""
    postgres_factory(fixture_records())
    return postgres_database


@pytest.fixture
def server(tmp_path: Path, jwks: Path, pg: PostgresDatabase) -> Iterator[HttpServer]:
    """A stateless server on the reader role, with the default deadline."""
    started = HttpServer(tmp_path, str(jwks), "--stateless", "--postgres", pg.reader)
    yield started
    assert started.stop() == 0, started.stderr()


def probe(server: HttpServer, path: str) -> tuple[int, object]:
    """GET a probe without a token; return its status and JSON body."""
    status, _, body = request(f"{origin(server.url)}{path}", timeout=NO_STORE_TIMEOUT)
    return status, json.loads(body)


def test_the_probes_follow_a_locked_table_and_come_back(
    server: HttpServer, pg: PostgresDatabase
) -> None:
    wait_until(lambda: probe(server, "/readyz") == READY, "ready after the start")
    assert probe(server, "/healthz") == HEALTHY
    with locked_table(pg.superuser):
        wait_until(lambda: probe(server, "/readyz") == NOT_READY, "not ready while locked")
        # Answered from the last probe's result while the store stalls.
        assert probe(server, "/healthz") == HEALTHY
        assert metric(origin(server.url), "ticket_tools_ready") == 0
    wait_until(lambda: probe(server, "/readyz") == READY, "ready once the lock is gone")
    assert metric(origin(server.url), "ticket_tools_ready") == 1
    log = server.stderr()
    assert "the store did not answer its readiness probe (timeout)" in log
    assert "the store answers its readiness probe again" in log


def test_the_probes_follow_a_stopped_database_and_come_back(
    server: HttpServer, pg: PostgresDatabase
) -> None:
    wait_until(lambda: probe(server, "/readyz") == READY, "ready after the start")
    pg.cluster.stop()
    try:
        wait_until(lambda: probe(server, "/readyz") == NOT_READY, "not ready while stopped")
        assert probe(server, "/healthz") == HEALTHY
    finally:
        pg.cluster.start()
    wait_until(lambda: probe(server, "/readyz") == READY, "ready once restarted")


class _SchemaGone(DictStore):
    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        raise StoreFailure("schema", "no tickets table")


def test_a_probe_that_fails_otherwise_logs_once_and_a_stale_answer_is_not_ready(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]

    async def run() -> list[bool]:
        calls = StoreCalls(WorkerLimits())
        good = Readiness(fixture_records(), calls, clock=lambda: now[0])
        bad = Readiness(_SchemaGone(fixture_records()), calls, clock=lambda: now[0])
        seen = [good.ready()]  # no probe yet
        await good.probe()
        seen.append(good.ready())
        now[0] += probes.PROBE_FRESH_SECONDS + 1
        seen.append(good.ready())  # the last answer is too old
        await bad.probe()
        await bad.probe()
        seen.append(bad.ready())
        calls.close()
        return seen

    with caplog.at_level(logging.WARNING, logger="ticket_tools.serve.probes"):
        assert anyio.run(run) == [False, True, False, False]
    assert [record.getMessage() for record in caplog.records] == [
        "the store did not answer its readiness probe (error)"
    ]


class _Lagging(DictStore):
    """A store whose staleness is whatever the test last set."""

    def __init__(self) -> None:
        super().__init__(fixture_records())
        self.behind = 0.0

    def staleness_seconds(self) -> float:
        return self.behind


def test_a_store_past_max_staleness_is_not_ready_and_each_change_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _Lagging()

    async def run() -> list[tuple[bool, float, object]]:
        calls = StoreCalls(WorkerLimits())
        readiness = Readiness(store, calls, max_staleness=2.0)
        seen: list[tuple[bool, float, object]] = []
        for behind in (0.0, 2.0, 2.5, 7.0, math.inf, 1.0):
            store.behind = behind
            await readiness.probe()
            answer = await readiness.readyz(READYZ)
            seen.append((readiness.ready(), readiness.staleness, json.loads(bytes(answer.body))))
        readiness.draining = True
        answer = await readiness.readyz(READYZ)
        seen.append((readiness.ready(), readiness.staleness, json.loads(bytes(answer.body))))
        calls.close()
        return seen

    with caplog.at_level(logging.WARNING, logger="ticket_tools.serve.probes"):
        assert anyio.run(run) == [
            (True, 0.0, {"status": "ready"}),
            (True, 2.0, {"status": "ready"}),  # "past" it: at it is still ready
            (False, 2.5, {"status": "store stale"}),
            (False, 7.0, {"status": "store stale"}),
            (False, math.inf, {"status": "store stale"}),  # unknown counts as past any bound
            (True, 1.0, {"status": "ready"}),
            (False, 1.0, {"status": "draining"}),  # the drain says why first
        ]
    assert [record.getMessage() for record in caplog.records] == [
        "the store is behind its primary past --max-staleness",
        "the store is within --max-staleness of its primary again",
    ]


def test_before_any_probe_the_staleness_is_not_a_number_and_the_default_bound_is_30_s() -> None:
    calls = StoreCalls(WorkerLimits())
    readiness = Readiness(fixture_records(), calls)
    calls.close()
    assert (math.isnan(readiness.staleness), probes.DEFAULT_MAX_STALENESS_SECONDS) == (True, 30.0)
