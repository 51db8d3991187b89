"""The direct path answers what the SDK's stateless machinery answers, byte for byte.

Two `serve http --stateless` processes from the same install, one with the direct path
(the default) and one with `TICKET_TOOLS_HTTP_PATH=sdk`, get the same raw requests; their
statuses, content types, bodies and audit lines must be identical. In-process, `DirectPath`
is driven with an inner app that records what reached it: a well-formed 2026-07-28
tools/call never does, everything else does, with its body intact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Message, Receive, Scope, Send

from http_support import post
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.serve.direct import SWITCH, DirectPath, direct_enabled
from ticket_tools.serve.server import CallObserver, ToolCalls, server_for

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "compare", "version": "1"},
}
UNLIMITED = ("--tenant-rate", "0", "--subject-rate", "0")
TKT_104 = {"ticket_id": "TKT-104"}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


ENVELOPES: dict[str, dict[str, object]] = {
    "meta-capabilities-null": {"io.modelcontextprotocol/clientCapabilities": None},
    "meta-capabilities-a-list": {"io.modelcontextprotocol/clientCapabilities": []},
    "meta-capabilities-a-string": {"io.modelcontextprotocol/clientCapabilities": "x"},
    "meta-capabilities-unknown-key": {"io.modelcontextprotocol/clientCapabilities": {"x": 1}},
    "meta-client-info-a-number": {"io.modelcontextprotocol/clientInfo": 7},
    "meta-client-info-no-version": {"io.modelcontextprotocol/clientInfo": {"name": "c"}},
    "meta-client-info-null": {"io.modelcontextprotocol/clientInfo": None},
    "meta-progress-token-a-float": {"progressToken": 1.5},
    "meta-progress-token-a-string": {"progressToken": "p-1"},
    "meta-log-level-unknown": {"io.modelcontextprotocol/logLevel": "loud"},
    "meta-naming-a-tenant": {"tenant": "beta", "sub": "bob", "can_read_tickets": True},
}
"""`_meta` entries over the envelope: values of the wrong shape, or naming a tenant."""


def _rpc(method: str, params: object, request_id: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _call(name: str, arguments: object, request_id: object = 1) -> dict[str, object]:
    return _rpc("tools/call", {"_meta": META, "name": name, "arguments": arguments}, request_id)


def _headers(body: object, **extra: str) -> dict[str, str]:
    """The 2026-07-28 routing headers a client sends for `body`."""
    headers = {"MCP-Protocol-Version": MODERN}
    if isinstance(body, dict):
        headers["Mcp-Method"] = str(body.get("method", ""))
        params = body.get("params")
        if body.get("method") == "tools/call" and isinstance(params, dict) and "name" in params:
            headers["Mcp-Name"] = str(params["name"])
    return {**headers, **extra}


CASES = [
    pytest.param(_rpc("server/discover", {"_meta": META}), None, id="discover"),
    pytest.param(_rpc("tools/list", {"_meta": META}), None, id="tools-list"),
    pytest.param(_call("search_tickets", {}), None, id="call-search"),
    pytest.param(
        _call("search_tickets", {"query": "é\u200b", "limit": 2}), None, id="call-unicode"
    ),
    pytest.param(
        _call("get_ticket", {"ticket_id": "TKT-104"}, "s-1"), None, id="call-get-string-id"
    ),
    pytest.param(_call("get_ticket", {"ticket_id": "TKT-999"}), None, id="call-not-found"),
    pytest.param(_call("search_tickets", {"limit": 11}), None, id="call-invalid-arguments"),
    pytest.param(_call("search_tickets", {"tenant": "beta"}), None, id="call-undeclared-key"),
    pytest.param(_call("Search_Tickets", {}), None, id="call-unknown-tool"),
    pytest.param(
        _rpc("tools/call", {"_meta": META, "name": "search_tickets"}), None, id="call-no-arguments"
    ),
    pytest.param(_call("search_tickets", None), None, id="call-null-arguments"),
    pytest.param(_call("search_tickets", {}, 1.5), None, id="call-float-id"),
    pytest.param(_call("search_tickets", {}, True), None, id="call-bool-id"),
    pytest.param(_call("search_tickets", {}, None), None, id="call-null-id"),
    pytest.param(
        _rpc("tools/call", {"_meta": META, "name": "search_tickets", "extra": 1}),
        None,
        id="call-extra-param",
    ),
    pytest.param(
        _rpc("tools/call", {"name": "search_tickets", "arguments": {}}), None, id="call-no-meta"
    ),
    pytest.param(
        _rpc("tools/call", {"_meta": {}, "name": "search_tickets"}), None, id="call-empty-meta"
    ),
    pytest.param(_call("search_tickets", {}), {"Mcp-Name": "get_ticket"}, id="call-name-mismatch"),
    pytest.param(
        _call("search_tickets", {"limit": 2}), {"Mcp-Param-Limit": "3"}, id="call-param-mismatch"
    ),
    pytest.param(_call("search_tickets", {}), {"Accept": "text/plain"}, id="call-not-acceptable"),
    pytest.param(_call("search_tickets", {}), {"Host": "evil.example"}, id="call-bad-host"),
    pytest.param({**_call("search_tickets", {}), "jsonrpc": "1.0"}, None, id="call-wrong-jsonrpc"),
    pytest.param(
        _rpc("tools/call", {"_meta": {**META, "traceparent": TRACEPARENT}, "name": "get_ticket"}),
        None,
        id="call-traceparent-in-meta",
    ),
    pytest.param(
        _call("search_tickets", {}, "trace-header"),
        {"traceparent": TRACEPARENT},
        id="call-traceparent-header",
    ),
    pytest.param(
        _rpc(
            "tools/call",
            {"_meta": {**META, "traceparent": "00-zz"}, "name": "get_ticket"},
            "bad-trace",
        ),
        None,
        id="call-traceparent-malformed",
    ),
    # The envelope's values, parsed once for both paths (issue 30: the direct path took these).
    *(
        pytest.param(
            _rpc(
                "tools/call",
                {"_meta": {**META, **meta}, "name": "get_ticket", "arguments": TKT_104},
                3,
            ),
            None,
            id=name,
        )
        for name, meta in ENVELOPES.items()
    ),
    pytest.param(
        _rpc("tools/call", {"_meta": [META], "name": "get_ticket"}, 3), None, id="meta-a-list"
    ),
    pytest.param(_rpc("ping", {"_meta": META}), None, id="ping"),
    pytest.param(_rpc("resources/list", {"_meta": META}), None, id="unknown-method"),
    pytest.param(
        {"jsonrpc": "2.0", "method": "notifications/initialized"}, None, id="notification"
    ),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": ', None, id="malformed-json"),
    pytest.param([_call("search_tickets", {})], None, id="batch"),
    pytest.param({}, None, id="empty-object"),
    pytest.param([1, 2], None, id="array"),
]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The same stateless server twice: the direct path, and the SDK's (by the switch)."""
    folder = tmp_path_factory.mktemp("direct")
    idp = Issuer("idp")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    jwks = str(folder / "jwks.json")
    started = {
        "direct": HttpServer(folder / "direct", jwks, "--stateless", *UNLIMITED),
        "sdk": HttpServer(folder / "sdk", jwks, "--stateless", *UNLIMITED, env={SWITCH: "sdk"}),
    }
    tokens = {
        "read": idp.sign(claims("alpha", "agent-1")),
        "no-read": idp.sign(claims("alpha", "agent-2", scope="openid")),
    }
    yield {"servers": started, "tokens": tokens}
    for server in started.values():
        assert server.stop() == 0, server.stderr()


