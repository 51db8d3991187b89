"""SIGTERM drains a real server on a real PostgreSQL: not ready at once, new work refused,
calls in flight finish within the grace (or fail as unavailable past it), then exit 0."""

from __future__ import annotations

import contextlib
import gc
import json
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from conftest import PostgresDatabase, StoreFactory
from expected import T104
from replica_support import call, locked_table, metric, origin, request, rpc, wait_until
from testkit.server import STOP_TIMEOUT_SECONDS, HttpServer, ServerProcess, serve_http_command
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.serve.connections import ConnectionLimits, guarded_protocol
from ticket_tools.serve.http import listen
from ticket_tools.serve.replica import Replica, ReplicaOptions

GET_104 = {"ticket_id": "TKT-104"}
DRAINING = (503, {"status": "draining"})
REFUSED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32000, "message": "this server is shutting down; retry on another replica"},
}
CUT_OFF = "this server is shutting down; retry the call (another replica will answer)"


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    """The provider's JWKS file."""
    path = tmp_path_factory.mktemp("replica") / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.fixture
def pg(postgres_factory: StoreFactory, postgres_database: PostgresDatabase) -> PostgresDatabase:
    """The session's database, holding the fixture records."""
    postgres_factory(fixture_records())
    return postgres_database


def _ready(base: str) -> tuple[int, object]:
    status, _, body = request(f"{base}/readyz")
    return status, json.loads(body)


def _drain_during_a_stall(
    folder: Path, jwks: Path, pg: PostgresDatabase, idp: Issuer, grace: str
) -> tuple[object, Any, tuple[int, str, object], object, int]:
    """SIGTERM with one call waiting on a locked table; the lock goes once the drain is seen.

    Return what readyz said, the call's result, the new request's refusal, readyz after
    the lock went, and the exit status.
    """
    server = HttpServer(
        folder, str(jwks), "--stateless", "--postgres", pg.reader,
        "--store-timeout", "120", "--grace", grace,
    )  # fmt: skip
    base, alice = origin(server.url), idp.sign(claims("alpha", "alice"))
    wait_until(lambda: _ready(base) == (200, {"status": "ready"}), "ready")
    with ThreadPoolExecutor(1) as pool:
        with locked_table(pg.superuser):
            in_flight = pool.submit(call, server.url, alice, "get_ticket", GET_104)
            wait_until(lambda: metric(base, "ticket_tools_store_calls_in_flight") == 1, "in flight")
            server.process.send_signal(signal.SIGTERM)
            ready = _ready(base)  # at once: the signal handler turned it
            status, headers, body = request(server.url, rpc("tools/list"), bearer=alice)
            refusal = (status, headers["retry-after"], json.loads(body))
            if grace == "1":  # the call is cut off past the grace, the table still locked
                answered = in_flight.result()
        if grace != "1":  # the lock is gone: the call finishes within the grace
            answered = in_flight.result()
    exited = server.process.wait(timeout=STOP_TIMEOUT_SECONDS)
    return ready, answered, refusal, server.audit_lines()[-1]["code"], exited


def test_sigterm_lets_a_call_in_flight_finish_within_the_grace(
    tmp_path: Path, jwks: Path, pg: PostgresDatabase, idp: Issuer
) -> None:
    ready, answered, refusal, audited, exited = _drain_during_a_stall(
        tmp_path, jwks, pg, idp, "120"
    )
    assert ready == DRAINING
    assert refusal == (503, "1", REFUSED)
    assert answered["structuredContent"] == {"ok": True, "ticket": T104}
    assert (audited, exited) == ("ok", 0)


def test_sigterm_during_a_stall_fails_the_call_past_the_grace_and_exits_0(
    tmp_path: Path, jwks: Path, pg: PostgresDatabase, idp: Issuer
) -> None:
    ready, answered, refusal, audited, exited = _drain_during_a_stall(tmp_path, jwks, pg, idp, "1")
    assert ready == DRAINING
    assert refusal == (503, "1", REFUSED)
    assert answered == {
        "content": [{"type": "text", "text": f"unavailable: {CUT_OFF}"}],
        "structuredContent": {"ok": False, "code": "unavailable", "detail": CUT_OFF},
        "isError": True,
    }
    assert (audited, exited) == ("unavailable", 0)


