"""One HTTP endpoint for every tenant, through real `ticket-tools serve http` processes.

The test is the identity provider: it makes key pairs, publishes their JWKS and signs the
tokens. The official SDK client (`streamable_http_client`) drives the servers; what a client
must never get (another tenant's data, a 200 without a valid token) is also checked on the
raw HTTP exchange. Every server runs on 127.0.0.1 on a port the OS picked, and is stopped
with SIGTERM at the end of the module (its exit status is checked: 0). The trust-boundary
tests (a `_meta`, argument, header or session id naming another tenant) run on every path
and protocol version in test_http_isolation.py.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import sqlite3
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from expected import (
    ALPHA,
    ALPHA_TICKETS,
    BETA,
    BETA_T103,
    BETA_T104,
    BETA_T108,
    T104,
    TOOL_NAMES,
)
from http_support import (
    INITIALIZE,
    PROTOCOL,
    REFUSED,
    JwksHttpsServer,
    generated_calls,
    open_session,
    post,
    rpc,
)
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import execute_tool, fixture_records
from ticket_tools.cli import main
from ticket_tools.cli.acceptance import CALLS, AcceptanceCall
from ticket_tools.serve.protocol import loopback_aliases

pytestmark = pytest.mark.anyio

RECORDS = fixture_records()
BETA_TICKETS = [BETA_T103, BETA_T104, BETA_T108]
TITLES = sorted({str(ticket["title"]) for ticket in RECORDS.values()})
ALLOWED_HOST = "tickets.example.test"
CLIENTS = 24  # concurrent clients, alternating alpha and beta tokens
CALLS_PER_CLIENT = 50
ISSUED: list[str] = []  # every token signed here, for the scan of the logs


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    """A folder holding the provider's JWKS and each server's files."""
    path = tmp_path_factory.mktemp("http")
    (path / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def token(idp: Issuer) -> Callable[..., str]:
    """Return a signed token for a tenant and subject; extra claims replace the defaults."""

    def sign(tenant: object, subject: str, **extra: object) -> str:
        signed = idp.sign(claims(tenant, subject, **extra))
        ISSUED.append(signed)
        return signed

    return sign


def _started(server: HttpServer) -> Iterator[HttpServer]:
    yield server
    assert server.stop() == 0, server.stderr()


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[HttpServer]:
    """The shared server: the fixture store, sessions on, one extra allowed Host.

    No rate limits: its concurrency test is a load test, faster than any agent
    (the limits have their own tests, in test_limits.py).
    """
    jwks = str(folder / "jwks.json")
    unlimited = ("--tenant-rate", "0", "--subject-rate", "0")
    yield from _started(
        HttpServer(folder / "main", jwks, "--allowed-host", ALLOWED_HOST, *unlimited)
    )


@pytest.fixture(scope="module")
def database(folder: Path) -> Path:
    """The fixture store as an SQLite database made by `ticket-tools import`."""
    records = folder / "records.json"
    records.write_text(json.dumps(RECORDS), encoding="utf-8")
    assert main(["import", str(records), "--db", str(folder / "tickets.db")]) == 0
    return folder / "tickets.db"


@asynccontextmanager
async def connect(url: str, bearer: str) -> AsyncIterator[ClientSession]:
    """Open an MCP session on `url` through the official client, sending `bearer`."""
    headers = {"Authorization": f"Bearer {bearer}"}
    async with (
        httpx2.AsyncClient(headers=headers) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
async def sessions(
    server: HttpServer, token: Callable[..., str]
) -> AsyncIterator[dict[str, ClientSession]]:
    """One live session per token kind on the shared server."""
    bearers = {
        "alpha": token("alpha", "alice"),
        "alpha-no-read": token("alpha", "alan", scope="openid"),
        "beta": token("beta", "bob"),
    }
    async with AsyncExitStack() as stack:
        yield {
            kind: await stack.enter_async_context(connect(server.url, bearer))
            for kind, bearer in bearers.items()
        }


async def result(session: ClientSession, name: str, args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a tool; return the contract's dict the client sees (an unknown tool included)."""
    try:
        answer = await session.call_tool(name, args, **kwargs)
    except MCPError as error:
        code = error.error.code
        return {"ok": False, "code": "unknown_tool" if code == types.INVALID_PARAMS else code}
    structured = answer.structured_content
    assert isinstance(structured, dict)
    if answer.is_error:
        # The detail beside the contract's dict is the stdio server's too (test_mcp_server).
        [block] = answer.content
        assert isinstance(block, types.TextContent)
        assert block.text == f"{structured['code']}: {structured['detail']}"
        return {key: value for key, value in structured.items() if key != "detail"}
    return structured