def _exchange(server: HttpServer, body: object, extra: dict[str, str] | None, token: str) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, headers, answer = post(server.url, data, token, _headers(body, **(extra or {})))
    return status, headers.get("content-type"), answer


@pytest.mark.parametrize(("body", "extra"), CASES)
@pytest.mark.parametrize("token", ["read", "no-read"])
def test_both_paths_answer_the_same(
    servers: dict[str, Any], body: object, extra: dict[str, str] | None, token: str
) -> None:
    bearer = servers["tokens"][token]
    direct = _exchange(servers["servers"]["direct"], body, extra, bearer)
    sdk = _exchange(servers["servers"]["sdk"], body, extra, bearer)
    assert direct == sdk


def test_both_paths_write_the_same_audit_lines(servers: dict[str, Any]) -> None:
    lines = {}
    for name, server in servers["servers"].items():
        lines[name] = [
            {k: v for k, v in line.items() if k not in ("time", "latency_ms")}
            for line in server.audit_lines()
        ]
    assert lines["direct"] == lines["sdk"]
    assert len(lines["direct"]) > 20  # the calls of test_both_paths_answer_the_same
    traces = {(line["request_id"], line["trace_id"]) for line in lines["direct"]}
    assert {("trace-header", TRACE), ("bad-trace", None)} <= traces
    in_meta = [line["trace_id"] for line in lines["direct"] if line["tool"] == "get_ticket"]
    assert TRACE in in_meta


