"""Store calls off the event loop, with a deadline: a real server on a real PostgreSQL.

The table is locked from a superuser connection (every read waits) or the cluster is
stopped; meanwhile calls that need no store must be answered, and store calls must fail
as `unavailable` (a tool error the model can retry), never hang or look like a bug.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import PostgresDatabase, StoreFactory
from expected import T104, TOOL_NAMES
from replica_support import (
    NO_STORE_TIMEOUT,
    call,
    locked_table,
    metric,
    origin,
    request,
    rpc,
    wait_until,
)
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.serve.workers import StoreCalls, StoreUnavailable, WorkerLimits
from ticket_tools.stores.failure import StoreError, StoreFailure

GET_104 = {"ticket_id": "TKT-104"}
UNAVAILABLE = {
    "content": [
        {
            "type": "text",
            "text": "unavailable: the ticket store did not answer in time; "
            "retry the call in a few seconds",
        }
    ],
    "structuredContent": {
        "ok": False,
        "code": "unavailable",
        "detail": "the ticket store did not answer in time; retry the call in a few seconds",
    },
    "isError": True,
}


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the server trusts."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    """The provider's JWKS file."""
    path = tmp_path_factory.mktemp("workers") / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.fixture
def pg(postgres_factory: StoreFactory, postgres_database: PostgresDatabase) -> PostgresDatabase:
    """The session's database, holding the fixture records."""
    postgres_factory(fixture_records())
    return postgres_database


@pytest.fixture
def server(tmp_path: Path, jwks: Path, pg: PostgresDatabase) -> Iterator[HttpServer]:
    """A stateless server on the reader role, with the default limits."""
    started = HttpServer(tmp_path, str(jwks), "--stateless", "--postgres", pg.reader)
    yield started
    assert started.stop() == 0, started.stderr()


def _no_store_answers(url: str, alice: str, reader_without_scope: str) -> list[Any]:
    """Return the answers to four calls that need no store, each with a short timeout."""
    kw = {"timeout": NO_STORE_TIMEOUT}
    status, _, body = request(url, rpc("tools/list"), bearer=alice, **kw)
    names = [tool["name"] for tool in json.loads(body)["result"]["tools"]]
    unknown = call(url, alice, "list_tickets", {}, **kw)
    invalid = call(url, alice, "get_ticket", {"ticket_id": "104"}, **kw)["structuredContent"]
    forbidden = call(url, reader_without_scope, "get_ticket", GET_104, **kw)["structuredContent"]
    return [(status, names), unknown["code"], invalid["code"], forbidden["code"]]


def test_calls_that_need_no_store_are_answered_while_the_table_is_locked(
    server: HttpServer, pg: PostgresDatabase, idp: Issuer
) -> None:
    alice = idp.sign(claims("alpha", "alice"))
    without_scope = idp.sign(claims("alpha", "alan", scope="openid"))
    base = origin(server.url)
    with locked_table(pg.superuser), ThreadPoolExecutor(4) as pool:
        stalled = [pool.submit(call, server.url, alice, "get_ticket", GET_104) for _ in range(4)]
        # All four are inside the server, waiting on the store (two on workers, two for
        # alpha's share), before the calls that need no store are sent.
        wait_until(
            lambda: metric(base, "ticket_tools_store_calls_in_flight") == 4, "4 calls in flight"
        )
        answers = _no_store_answers(server.url, alice, without_scope)
        results = [future.result() for future in stalled]
    assert answers == [
        (200, list(TOOL_NAMES)),
        -32602,
        "invalid_arguments",
        "forbidden",
    ]
    assert results == [UNAVAILABLE] * 4
    assert call(server.url, alice, "get_ticket", GET_104)["structuredContent"] == {
        "ok": True,
        "ticket": T104,
    }