def _kind(call: AcceptanceCall) -> str:
    if call.context == BETA:
        return "beta"
    return "alpha" if call.context == ALPHA else "alpha-no-read"


@pytest.mark.parametrize("call", [pytest.param(call, id=call.label) for call in CALLS])
async def test_acceptance_call_over_http(
    sessions: dict[str, ClientSession], call: AcceptanceCall
) -> None:
    got = await result(sessions[_kind(call)], call.name, call.args)
    assert got == call.expected
    assert got == execute_tool(call.name, call.args, call.context, RECORDS)


@pytest.fixture(scope="module")
def stranger() -> Issuer:
    """Someone signing with the provider's kids but their own keys."""
    return Issuer("idp")


def _refused_bearers() -> list[Any]:
    bearers = [pytest.param(name, id=name) for name in REFUSED]
    return [*bearers, pytest.param("no-token", id="no-token")]


@pytest.mark.parametrize("kind", _refused_bearers())
def test_a_refused_token_is_401_and_runs_no_tool(
    server: HttpServer, idp: Issuer, stranger: Issuer, kind: str
) -> None:
    bearer = None if kind == "no-token" else REFUSED[kind](idp, stranger)
    if bearer is not None:
        ISSUED.append(bearer)
    before = server.audit_path.read_text(encoding="utf-8")
    call = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}})
    challenge = f'resource_metadata="{metadata_url(server)}", scope="tickets:read"'
    for body in (INITIALIZE, call):
        status, headers, got = post(server.url, body, bearer)
        if bearer is None:
            # RFC 6750 §3.1: no credentials sent, so no error code.
            assert (status, json.loads(got)) == (401, NO_CREDENTIALS)
            assert headers["www-authenticate"] == f"Bearer {challenge}"
        else:
            assert (status, json.loads(got)) == (401, INVALID_TOKEN)
            assert headers["www-authenticate"] == f'Bearer error="invalid_token", {challenge}'
    assert server.audit_path.read_text(encoding="utf-8") == before  # no tool ran


NO_CREDENTIALS = {"error_description": "Authentication required: send an OAuth bearer token"}
INVALID_TOKEN = {
    "error": "invalid_token",
    "error_description": "The access token is invalid, expired or not meant for this server",
}


@pytest.mark.parametrize("scheme", ["Basic", "Token", "Bearer", "Bearer ", "Bearer \t "])
def test_another_auth_scheme_is_401_without_an_error_code(
    server: HttpServer, token: Callable[..., str], scheme: str
) -> None:
    # A bearer scheme with an empty token is no credentials, with or without the trailing
    # spaces (which an HTTP parser may or may not strip before the server sees them).
    authorization = scheme if scheme.startswith("Bearer") else f"{scheme} {token('alpha', 'u')}"
    status, headers, got = post(server.url, INITIALIZE, None, {"Authorization": authorization})
    assert (status, json.loads(got)) == (401, NO_CREDENTIALS)
    assert headers["www-authenticate"] == (
        f'Bearer resource_metadata="{metadata_url(server)}", scope="tickets:read"'
    )


def metadata_url(server: HttpServer) -> str:
    """Return the server's protected-resource metadata URL (RFC 9728)."""
    origin = server.url.removesuffix("/mcp")
    return f"{origin}/.well-known/oauth-protected-resource/mcp"


def test_the_protected_resource_metadata_is_served(server: HttpServer) -> None:
    with urllib.request.urlopen(metadata_url(server), timeout=30) as response:  # noqa: S310
        assert json.loads(response.read()) == {
            "resource": server.url,
            "authorization_servers": [ISSUER_URL],
            "scopes_supported": ["tickets:read"],
            "bearer_methods_supported": ["header"],
        }