def test_a_second_sigterm_ends_the_grace_at_once(
    tmp_path: Path, jwks: Path, pg: PostgresDatabase, idp: Issuer
) -> None:
    server = HttpServer(
        tmp_path, str(jwks), "--stateless", "--postgres", pg.reader,
        "--store-timeout", "120", "--grace", "120",
    )  # fmt: skip
    base, alice = origin(server.url), idp.sign(claims("alpha", "alice"))
    with ThreadPoolExecutor(1) as pool:
        with locked_table(pg.superuser):
            in_flight = pool.submit(request, server.url, rpc("tools/call", {"name": "get_ticket",
                                    "arguments": GET_104}), bearer=alice)  # fmt: skip
            wait_until(lambda: metric(base, "ticket_tools_store_calls_in_flight") == 1, "in flight")
            server.process.send_signal(signal.SIGTERM)
            assert _ready(base) == DRAINING
            server.process.send_signal(signal.SIGTERM)
            # The grace ends at once: the call is answered unavailable, the table still locked.
            _, _, body = in_flight.result()
            assert json.loads(body)["result"]["structuredContent"]["detail"] == CUT_OFF
            wait_until(lambda: _refused(base), "the listener closed")
        # The stalled thread ends with the lock; then the process exits, still with 0.
        assert server.process.wait(timeout=STOP_TIMEOUT_SECONDS) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_signals_all_through_the_drain_and_the_exit_leave_the_status_0(
    tmp_path: Path, jwks: Path, signum: signal.Signals
) -> None:
    # The first signal drains; the rest (every millisecond until the process is gone) land
    # in the drain, in the server's stop and in the exit after it: none changes the status.
    server = HttpServer(tmp_path, str(jwks), "--stateless")
    wait_until(lambda: _ready(origin(server.url))[0] == 200, "ready")
    while server.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            server.process.send_signal(signum)
        time.sleep(0.001)
    assert server.process.wait() == 0, server.stderr()
    assert server.stderr() == f"ticket-tools: serving MCP on {server.url}\n"


def _refused(base: str) -> bool:
    try:
        request(f"{base}/healthz", timeout=5)
    except OSError:
        return True
    return False


# `ticket-tools serve http`, reporting on stderr whether the heap was frozen when it returned.
FREEZE_REPORTER = """
import gc, sys
from ticket_tools.cli import main
status = main(sys.argv[1:])
print(f"frozen after serving: {gc.get_freeze_count() > 0}", file=sys.stderr, flush=True)
sys.exit(status)
"""


def test_after_a_drain_the_heap_is_frozen_so_the_exit_skips_freeing_it(
    tmp_path: Path, jwks: Path
) -> None:
    # Tearing the interpreter down freed the SDK stack's objects one by one after the
    # grace: 0.25-0.4 s idle, over a second under load (the drain's target is grace + 1 s).
    arguments = serve_http_command(jwks, "--stateless")[3:]  # after `-m ticket_tools.cli`
    server = ServerProcess([sys.executable, "-c", FREEZE_REPORTER, *arguments], tmp_path / "log")
    wait_until(lambda: _ready(origin(server.url))[0] == 200, "ready")
    assert server.stop() == 0
    assert server.stderr().splitlines()[-1] == "frozen after serving: True"


def test_serve_returns_with_the_heap_frozen_once_drained() -> None:
    # In-process, on a thread (no signal handlers there), drained by the flag SIGTERM sets.
    replica = Replica(fixture_records(), ReplicaOptions(), tenant_claim="tenant")
    app = Starlette(routes=replica.routes())
    replica.install(app, mcp_path="/mcp", sessions=lambda: 0)
    listener = listen("127.0.0.1", 0)
    base = f"http://127.0.0.1:{listener.getsockname()[1]}"
    serving = threading.Thread(
        target=replica.serve,
        args=(app, listener),
        kwargs={"http": guarded_protocol(ConnectionLimits())},
    )
    gc.unfreeze()
    serving.start()
    try:
        wait_until(lambda: _ready(base) == (200, {"status": "ready"}), "ready")
        assert gc.get_freeze_count() == 0
        replica.begin_drain()
        serving.join(timeout=STOP_TIMEOUT_SECONDS)
        assert not serving.is_alive()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the rest of the suite collects as before
