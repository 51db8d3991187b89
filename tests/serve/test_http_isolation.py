"""The trust boundary of `serve http`, on every path a call can take.

Whose tickets a call reads, and whether it may read them, come from its verified token
alone: no `_meta`, argument, header or session id changes either. Each test runs on the
direct path (the default) and on the SDK's (`TICKET_TOOLS_HTTP_PATH=sdk`), with 2026-07-28
calls (no session, the envelope in `_meta`: the direct path answers them) and 2025-11-25
calls (in a session: the SDK answers them), over raw HTTP against real `serve http`
processes. A change that let one path alone take the tenant from the request (the hand
mutant tests/mutants/30-http-direct-tenant-from-meta.patch) fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from expected import ALPHA, ALPHA_NO_READ, BETA, BETA_T103, BETA_T104, BETA_T108, T104, TOOL_NAMES
from http_support import generated_calls, open_session, post
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import execute_tool, fixture_records
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli.acceptance import CALLS, AcceptanceCall
from ticket_tools.serve.direct import SWITCH
from tool_cases import invalid_arguments, valid_arguments

RECORDS = fixture_records()
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "isolation", "version": "1"},
}
UNLIMITED = ("--tenant-rate", "0", "--subject-rate", "0")
BETA_PAGE = {"ok": True, "tickets": [BETA_T103, BETA_T104, BETA_T108], "next_cursor": None}
FORBIDDEN = {"ok": False, "code": "forbidden"}
INVALID = {"ok": False, "code": "invalid_arguments"}
CLIENTS = 8  # concurrent callers per path and version, alternating alpha and beta
CALLS_PER_CLIENT = 25
# Everything a client could put in `_meta` to claim another tenant or a permission.
CLAIMING_META: dict[str, object] = {
    "tenant": "alpha",
    "sub": "alice",
    "can_read_tickets": True,
    "context": {"tenant": "alpha", "can_read_tickets": True},
    "io.modelcontextprotocol/tenant": "alpha",
    "authorization": "Bearer alpha",
}
CLAIMING_HEADERS = {
    "X-Tenant": "alpha",
    "X-Forwarded-User": "alice",
    "X-Forwarded-Authorization": "Bearer alpha",
    "X-Auth-Request-User": "alice",
    "Tenant": "alpha",
    "Mcp-Param-Tenant": "alpha",
}


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


@pytest.fixture(scope="module", params=["direct", "sdk"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, idp: Issuer
) -> Iterator[HttpServer]:
    """A server with sessions on: the direct path (the default), or the SDK's by the switch."""
    folder = tmp_path_factory.mktemp(f"isolation-{request.param}")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    env = {SWITCH: "sdk"} if request.param == "sdk" else {}
    started = HttpServer(folder / "server", str(folder / "jwks.json"), *UNLIMITED, env=env)
    yield started
    assert started.stop() == 0, started.stderr()


@pytest.fixture(params=[MODERN, HANDSHAKE])
def version(request: pytest.FixtureRequest) -> str:
    """The protocol version the calls are sent in."""
    return str(request.param)


@dataclass
class Caller:
    """Tool calls to one server in one protocol version over raw HTTP, a session per token."""

    server: HttpServer
    version: str
    sessions: dict[str, str] = field(default_factory=dict)

    def session(self, bearer: str) -> str:
        """Return the 2025-11-25 session of `bearer` on this server, opened on first use."""
        if bearer not in self.sessions:
            self.sessions[bearer] = open_session(self.server.url, bearer)
        return self.sessions[bearer]

    def send(
        self,
        bearer: str,
        name: str,
        args: object,
        *,
        meta: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Call tool `name`; return the status and the decoded answer."""
        params: dict[str, object] = {"name": name, "arguments": args}
        sent = {"MCP-Protocol-Version": self.version}
        if self.version == MODERN:
            params["_meta"] = {**ENVELOPE, **(meta or {})}
            sent |= {"Mcp-Method": "tools/call", "Mcp-Name": name}
        else:
            if meta is not None:
                params["_meta"] = dict(meta)
            sent["Mcp-Session-Id"] = self.session(bearer)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        status, _, answer = post(self.server.url, body, bearer, {**sent, **(headers or {})})
        return status, json.loads(answer)

    def result(self, bearer: str, name: str, args: object, **extra: Any) -> dict[str, object]:
        """Call tool `name`; return the contract's dict the client sees (unknown tool too)."""
        status, answer = self.send(bearer, name, args, **extra)
        if "error" in answer:
            # A protocol error: 400 where the status follows the code (2026-07-28), else 200.
            expected = 400 if self.version == MODERN else 200
            assert (status, answer["error"]["code"]) == (expected, -32602), answer
            return {"ok": False, "code": "unknown_tool"}
        assert status == 200, answer
        structured: dict[str, object] = answer["result"]["structuredContent"]
        return {key: value for key, value in structured.items() if key != "detail"}


@pytest.fixture
def caller(server: HttpServer, version: str) -> Caller:
    """Calls to the server in the version under test."""
    return Caller(server, version)


@pytest.fixture(scope="module")
def bearers(idp: Issuer) -> dict[str, str]:
    """A token per tenant kind: alpha, alpha without the read scope, beta."""
    return {
        "alpha": idp.sign(claims("alpha", "alice")),
        "alpha-no-read": idp.sign(claims("alpha", "alan", scope="openid")),
        "beta": idp.sign(claims("beta", "bob")),
    }


def _kind(call: AcceptanceCall) -> str:
    if call.context == BETA:
        return "beta"
    return "alpha" if call.context == ALPHA else "alpha-no-read"


def test_each_acceptance_call_reads_its_tokens_tenant_only(
    caller: Caller, bearers: dict[str, str]
) -> None:
    got = {call.label: caller.result(bearers[_kind(call)], call.name, call.args) for call in CALLS}
    assert got == {call.label: call.expected for call in CALLS}


def test_tkt_104_is_the_token_tenants_own(caller: Caller, bearers: dict[str, str]) -> None:
    args = {"ticket_id": "TKT-104"}
    assert caller.result(bearers["alpha"], "get_ticket", args) == {"ok": True, "ticket": T104}
    assert caller.result(bearers["beta"], "get_ticket", args) == {"ok": True, "ticket": BETA_T104}
    assert caller.result(bearers["beta"], "search_tickets", {}) == BETA_PAGE


def test_a_meta_naming_another_tenant_changes_nothing(
    caller: Caller, bearers: dict[str, str]
) -> None:
    args = {"ticket_id": "TKT-104"}
    beta, no_read = bearers["beta"], bearers["alpha-no-read"]
    got = [
        caller.result(beta, "get_ticket", args, meta=CLAIMING_META),
        caller.result(beta, "search_tickets", {}, meta=CLAIMING_META),
        caller.result(no_read, "search_tickets", {}, meta=CLAIMING_META),
        caller.result(no_read, "get_ticket", args, meta={**CLAIMING_META, "tenant": "beta"}),
    ]
    assert got == [{"ok": True, "ticket": BETA_T104}, BETA_PAGE, FORBIDDEN, FORBIDDEN]


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"tenant": "alpha"}, id="tenant"),
        pytest.param({"context": {"tenant": "alpha", "can_read_tickets": True}}, id="context"),
        pytest.param({"can_read_tickets": True}, id="permission"),
        pytest.param({"_meta": {"tenant": "alpha"}}, id="meta-in-arguments"),
    ],
)
def test_an_argument_naming_another_tenant_is_invalid(
    caller: Caller, bearers: dict[str, str], extra: dict[str, object]
) -> None:
    got = [
        caller.result(bearers["beta"], "get_ticket", {"ticket_id": "TKT-104", **extra}),
        caller.result(bearers["beta"], "search_tickets", extra),
        caller.result(bearers["alpha-no-read"], "search_tickets", extra),
    ]
    assert got == [INVALID, INVALID, INVALID]