def test_a_direct_answer_is_exact(servers: dict[str, Any]) -> None:
    body = _call("get_ticket", {"ticket_id": "TKT-104"}, 7)
    status, content_type, answer = _exchange(
        servers["servers"]["direct"], body, None, servers["tokens"]["read"]
    )
    ticket = {"id": "TKT-104", "title": "Settings crash", "status": "open"}
    result = {"ok": True, "ticket": ticket}
    assert (status, content_type) == (200, "application/json")
    assert json.loads(answer) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"text": json.dumps(result), "type": "text"}],
            "isError": False,
            "resultType": "complete",
            "structuredContent": result,
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "ticket-tools", "version": "0.1.0"}
            },
        },
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, True, id="unset"),
        pytest.param("direct", True, id="direct"),
        pytest.param("sdk", False, id="sdk"),
    ],
)
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv(SWITCH, raising=False)
    else:
        monkeypatch.setenv(SWITCH, value)
    assert direct_enabled() is expected


class _Inner:
    """The SDK's endpoint, as the direct path sees it: records the bodies that reach it."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"sdk"})


def _direct(inner: _Inner, observe: CallObserver | None = None) -> DirectPath:
    context = {"tenant": "alpha", "can_read_tickets": True}
    tool_calls = ToolCalls(context, fixture_records(), observe=observe)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=["h:1"], allowed_origins=[]
    )
    return DirectPath(
        inner, path="/mcp", server=server_for(tool_calls), tool_calls=tool_calls, security=security
    )


async def _drive(
    app: DirectPath,
    chunks: list[Message],
    *,
    path: str = "/mcp",
    method: str = "POST",
    version: bytes = MODERN.encode(),
    kind: str = "http",
    extra: tuple[tuple[bytes, bytes], ...] = (),
) -> tuple[int, bytes]:
    headers = [
        (b"host", b"h:1"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", version),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"get_ticket"),
        *extra,
    ]
    scope = {"type": kind, "path": path, "method": method, "headers": headers}
    pending = list(chunks)
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0].get("status", 0), b"".join(m.get("body", b"") for m in sent[1:])


GET_104 = json.dumps(_call("get_ticket", {"ticket_id": "TKT-104"})).encode()


@pytest.mark.parametrize(
    ("chunks", "where", "answered_here"),
    [
        pytest.param(
            [
                {"type": "http.request", "body": GET_104[:9], "more_body": True},
                {"type": "http.request", "body": GET_104[9:]},
            ],
            {},
            False,  # BodyLimit, in front, hands on a body as one message: the SDK reads on
            id="two-chunks",
        ),
        pytest.param(
            [
                {"type": "http.request", "body": GET_104[:9], "more_body": True},
                {"type": "http.disconnect"},
            ],
            {},
            False,
            id="disconnect",
        ),
        pytest.param(
            [{"type": "http.request", "body": GET_104}], {"path": "/other"}, False, id="path"
        ),
        pytest.param(
            [{"type": "http.request", "body": GET_104}], {"method": "GET"}, False, id="get"
        ),
        pytest.param(
            [{"type": "http.request", "body": GET_104}],
            {"version": b"2025-11-25"},
            False,
            id="handshake-version",
        ),
        pytest.param(
            [{"type": "http.request", "body": GET_104}],
            {"kind": "websocket"},
            False,
            id="websocket",
        ),
        pytest.param(
            [{"type": "http.request", "body": json.dumps(_call("get_ticket", [])).encode()}],
            {},
            False,
            id="list-arguments",
        ),
        pytest.param(
            [
                {
                    "type": "http.request",
                    "body": json.dumps(_call("get_ticket", {"ticket_id": "TKT-104"}, [])).encode(),
                }
            ],
            {},
            False,
            id="list-id",
        ),
    ],
)
async def test_what_the_direct_path_answers(
    chunks: list[Message], where: dict[str, Any], answered_here: bool
) -> None:
    inner = _Inner()
    status, body = await _drive(_direct(inner), chunks, **where)
    if answered_here:
        assert (status, inner.bodies) == (200, [])
        assert json.loads(body)["result"]["structuredContent"] == {
            "ok": True,
            "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"},
        }
    else:
        sent = b"".join(m.get("body", b"") for m in chunks)
        assert (status, body, inner.bodies) == (299, b"sdk", [sent])


async def test_an_observer_that_fails_is_the_same_generic_error_as_on_the_sdk_path() -> None:
    # It was a bare HTTP 500 here (the exception left the middleware); the SDK's path
    # answers the -32603 of test_mcp_server.py's test of the same name.
    def failing(ctx: object, name: str, outcome: object, seconds: float) -> None:
        raise OSError(28, "No space left on device")  # the audit log on a full disk

    inner = _Inner()
    chunks: list[Message] = [{"type": "http.request", "body": GET_104}]
    status, body = await _drive(_direct(inner, failing), chunks)
    error = {"code": -32603, "message": "Internal error"}
    assert (status, json.loads(body), inner.bodies) == (
        200,
        {"jsonrpc": "2.0", "id": 1, "error": error},
        [],
    )


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(((b"mcp-method", b"tools/call"),), id="duplicated-routing-header"),
        pytest.param(((b"mcp-param-ticket", b"TKT-105"),), id="param-header-mismatch"),
    ],
)
async def test_a_header_the_ladder_refuses_goes_to_the_sdk(
    extra: tuple[tuple[bytes, bytes], ...],
) -> None:
    inner = _Inner()
    app = _direct(inner)
    # A tool that declares a routing header: none of ours does yet.
    annotated = {"type": "string", "x-mcp-header": "Ticket"}
    app._schemas["get_ticket"] = {"type": "object", "properties": {"ticket_id": annotated}}
    chunks: list[Message] = [{"type": "http.request", "body": GET_104}]
    status, body = await _drive(app, chunks, extra=extra)
    assert (status, body, inner.bodies) == (299, b"sdk", [GET_104])


async def test_the_sdk_reads_on_after_the_replayed_body() -> None:
    inner = _Inner()
    app = _direct(inner)
    body = json.dumps(_call("get_ticket", [])).encode()
    chunks: list[Message] = [
        {"type": "http.request", "body": body, "more_body": False},
    ]
    status, _ = await _drive(app, chunks)

    async def reader(scope: Scope, receive: Receive, send: Send) -> None:
        first, after = await receive(), await receive()
        inner.bodies.append(first["body"] + after["type"].encode())
        await send({"type": "http.response.start", "status": 298, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app.app = reader
    status, _ = await _drive(app, [{"type": "http.request", "body": body}])
    assert (status, inner.bodies) == (298, [body, body + b"http.disconnect"])