ISSUER_URL = "https://idp.example.test/"


async def test_the_read_scope_in_scp_reads(server: HttpServer, token: Callable[..., str]) -> None:
    bearer = token("alpha", "scp-reader", scope=None, scp=["tickets:read"])
    async with connect(server.url, bearer) as session:
        got = await result(session, "get_ticket", {"ticket_id": "TKT-104"})
    assert got == {"ok": True, "ticket": T104}


async def test_concurrent_clients_get_exactly_what_execute_tool_gives(
    server: HttpServer, token: Callable[..., str]
) -> None:
    mismatches: list[object] = []
    foreign: list[object] = []
    answered = 0
    own = {"alpha": ALPHA_TICKETS, "beta": BETA_TICKETS}

    async def client(number: int) -> None:
        nonlocal answered
        tenant = "alpha" if number % 2 == 0 else "beta"
        context = ALPHA if tenant == "alpha" else BETA
        async with connect(server.url, token(tenant, f"load-{number}")) as session:
            for name, args in generated_calls(number, CALLS_PER_CLIENT):
                got = await result(session, name, args)
                answered += 1
                if got != execute_tool(name, args, context, RECORDS):
                    mismatches.append((number, name, args, got))
                tickets = got.get("tickets", [got["ticket"]] if "ticket" in got else [])
                foreign.extend(t for t in tickets if t not in own[tenant])

    async with anyio.create_task_group() as group:
        for number in range(CLIENTS):
            group.start_soon(client, number)
    assert (answered, mismatches, foreign) == (CLIENTS * CALLS_PER_CLIENT, [], [])


async def test_stateless_replicas_on_one_db_continue_each_others_pages(
    folder: Path, database: Path, token: Callable[..., str]
) -> None:
    jwks = str(folder / "jwks.json")
    stateless = ("--stateless", "--db", str(database))
    first = HttpServer(folder / "replica-1", jwks, *stateless)
    second = HttpServer(folder / "replica-2", jwks, *stateless)
    try:
        bearer = token("alpha", "walker")
        async with connect(first.url, bearer) as one, connect(second.url, bearer) as two:
            alternating: list[dict[str, Any]] = []
            single: list[dict[str, Any]] = []
            for walk, replicas in ((alternating, (one, two)), (single, (one, one))):
                args: dict[str, object] = {"limit": 2}
                for page in range(10):
                    got = await result(replicas[page % 2], "search_tickets", args)
                    walk.append(got)
                    if got["next_cursor"] is None:
                        break
                    args = {"limit": 2, "cursor": got["next_cursor"]}
        assert alternating == single
        assert [ticket for page in alternating for ticket in page["tickets"]] == ALPHA_TICKETS
        assert [page["next_cursor"] for page in alternating] == [
            "TKT-102",
            "TKT-107",
            "TKT-112",
            None,
        ]
        status, headers, _ = post(second.url, INITIALIZE, bearer)
        assert (status, "mcp-session-id" in headers) == (200, False)  # no session to pin
    finally:
        assert first.stop() == 0
        assert second.stop() == 0


async def test_a_store_error_is_unavailable_and_the_server_keeps_serving(
    folder: Path, database: Path, token: Callable[..., str]
) -> None:
    copy = folder / "failing.db"
    shutil.copy(database, copy)
    jwks = str(folder / "jwks.json")
    server = HttpServer(folder / "failing", jwks, "--db", str(copy), audit_to_stderr=True)
    try:
        async with connect(server.url, token("alpha", "ops")) as session:
            args = {"ticket_id": "TKT-104"}
            assert await result(session, "get_ticket", args) == {"ok": True, "ticket": T104}
            with sqlite3.connect(copy) as writer:
                writer.execute("ALTER TABLE tickets RENAME TO moved")
            failed = await session.call_tool("get_ticket", args)
            # A tool error the model reads as "retry later", not the -32603 kept for bugs.
            assert (failed.is_error, failed.structured_content) == (True, UNAVAILABLE)
            with sqlite3.connect(copy) as writer:
                writer.execute("ALTER TABLE moved RENAME TO tickets")
            assert await result(session, "get_ticket", args) == {"ok": True, "ticket": T104}
        codes = [line["code"] for line in server.audit_lines()]
        assert codes == ["ok", "unavailable", "ok"]
        assert "Traceback" not in server.stderr()
        assert "TKT-104" not in server.stderr()
    finally:
        assert server.stop() == 0


