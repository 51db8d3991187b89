"""Sessions bounded per identity, through a real `ticket-tools serve http` process.

The server runs with small caps (3 sessions per subject, 5 per tenant) and a short idle
timeout, so each bound is reached in a few requests; every session is opened over raw
HTTP, as a host would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import Message, Receive, Scope, Send

from expected import BETA_T104, T104
from http_support import INITIALIZE, PROTOCOL, open_session, post, rpc
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.serve.sessions import SessionGate, SessionLimits

PER_SUBJECT = 3
PER_TENANT = 6
IDLE_SECONDS = 3
IDLE_WAIT_SECONDS = 30  # generous: the test asserts the session ended, not when
NOT_FOUND = {
    "jsonrpc": "2.0",
    "id": 9,  # the call's own (`get_ticket` below), whoever answers the 404: the gate or the SDK
    "error": {"code": -32600, "message": "Session not found"},
}


def refusal(reason: str) -> dict[str, object]:
    """Return the JSON-RPC body of a 429 for a session cap."""
    message = (
        f"Too many open sessions: {reason}; end one (HTTP DELETE with its Mcp-Session-Id) "
        "or let one idle out"
    )
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Run the in-process gate tests on asyncio."""
    return "asyncio"


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the server trusts."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[HttpServer]:
    """A stateful server with small session caps and a short idle timeout."""
    folder = tmp_path_factory.mktemp("sessions")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    limits = [
        "--max-sessions-per-subject", str(PER_SUBJECT),
        "--max-sessions-per-tenant", str(PER_TENANT),
        "--session-idle-timeout", str(IDLE_SECONDS),
    ]  # fmt: skip
    server = HttpServer(folder / "server", str(folder / "jwks.json"), *limits)
    yield server
    assert server.stop() == 0, server.stderr()


@pytest.fixture(scope="module")
def token(idp: Issuer) -> Callable[..., str]:
    """Return a signed token for a tenant and subject."""
    return lambda tenant, subject, **extra: idp.sign(claims(tenant, subject, **extra))


def initialize(server: HttpServer, bearer: str) -> tuple[int, object]:
    """Try to open a session; return the status and the JSON body."""
    status, _, body = post(server.url, INITIALIZE, bearer)
    return status, json.loads(body)