def test_a_header_naming_another_tenant_changes_nothing(
    caller: Caller, bearers: dict[str, str]
) -> None:
    args = {"ticket_id": "TKT-104"}
    headers = CLAIMING_HEADERS
    got = [
        caller.result(bearers["beta"], "get_ticket", args, headers=headers),
        caller.result(bearers["beta"], "search_tickets", {}, headers=headers),
        caller.result(bearers["alpha-no-read"], "search_tickets", {}, headers=headers),
    ]
    assert got == [{"ok": True, "ticket": BETA_T104}, BETA_PAGE, FORBIDDEN]


def test_another_identitys_session_id_is_not_found_and_runs_no_tool(
    caller: Caller, server: HttpServer, idp: Issuer, bearers: dict[str, str]
) -> None:
    alice, alan, bob = bearers["alpha"], idp.sign(claims("alpha", "alan-2")), bearers["beta"]
    alpha_session = open_session(server.url, alice)
    beta_session = open_session(server.url, bob)
    before = server.audit_path.read_text(encoding="utf-8")
    pairs = ((bob, alpha_session), (alan, alpha_session), (alice, beta_session))
    refused = [
        caller.send(bearer, "get_ticket", {"ticket_id": "TKT-104"}, headers={"Mcp-Session-Id": sid})
        for bearer, sid in pairs
    ]
    not_found = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32600, "message": "Session not found"},
    }
    assert refused == [(404, not_found)] * 3
    assert server.audit_path.read_text(encoding="utf-8") == before  # no tool ran


BAD_ARGS = {tool.name: invalid_arguments(tool) for tool in REGISTRY}
GOOD_ARGS = {tool.name: valid_arguments(tool) for tool in REGISTRY}


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param({"scope": "openid"}, id="other-scope"),
        pytest.param({"scope": "tickets:readonly"}, id="prefix"),
        pytest.param({"scope": None, "scp": ["tickets:write"]}, id="scp-without"),
        pytest.param({"scope": ["tickets:read"]}, id="scope-a-list"),
    ],
)
def test_without_the_read_scope_every_tool_is_forbidden_after_argument_checks(
    caller: Caller, idp: Issuer, scope: dict[str, object]
) -> None:
    bearer = idp.sign(claims("alpha", "reader-without-scope", **scope))
    got = {
        name: (
            caller.result(bearer, name, BAD_ARGS[name]),
            caller.result(bearer, name, GOOD_ARGS[name]),
        )
        for name in TOOL_NAMES
    }
    assert got == dict.fromkeys(TOOL_NAMES, (INVALID, FORBIDDEN))
    assert execute_tool("get_ticket", GOOD_ARGS["get_ticket"], ALPHA_NO_READ, RECORDS) == FORBIDDEN


def test_concurrent_callers_get_exactly_what_execute_tool_gives(
    caller: Caller, idp: Issuer
) -> None:
    def client(number: int) -> list[object]:
        tenant = "alpha" if number % 2 == 0 else "beta"
        context = ALPHA if tenant == "alpha" else BETA
        bearer = idp.sign(claims(tenant, f"load-{number}"))
        mine = Caller(caller.server, caller.version)
        return [
            (number, name, args)
            for name, args in generated_calls(number, CALLS_PER_CLIENT)
            if mine.result(bearer, name, args) != execute_tool(name, args, context, RECORDS)
        ]

    with ThreadPoolExecutor(CLIENTS) as pool:
        mismatches = [m for found in pool.map(client, range(CLIENTS)) for m in found]
    assert mismatches == []