UNAVAILABLE = {
    "ok": False,
    "code": "unavailable",
    "detail": "the ticket store did not answer in time; retry the call in a few seconds",
}


MALFORMED = [
    pytest.param(b"not json", -32700, None, id="not-json"),
    pytest.param(b"\xff\xfe", -32700, None, id="not-utf8"),
    pytest.param(b"[]", -32600, None, id="empty-batch"),
    pytest.param(b" [ \n] ", -32600, None, id="empty-batch-spaced"),
    pytest.param(b"{}", -32600, None, id="empty-object"),
    pytest.param(b'{"jsonrpc": "2.0"}', -32600, None, id="no-method"),
    pytest.param(b'{"jsonrpc": "1.0", "id": 1, "method": "initialize"}', -32600, 1, id="version"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":"x"}', -32600, "c1", id="params"
    ),
    pytest.param(b'{"jsonrpc": "2.0", "id": 2, "result": []}', -32600, 2, id="a-response-shape"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 2.5, "method": 3}', -32600, None, id="float-id"),
    pytest.param(b'"canary-body-7731"', -32600, None, id="a-string"),
    pytest.param(b"[" * 100_000, -32700, None, id="deep"),
]
NOT_A_REQUEST = "Invalid Request: the body is not a JSON-RPC request, notification or response"


@pytest.mark.parametrize(("body", "code", "request_id"), MALFORMED)
def test_a_malformed_body_gets_a_json_rpc_error(
    server: HttpServer, token: Callable[..., str], body: bytes, code: int, request_id: object
) -> None:
    status, _, got = post(server.url, body, token("alpha", "fuzzer"))
    answer = json.loads(got)
    assert (status, answer["jsonrpc"], answer["id"], answer["error"]["code"]) == (
        400,
        "2.0",
        request_id,  # the body's id wherever it is a string or an integer
        code,
    )
    if code == -32600:
        # JSON-RPC's Invalid Request, never the SDK's validation text (which quotes the body).
        assert answer == {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": NOT_A_REQUEST},
        }
    assert b"Traceback" not in got
    # And the server still answers.
    assert post(server.url, INITIALIZE, token("alpha", "fuzzer"))[0] == 200


def test_a_malformed_call_in_a_session_gets_a_json_rpc_error(
    server: HttpServer, token: Callable[..., str]
) -> None:
    bearer = token("alpha", "fuzzer")
    sid = open_session(server.url, bearer)
    body = rpc("tools/call", {"arguments": {}})  # no tool name
    status, _, got = post(server.url, body, bearer, {"Mcp-Session-Id": sid})
    assert (status, json.loads(got)["error"]["code"]) == (200, -32602)


def test_a_body_over_the_limit_is_413(server: HttpServer, token: Callable[..., str]) -> None:
    # Only the headers are sent: the server must answer from Content-Length alone.
    port = int(server.url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        head = (
            "POST /mcp HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token('alpha', 'big')}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            "Content-Length: 10000000\r\n\r\n"
        )
        connection.sendall(head.encode())
        status_line = connection.recv(4096).split(b"\r\n")[0]
    assert status_line == b"HTTP/1.1 413 Request Entity Too Large"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({"Host": "evil.example"}, 421, id="other-host"),
        pytest.param({"Host": "localhost"}, 421, id="localhost-without-the-port"),
        pytest.param({"Host": "localhost:1"}, 421, id="localhost-other-port"),
        pytest.param({"Host": "localhost:{port}"}, 200, id="localhost-on-a-loopback-bind"),
        pytest.param({"Host": "[::1]:{port}"}, 200, id="ipv6-loopback-on-a-loopback-bind"),
        pytest.param({"Origin": "http://localhost:{port}"}, 200, id="localhost-origin"),
        pytest.param({"Origin": "http://127.0.0.1:{port}"}, 200, id="loopback-origin"),
        pytest.param({"Origin": "https://localhost:{port}"}, 403, id="localhost-origin-https"),
        pytest.param({"Host": "evil.example:{port}"}, 421, id="other-host-same-port"),
        pytest.param({"Host": ALLOWED_HOST}, 200, id="allowed-host"),
        pytest.param({"Origin": "http://evil.example"}, 403, id="other-origin"),
        pytest.param({"Host": ALLOWED_HOST, "Origin": f"https://{ALLOWED_HOST}"}, 200, id="ok"),
    ],
)
def test_dns_rebinding_protection(
    server: HttpServer, token: Callable[..., str], headers: dict[str, str], status: int
) -> None:
    sent = {name: value.format(port=server.port) for name, value in headers.items()}
    assert post(server.url, INITIALIZE, token("alpha", "browser"), sent)[0] == status