def test_a_store_call_past_the_deadline_is_unavailable_and_may_be_retried(
    server: HttpServer, pg: PostgresDatabase, idp: Issuer
) -> None:
    alice = idp.sign(claims("alpha", "alice"))
    with locked_table(pg.superuser):
        failed = call(server.url, alice, "get_ticket", GET_104)
    retried = call(server.url, alice, "get_ticket", GET_104)
    assert (failed, retried["structuredContent"]) == (UNAVAILABLE, {"ok": True, "ticket": T104})
    base = origin(server.url)
    assert metric(base, "ticket_tools_store_errors_total", reason="timeout") == 1
    calls = "ticket_tools_tool_calls_total"
    assert metric(base, calls, tool="get_ticket", code="unavailable") == 1
    assert [line["code"] for line in server.audit_lines()] == ["unavailable", "ok"]


def test_a_stopped_database_is_unavailable_then_answers_again(
    server: HttpServer, pg: PostgresDatabase, idp: Issuer
) -> None:
    alice = idp.sign(claims("alpha", "alice"))
    pg.cluster.stop()
    try:
        failed = call(server.url, alice, "search_tickets", {"limit": 1})
    finally:
        pg.cluster.start()
    assert failed["structuredContent"]["code"] == "unavailable"

    def answers() -> bool:
        got = call(server.url, alice, "get_ticket", GET_104)["structuredContent"]
        return bool(got == {"ok": True, "ticket": T104})

    wait_until(answers, "a call answered after the restart")


@pytest.mark.parametrize(
    ("error", "counted"),
    [
        pytest.param(
            StoreFailure("schema", "no ticket table"), ["schema"], id="a-failure-counted-by-reason"
        ),
        # A store outside the stores layer gives no reason: nothing to count, nor to retry.
        pytest.param(StoreError("no ticket table"), [], id="a-plain-store-error"),
    ],
)
def test_a_non_retryable_store_error_stays_an_internal_error(
    error: StoreError, counted: list[str]
) -> None:
    def schema_gone() -> None:
        raise error

    errors: list[str] = []

    async def run() -> None:
        calls = StoreCalls(WorkerLimits(), on_store_error=errors.append)
        with pytest.raises(StoreError) as raised:
            await calls.run("alpha", schema_gone)
        assert raised.value is error
        calls.close()

    anyio.run(run)
    assert errors == counted


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("workers", 0, id="no-workers"),
        pytest.param("tenant_calls", 0, id="no-share"),
        pytest.param("workers", 1.5, id="workers-a-float"),
        pytest.param("timeout", 0.0, id="zero-timeout"),
        pytest.param("timeout", float("inf"), id="endless-timeout"),
    ],
)
def test_worker_limits_refuse_values_that_break_their_rule(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        WorkerLimits(**{field: value})  # type: ignore[arg-type]


def test_a_share_waits_for_its_tenant_and_a_cut_off_fails_what_waits() -> None:
    """With a share of one, alpha's second call waits; beta's does not; the cut-off ends both."""

    async def run() -> dict[str, object]:
        calls = StoreCalls(WorkerLimits(workers=2, tenant_calls=1, timeout=None))
        gate = threading.Event()
        got: dict[str, object] = {}

        def slow() -> str:
            gate.wait()
            return "slow"

        async def alpha(label: str, work: Callable[[], str]) -> None:
            try:
                got[label] = await calls.run("alpha", work)
            except StoreUnavailable as error:
                got[label] = error.reason

        async with anyio.create_task_group() as group:
            group.start_soon(alpha, "first", slow)
            await wait_for(lambda: calls.busy == 1)
            group.start_soon(alpha, "second", lambda: "second")
            await wait_for(lambda: calls.in_flight == 2)
            got["beta"] = await calls.run("beta", lambda: "beta")  # alpha's wait holds no worker
            got["busy"] = calls.busy
            calls.cut_off()
            await wait_for(lambda: len(got) == 4)
            gate.set()
        with pytest.raises(StoreUnavailable):
            await calls.run("beta", lambda: "after")
        await wait_for(lambda: calls.busy == 0)
        calls.close()
        return got

    assert anyio.run(run) == {"beta": "beta", "busy": 1, "first": "draining", "second": "draining"}


async def wait_for(check: Callable[[], bool]) -> None:
    """Yield to the other tasks until `check` holds."""
    with anyio.fail_after(30):
        while not check():
            await anyio.sleep(0.01)