def get_ticket(server: HttpServer, bearer: str, sid: str) -> tuple[int, object]:
    """Call get_ticket TKT-104 in session `sid`; return the status and the result or error."""
    body = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}}, 9)
    headers = {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": PROTOCOL}
    status, _, got = post(server.url, body, bearer, headers)
    answer = json.loads(got)
    return status, answer["result"]["structuredContent"] if "result" in answer else answer


def delete(server: HttpServer, bearer: str, sid: str) -> int:
    """End session `sid` as a client does (HTTP DELETE); return the status."""
    headers = {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": PROTOCOL}
    return post(server.url, b"", bearer, headers, method="DELETE")[0]


def test_one_subject_holds_at_most_its_cap_and_others_still_open_sessions(
    server: HttpServer, token: Callable[..., str]
) -> None:
    alice = token("alpha", "alice")
    sessions = [open_session(server.url, alice) for _ in range(PER_SUBJECT)]
    assert initialize(server, alice) == (429, refusal("this token's subject already holds 3"))
    # Another subject of the same tenant, and another tenant, are not affected.
    assert initialize(server, token("alpha", "carol"))[0] == 200
    assert initialize(server, token("beta", "bob"))[0] == 200
    # Alice's open sessions still serve her; ending one makes room for one more.
    assert get_ticket(server, alice, sessions[0]) == (200, {"ok": True, "ticket": T104})
    assert delete(server, alice, sessions[0]) == 200
    assert get_ticket(server, alice, sessions[0]) == (404, NOT_FOUND)
    assert initialize(server, alice)[0] == 200
    assert initialize(server, alice)[0] == 429


def test_the_same_subject_in_another_tenant_counts_against_the_same_cap(
    server: HttpServer, token: Callable[..., str]
) -> None:
    for _ in range(PER_SUBJECT - 1):
        open_session(server.url, token("eta", "dual"))
    open_session(server.url, token("theta", "dual"))
    assert initialize(server, token("theta", "dual")) == (
        429,
        refusal("this token's subject already holds 3"),
    )


def test_one_tenant_holds_at_most_its_cap_and_other_tenants_still_open_sessions(
    server: HttpServer, token: Callable[..., str]
) -> None:
    for number in range(PER_TENANT):
        open_session(server.url, token("gamma", f"g{number}"))
    assert initialize(server, token("gamma", "g-new")) == (
        429,
        refusal("this tenant already holds 6"),
    )
    assert initialize(server, token("delta", "d1"))[0] == 200


def test_a_session_answers_only_the_tenant_that_opened_it(
    server: HttpServer, token: Callable[..., str]
) -> None:
    # Same issuer, subject and client id: only the tenant claim differs.
    owner, other_tenant = token("alpha", "shared-sub"), token("beta", "shared-sub")
    sid = open_session(server.url, owner)
    assert get_ticket(server, other_tenant, sid) == (404, NOT_FOUND)
    assert get_ticket(server, token("alpha", "someone-else"), sid) == (404, NOT_FOUND)
    assert get_ticket(server, owner, sid) == (200, {"ok": True, "ticket": T104})
    other = open_session(server.url, other_tenant)
    assert get_ticket(server, other_tenant, other) == (200, {"ok": True, "ticket": BETA_T104})
    assert get_ticket(server, owner, other) == (404, NOT_FOUND)


def test_an_unknown_session_id_is_not_found(server: HttpServer, token: Callable[..., str]) -> None:
    assert get_ticket(server, token("alpha", "guesser"), "0" * 32) == (404, NOT_FOUND)


@pytest.mark.parametrize(
    ("body", "request_id"),
    [
        pytest.param({**rpc("tools/list", {}), "id": 5}, 5, id="int"),
        pytest.param({**rpc("tools/list", {}), "id": "r-5"}, "r-5", id="str"),
        pytest.param({**rpc("tools/list", {}), "id": 1.5}, None, id="float"),
        pytest.param({"jsonrpc": "2.0", "method": "notifications/initialized"}, None, id="none"),
        pytest.param(b"[1", None, id="not-json"),
    ],
)
def test_a_404_carries_the_request_id_when_it_is_known(
    server: HttpServer,
    token: Callable[..., str],
    body: bytes | dict[str, object],
    request_id: object,
) -> None:
    # It was null whatever the body (issue 30).
    headers = {"Mcp-Session-Id": "0" * 32, "Mcp-Protocol-Version": PROTOCOL}
    status, _, got = post(server.url, body, token("alpha", "guesser"), headers)
    assert (status, json.loads(got)) == (404, {**NOT_FOUND, "id": request_id})


def test_an_idle_session_ends_and_frees_its_place(
    server: HttpServer, token: Callable[..., str]
) -> None:
    idler = token("epsilon", "idler")
    sessions = [open_session(server.url, idler) for _ in range(PER_SUBJECT)]
    assert initialize(server, idler)[0] == 429
    deadline = time.monotonic() + IDLE_WAIT_SECONDS
    while initialize(server, idler)[0] == 429 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [get_ticket(server, idler, sid) for sid in sessions] == [(404, NOT_FOUND)] * PER_SUBJECT
    assert initialize(server, idler)[0] == 200


def test_a_refused_request_opens_nothing(server: HttpServer, token: Callable[..., str]) -> None:
    bearer = token("zeta", "z")
    call = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}})
    for _ in range(PER_SUBJECT + 2):
        assert post(server.url, call, bearer)[0] == 400  # no session id, not an initialize
    assert [initialize(server, bearer)[0] for _ in range(PER_SUBJECT + 1)] == [200] * 3 + [429]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"per_subject": 0}, "session caps must be at least 1", id="per-subject"),
        pytest.param({"per_tenant": 0}, "session caps must be at least 1", id="per-tenant"),
        pytest.param(
            {"idle_seconds": 0},
            "the session idle timeout must be a positive number of seconds",
            id="idle-zero",
        ),
        pytest.param(
            {"idle_seconds": float("inf")},
            "the session idle timeout must be a positive number of seconds",
            id="idle-infinite",
        ),
    ],
)
def test_limits_that_break_their_rule_raise(fields: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        SessionLimits(**fields)  # type: ignore[arg-type]


class Downstream:
    """The SDK's endpoint as the gate sees it: opens a session per request without an id."""

    def __init__(self) -> None:
        self.opened = 0
        self.status = 200

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        answer: list[tuple[bytes, bytes]] = []
        if b"mcp-session-id" not in headers and self.status < 400:
            self.opened += 1
            answer.append((b"mcp-session-id", f"s{self.opened}".encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": answer})
        await send({"type": "http.response.body", "body": b""})


def user(tenant: str, subject: str) -> AuthenticatedUser:
    """Return the user the SDK's auth middleware puts in the scope for a verified token."""
    claims = {"iss": "https://idp.example.test/", "tenant": tenant}
    token = AccessToken(token="t", client_id=subject, scopes=[], subject=subject, claims=claims)  # noqa: S106
    return AuthenticatedUser(token)


async def ask(
    gate: SessionGate, who: AuthenticatedUser | None, sid: str | None = None, method: str = "POST"
) -> tuple[int, str | None]:
    """Send one request through the gate; return the status and the session id answered."""
    headers = [] if sid is None else [(b"mcp-session-id", sid.encode())]
    scope = {"type": "http", "path": "/mcp", "method": method, "headers": headers, "user": who}
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    await gate(scope, receive, send)
    answer = dict(sent[0].get("headers", []))
    opened = answer.get(b"mcp-session-id")
    return sent[0]["status"], None if opened is None else opened.decode()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def gate_with(
    clock: Clock, downstream: Downstream | None = None, **limits: Any
) -> tuple[SessionGate, Downstream]:
    """Return a gate in front of a fake SDK endpoint, on a hand-moved clock."""
    app = downstream or Downstream()
    gate = SessionGate(
        app,
        path="/mcp",
        limits=SessionLimits(**limits),
        tenant_claim="tenant",
        clock=clock,
    )
    return gate, app


@pytest.mark.anyio
async def test_the_gate_passes_what_is_not_an_authenticated_mcp_request() -> None:
    gate, _ = gate_with(Clock())
    assert await ask(gate, None) == (200, "s1")  # the auth layer in front answers 401
    seen: list[str] = []

    async def other(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    gate.app = other
    await gate({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    await gate({"type": "http", "path": "/healthz"}, None, None)  # type: ignore[arg-type]
    assert (seen, gate.open_sessions()) == (["lifespan", "http"], 0)


@pytest.mark.anyio
async def test_an_idle_session_stops_counting_at_the_timeout() -> None:
    clock = Clock()
    gate, _ = gate_with(clock, per_subject=2, idle_seconds=8)
    alice = user("alpha", "alice")
    assert [await ask(gate, alice) for _ in range(3)] == [(200, "s1"), (200, "s2"), (429, None)]
    clock.now = 7.9  # a sweep runs (2 s since the last): nothing idle yet
    assert await ask(gate, alice) == (429, None)
    clock.now = 8.0  # idle now, 0.1 s after the last sweep: the count forgets both
    assert await ask(gate, alice) == (200, "s3")
    assert (await ask(gate, alice, "s1"), gate.open_sessions()) == ((404, None), 1)


@pytest.mark.anyio
async def test_a_sweep_forgets_idle_sessions_of_identities_that_never_return() -> None:
    clock = Clock()
    gate, _ = gate_with(clock, idle_seconds=8)
    await ask(gate, user("alpha", "once"))
    await ask(gate, user("beta", "once-too"))
    assert gate.open_sessions() == 2
    clock.now = 8.0
    await ask(gate, user("gamma", "late"))
    assert gate.open_sessions() == 1


@pytest.mark.anyio
async def test_a_404_or_a_delete_from_the_sdk_forgets_the_session() -> None:
    clock = Clock()
    gate, app = gate_with(clock)
    alice = user("alpha", "alice")
    assert [await ask(gate, alice) for _ in range(2)] == [(200, "s1"), (200, "s2")]
    app.status = 404  # the SDK ended s1 on its own (its idle timeout)
    assert await ask(gate, alice, "s1") == (404, None)
    app.status = 200
    assert await ask(gate, alice, "s1") == (404, None)  # now refused by the gate itself
    assert await ask(gate, alice, "s2", "DELETE") == (200, None)
    assert gate.open_sessions() == 0


@pytest.mark.anyio
async def test_an_opening_request_that_fails_opens_nothing() -> None:
    gate, app = gate_with(Clock(), per_subject=1)
    app.status = 400
    assert await ask(gate, user("alpha", "a")) == (400, None)
    assert gate.open_sessions() == 0

    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("the endpoint failed")

    gate.app = broken
    with pytest.raises(RuntimeError):
        await ask(gate, user("alpha", "a"))
    assert gate.open_sessions() == 0


@pytest.mark.anyio
async def test_a_refused_session_waits_and_a_request_sent_after_it_is_answered_first() -> None:
    # As a rate limit's 429 (test_limits.py): a token opening sessions in a loop waits
    # between its refusals, and another subject's new session, asked after, opens first.
    gate, _ = gate_with(Clock(), per_subject=1)
    alice, bob = user("alpha", "alice"), user("alpha", "bob")
    assert await ask(gate, alice) == (200, "s1")
    answered: list[tuple[str, tuple[int, str | None]]] = []

    async def asking(name: str, who: AuthenticatedUser) -> None:
        answered.append((name, await ask(gate, who)))

    async with anyio.create_task_group() as group:
        group.start_soon(asking, "alice", alice)
        group.start_soon(asking, "bob", bob)
    assert answered == [("bob", (200, "s2")), ("alice", (429, None))]