def test_a_plain_text_400_passes_unchanged(server: HttpServer, token: Callable[..., str]) -> None:
    headers = {"Content-Type": "text/plain"}
    status, _, got = post(server.url, INITIALIZE, token("alpha", "typist"), headers)
    assert (status, got) == (400, b"Invalid Content-Type header")


@pytest.mark.parametrize(
    ("host", "aliases"),
    [
        pytest.param("127.0.0.1", ["localhost:80", "127.0.0.1:80", "[::1]:80"], id="ipv4"),
        pytest.param("127.0.0.2", ["localhost:80", "127.0.0.1:80", "[::1]:80"], id="ipv4-other"),
        pytest.param("::1", ["localhost:80", "127.0.0.1:80", "[::1]:80"], id="ipv6"),
        pytest.param("localhost", ["localhost:80", "127.0.0.1:80", "[::1]:80"], id="name"),
        pytest.param("0.0.0.0", [], id="any"),  # noqa: S104 - a bind address under test
        pytest.param("10.1.2.3", [], id="private"),
        pytest.param("tickets.example.test", [], id="hostname"),
    ],
)
def test_only_a_loopback_bind_answers_to_the_loopback_names(host: str, aliases: list[str]) -> None:
    assert loopback_aliases(host, 80) == aliases


def test_a_batch_is_refused_with_invalid_request(
    server: HttpServer, token: Callable[..., str]
) -> None:
    bearer = token("alpha", "batcher")
    sid = open_session(server.url, bearer)
    call = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}})
    before = server.audit_path.read_text(encoding="utf-8")
    for headers in (
        {"Mcp-Session-Id": sid},
        {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": PROTOCOL},
    ):
        status, _, got = post(server.url, [call, {**call, "id": 2}], bearer, headers)
        assert (status, json.loads(got)) == (
            400,
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": -32600,
                    "message": "Invalid Request: JSON-RPC batches are not supported; "
                    "send one message per POST",
                },
            },
        )
    assert server.audit_path.read_text(encoding="utf-8") == before  # no tool ran


@pytest.mark.parametrize("cursor", ["TKT-101", "", "next"])
def test_tools_list_with_a_cursor_is_invalid_params(
    server: HttpServer, token: Callable[..., str], cursor: str
) -> None:
    bearer = token("alpha", "lister")
    sid = open_session(server.url, bearer)
    headers = {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": PROTOCOL}
    status, _, got = post(server.url, rpc("tools/list", {"cursor": cursor}, 5), bearer, headers)
    assert (status, json.loads(got)) == (
        200,
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32602, "message": "Invalid cursor: tools/list has one page"},
        },
    )
    status, _, got = post(server.url, rpc("tools/list", {}, 6), bearer, headers)
    names = [tool["name"] for tool in json.loads(got)["result"]["tools"]]
    assert (status, names) == (200, list(TOOL_NAMES))


AUDIT_FIELDS = [
    "time", "tenant", "subject", "tool", "code", "latency_ms", "request_id", "trace_id"
]  # fmt: skip
CANARY = "canary-query-5521"


