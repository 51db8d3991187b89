"""`/metrics` of a real server: Prometheus text, counts by tool and code, no tenant anywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from replica_support import call, metric, metrics, origin, request, rpc, wait_until
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.outcome import Outcome
from ticket_tools.serve.metrics import Metrics

CALLS = "ticket_tools_tool_calls_total"
METRICS_PREFIX = "ticket-tools: serving metrics on "


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    """The provider's JWKS file."""
    path = tmp_path_factory.mktemp("metrics") / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server with sessions, on the fixture store."""
    started = HttpServer(tmp_path, str(jwks))
    yield started
    assert started.stop() == 0, started.stderr()


def test_calls_are_counted_by_tool_and_code_and_no_tenant_is_a_label(
    server: HttpServer, idp: Issuer
) -> None:
    alice = idp.sign(claims("secret-tenant-name", "secret-subject"))
    stateless_free_calls = [
        ("get_ticket", {"ticket_id": "TKT-999"}),
        ("get_ticket", {"ticket_id": "104"}),
        ("search_tickets", {}),
        ("search_tickets", {"status": "open"}),
        ("list_tickets", {}),
    ]
    # A session: tools/call needs one on a server that keeps them.
    initialize = rpc(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    status, headers, _ = request(server.url, initialize, bearer=alice)
    assert status == 200
    base = origin(server.url)
    assert metric(base, "ticket_tools_sessions_open") == 1
    sid = headers["mcp-session-id"]
    for name, args in stateless_free_calls:
        _session_call(server.url, alice, sid, name, args)
    samples = metrics(base)
    counted = {
        labels: value for (name, labels), value in samples.items() if name == CALLS and value
    }
    assert counted == {
        (("code", "not_found"), ("tool", "get_ticket")): 1,
        (("code", "invalid_arguments"), ("tool", "get_ticket")): 1,
        (("code", "ok"), ("tool", "search_tickets")): 2,
        (("code", "unknown_tool"), ("tool", "unknown")): 1,
    }
    durations = "ticket_tools_tool_call_duration_seconds_count"
    assert samples[(durations, (("tool", "search_tickets"),))] == 2
    assert samples[(durations, (("tool", "get_ticket"),))] == 2
    status, headers, body = request(f"{base}/metrics")
    assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    for secret in (b"secret-tenant-name", b"secret-subject", b"TKT-999", b"list_tickets"):
        assert secret not in body


def _session_call(url: str, bearer: str, sid: str, name: str, args: Mapping[str, object]) -> None:
    import urllib.request  # noqa: PLC0415

    body = json.dumps(rpc("tools/call", {"name": name, "arguments": dict(args)})).encode()
    sent = urllib.request.Request(  # noqa: S310 - loopback
        url,
        data=body,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {bearer}",
            "Mcp-Session-Id": sid,
            "Mcp-Protocol-Version": "2025-11-25",
        },
    )
    with urllib.request.urlopen(sent, timeout=30) as response:  # noqa: S310
        assert response.status == 200


def test_metrics_move_to_an_address_of_their_own(tmp_path: Path, jwks: Path, idp: Issuer) -> None:
    server = HttpServer(tmp_path, str(jwks), "--stateless", "--metrics", "127.0.0.1:0")
    try:
        wait_until(lambda: METRICS_PREFIX in server.stderr(), "the metrics address")
        [line] = [line for line in server.stderr().splitlines() if line.startswith(METRICS_PREFIX)]
        own = line.removeprefix(METRICS_PREFIX).removesuffix("/metrics")
        call(server.url, idp.sign(claims("alpha", "alice")), "search_tickets", {})
        assert metric(own, CALLS, tool="search_tickets", code="ok") == 1
        assert request(f"{origin(server.url)}/metrics")[0] == 404
    finally:
        assert server.stop() == 0, server.stderr()


def test_an_internal_error_is_counted_with_its_duration() -> None:
    counted = Metrics()
    ctx: Any = None
    counted.observe(ctx, "get_ticket", None, 0.25)
    counted.observe(ctx, "get_ticket", Outcome({"ok": True}), 0.001)
    sample = counted.registry.get_sample_value
    assert [
        sample(CALLS, {"tool": "get_ticket", "code": "internal_error"}),
        sample(CALLS, {"tool": "get_ticket", "code": "ok"}),
        sample(CALLS, {"tool": "get_ticket", "code": "unknown_tool"}),
        sample("ticket_tools_tool_call_duration_seconds_sum", {"tool": "get_ticket"}),
    ] == [1, 1, None, 0.251]