async def test_the_audit_log_has_one_line_per_call_and_no_secrets(
    server: HttpServer, token: Callable[..., str]
) -> None:
    async with connect(server.url, token("alpha", "auditor")) as session:
        await result(session, "get_ticket", {"ticket_id": "TKT-104"})
        await result(session, "search_tickets", {"query": CANARY, "status": "open"})
        await result(session, "search_tickets", {"limit": 11, "cursor": "TKT-101"})
        await result(session, "list_tickets", {"query": CANARY})
        await result(session, "get_ticket", {"ticket_id": "TKT-999"})
    async with connect(server.url, token("beta", "auditor-b", scope="")) as session:
        await result(session, "search_tickets", {"query": CANARY})
    lines = [line for line in server.audit_lines() if line["subject"] in ("auditor", "auditor-b")]
    assert [list(line) for line in lines] == [AUDIT_FIELDS] * 6
    assert [(line["tenant"], line["subject"], line["tool"], line["code"]) for line in lines] == [
        ("alpha", "auditor", "get_ticket", "ok"),
        ("alpha", "auditor", "search_tickets", "ok"),
        ("alpha", "auditor", "search_tickets", "invalid_arguments"),
        ("alpha", "auditor", None, "unknown_tool"),
        ("alpha", "auditor", "get_ticket", "not_found"),
        ("beta", "auditor-b", "search_tickets", "forbidden"),
    ]
    ids = [line["request_id"] for line in lines[:5]]
    assert ids == sorted(set(ids))
    assert all(type(i) is int for i in ids)
    for line in lines:
        assert re.fullmatch(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}\+00:00", line["time"])
        assert type(line["latency_ms"]) is float
        assert line["latency_ms"] >= 0


async def test_the_logs_hold_no_token_argument_value_or_title(
    server: HttpServer, token: Callable[..., str]
) -> None:
    # Tests run in file order: the logs now hold every call above; these make sure of some.
    async with connect(server.url, token("alpha", "scanner")) as session:
        await result(session, "search_tickets", {"query": CANARY})
        await result(session, "get_ticket", {"ticket_id": "TKT-110"})
    logs = server.audit_path.read_text(encoding="utf-8") + server.stderr()
    secrets = [*ISSUED, CANARY, "TKT-", "list_tickets", *TITLES]
    assert [secret for secret in secrets if secret and secret in logs] == []
    assert '"subject": "scanner"' in logs


async def test_a_jwks_url_is_fetched_over_https_and_reloaded_for_a_new_kid(
    folder: Path, idp: Issuer
) -> None:
    jwks = JwksHttpsServer(folder / "tls", idp.jwks())
    cert = {"SSL_CERT_FILE": str(jwks.cert_path)}
    server = HttpServer(folder / "remote", jwks.url, env=cert)
    try:
        rotated = Issuer("rotated")
        async with connect(server.url, idp.sign(claims("alpha", "before"))) as session:
            got = await result(session, "get_ticket", {"ticket_id": "TKT-104"})
            assert got == {"ok": True, "ticket": T104}
        assert jwks.hits == 1
        jwks.document = {"keys": idp.jwks()["keys"] + rotated.jwks()["keys"]}
        async with connect(server.url, rotated.sign(claims("beta", "after"))) as session:
            got = await result(session, "get_ticket", {"ticket_id": "TKT-104"})
            assert got == {"ok": True, "ticket": BETA_T104}
        assert jwks.hits == 2
        # Made-up kids right after a reload fetch nothing more.
        for n in range(5):
            stray = Issuer(f"stray-{n}").sign(claims("alpha", "x"), alg="EdDSA")
            assert post(server.url, INITIALIZE, stray)[0] == 401
        assert jwks.hits == 2
    finally:
        assert server.stop() == 0
        jwks.close()


@pytest.fixture(scope="module")
def stateless(folder: Path) -> Iterator[HttpServer]:
    """A server without sessions, no rate limits."""
    jwks = str(folder / "jwks.json")
    unlimited = ("--tenant-rate", "0", "--subject-rate", "0")
    yield from _started(HttpServer(folder / "stateless", jwks, "--stateless", *unlimited))


@pytest.fixture(scope="module")
def modes(server: HttpServer, stateless: HttpServer) -> dict[str, HttpServer]:
    """The shared server by mode: with sessions and without."""
    return {"sessions": server, "stateless": stateless}


BAD_ID = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Invalid Request: the id must be a string or an integer"},
}


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param(1.5, id="float"),
        pytest.param(True, id="bool"),
        pytest.param(None, id="null"),
        pytest.param([1], id="list"),
    ],
)
@pytest.mark.parametrize("mode", ["sessions", "stateless"])
def test_a_request_id_not_a_string_or_integer_is_invalid_request_not_202(
    modes: dict[str, HttpServer], token: Callable[..., str], request_id: object, mode: str
) -> None:
    bearer = token("alpha", "ids")
    target = modes[mode]
    headers = {"Mcp-Session-Id": open_session(target.url, bearer)} if mode == "sessions" else {}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
    status, _, got = post(target.url, body, bearer, headers)
    assert (status, json.loads(got)) == (400, BAD_ID)


def test_a_notification_is_still_accepted(server: HttpServer, token: Callable[..., str]) -> None:
    bearer = token("alpha", "notifier")
    sid = open_session(server.url, bearer)
    body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(server.url, body, bearer, {"Mcp-Session-Id": sid})[::2] == (202, b"")


MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_HEADERS = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
CALL_101 = {"name": "get_ticket", "arguments": {"ticket_id": "TKT-101"}}
NO_ENVELOPE = (
    "params._meta must be an object carrying the required "
    "'io.modelcontextprotocol/protocolVersion' and "
    "'io.modelcontextprotocol/clientCapabilities' envelope keys"
)
MISSING_KEY = "params._meta is missing the required envelope key(s): io.modelcontextprotocol/"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        pytest.param(None, NO_ENVELOPE, id="no-meta"),
        pytest.param(
            {"io.modelcontextprotocol/clientCapabilities": {}},
            MISSING_KEY + "protocolVersion",
            id="no-protocol-version",
        ),
        pytest.param(
            {"io.modelcontextprotocol/protocolVersion": MODERN},
            MISSING_KEY + "clientCapabilities",
            id="no-client-capabilities",
        ),
    ],
)
@pytest.mark.parametrize("mode", ["sessions", "stateless"])
def test_a_2026_request_without_its_envelope_is_invalid_params_with_its_id(
    modes: dict[str, HttpServer],
    token: Callable[..., str],
    meta: dict[str, object] | None,
    message: str,
    mode: str,
) -> None:
    params: dict[str, object] = dict(CALL_101) if meta is None else {**CALL_101, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    target = modes[mode]
    headers = {**MODERN_HEADERS, "Mcp-Name": "get_ticket"}
    status, _, got = post(target.url, body, token("alpha", "envelope"), headers)
    assert (status, json.loads(got)) == (
        400,
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": message}},
    )


def _ticket_101_answer(request_id: object) -> dict[str, object]:
    structured = execute_tool("get_ticket", {"ticket_id": "TKT-101"}, ALPHA, RECORDS)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "content": [{"type": "text", "text": json.dumps(structured)}],
            "isError": False,
            "resultType": "complete",
            "structuredContent": structured,
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {
                    "name": "ticket-tools",
                    "version": version("ticket-tools"),
                }
            },
        },
    }


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        pytest.param("get_ticket", {}, id="plain"),
        pytest.param("  get_ticket  ", {}, id="name-in-spaces"),
        pytest.param("\tget_ticket ", {}, id="name-in-tab-and-space"),
        pytest.param("get_ticket", {"unknownParam": {"x": 1}}, id="extra-params-ignored"),
    ],
)
def test_a_2026_call_trims_header_values_and_ignores_extra_params(
    stateless: HttpServer, token: Callable[..., str], name: str, extra: dict[str, object]
) -> None:
    params = {**CALL_101, "_meta": ENVELOPE, **extra}
    body = {"jsonrpc": "2.0", "id": "c-9", "method": "tools/call", "params": params}
    headers = {**MODERN_HEADERS, "Mcp-Name": name, "Mcp-Method": " tools/call "}
    status, _, got = post(stateless.url, body, token("alpha", "trim"), headers)
    assert (status, json.loads(got)) == (200, _ticket_101_answer("c-9"))


@pytest.mark.parametrize("request_id", [pytest.param(5, id="int"), pytest.param("r-5", id="str")])
def test_the_sdks_own_400_carries_the_request_id(
    server: HttpServer, token: Callable[..., str], request_id: object
) -> None:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
    status, _, got = post(server.url, body, token("alpha", "no-session"))
    assert (status, json.loads(got)) == (
        400,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
        },
    )
