"""Fair share per tenant: rate limits on tool calls and on the rest, and a share of the workers.

Real servers, each with its own low limits so that a short burst crosses them whatever
the machine's speed, and one with the default limits driven as a host that opens a
session per tool call does; the share of store workers is seen on a real PostgreSQL
whose table is locked, through the server's own metrics.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conftest import PostgresDatabase, StoreFactory
from expected import T104
from http_support import PROTOCOL, open_session, post
from replica_support import call, locked_table, metric, origin, request, rpc, wait_until
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.outcome import Outcome
from ticket_tools.serve import limits
from ticket_tools.serve.direct import SWITCH
from ticket_tools.serve.limits import Buckets, RateLimits, Refusal

# Requests sent one after another: over the small buckets below even though each refusal
# is answered REFUSAL_DELAY_SECONDS late (2 requests/s against 1/s refills).
BURST = 12
LIST = rpc("tools/list")
GET_104 = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}})
REFUSED_BODY = {
    "jsonrpc": "2.0",
    "id": 1,  # the refused request's
    "error": {
        "code": -32000,
        "message": "too many calls for this token subject; retry after the Retry-After seconds",
    },
}


def rate_limited(who: str) -> dict[str, object]:
    """The tool result of a call over `who`'s rate, retry in 1 s, as a host receives it."""
    detail = f"too many tool calls for this {who}; retry in 1 s"
    return {
        "content": [{"type": "text", "text": f"rate_limited: {detail}"}],
        "structuredContent": {
            "ok": False,
            "code": "rate_limited",
            "retry_after": 1,
            "detail": detail,
        },
        "isError": True,
    }


OK_104 = {
    "content": [{"type": "text", "text": json.dumps({"ok": True, "ticket": T104})}],
    "structuredContent": {"ok": True, "ticket": T104},
    "isError": False,
}


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    """The provider's JWKS file."""
    path = tmp_path_factory.mktemp("limits") / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


def _serve(folder: Path, jwks: Path, *extra: str) -> Iterator[HttpServer]:
    started = HttpServer(folder, str(jwks), "--stateless", *extra)
    yield started
    assert started.stop() == 0, started.stderr()


@pytest.fixture
def subject_limited(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server allowing each subject 1 tool call/s (bursts of 2), tenants unlimited."""
    yield from _serve(tmp_path, jwks, "--subject-rate", "1", "--tenant-rate", "0")


@pytest.fixture
def tenant_limited(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server allowing each tenant 2 tool calls/s (bursts of 4), subjects unlimited."""
    yield from _serve(tmp_path, jwks, "--tenant-rate", "2", "--subject-rate", "0")


@pytest.fixture
def housekeeping_limited(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server allowing each subject 1 other request/s (bursts of 2): 0.2 tool calls/s."""
    yield from _serve(tmp_path, jwks, "--subject-rate", "0.2", "--tenant-rate", "0")


def _results(answers: list[tuple[int, dict[str, str], bytes]]) -> list[Any]:
    assert [status for status, _, _ in answers] == [200] * len(answers)
    return [json.loads(body)["result"] for _, _, body in answers]


def test_a_tool_call_over_the_subjects_rate_is_a_tool_result_and_runs_no_tool(
    subject_limited: HttpServer, idp: Issuer
) -> None:
    url = subject_limited.url
    alice, ann = idp.sign(claims("alpha", "alice")), idp.sign(claims("alpha", "ann"))
    results = _results([request(url, GET_104, bearer=alice) for _ in range(BURST)])
    assert results[:2] == [OK_104, OK_104]  # the burst
    refused = [answer for answer in results if answer != OK_104]
    assert refused == [rate_limited("token subject")] * len(refused)
    assert refused  # each refusal waits 0.5 s: 2 calls a second against 1 refill
    # Another subject of the same tenant is not held back by alice's burst.
    assert _results([request(url, GET_104, bearer=ann)]) == [OK_104]
    # A refused call ran no tool: one audit line per call answered, none for the others.
    assert len(subject_limited.audit_lines()) == results.count(OK_104) + 1
    base = origin(url)
    assert metric(base, "ticket_tools_refusals_total", limit="subject_rate") == len(refused)
    assert metric(base, "ticket_tools_refusals_total", limit="tenant_rate") == 0
    assert metric(base, "ticket_tools_tool_calls_total", tool="get_ticket", code="ok") == (
        results.count(OK_104) + 1
    )


MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "limits", "version": "1"},
}
MODERN_HEADERS = {
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "get_ticket",
}


@pytest.mark.parametrize("path", ["direct", "sdk"])
def test_a_2026_07_28_call_over_its_rate_is_the_same_tool_result_on_both_paths(
    tmp_path: Path, jwks: Path, idp: Issuer, path: str
) -> None:
    env = {SWITCH: path}
    server = HttpServer(tmp_path, str(jwks), "--stateless", "--subject-rate", "1", env=env)
    try:
        alice = idp.sign(claims("alpha", "alice"))
        body = rpc(
            "tools/call",
            {"_meta": MODERN_META, "name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}},
        )
        answers = [post(server.url, body, alice, MODERN_HEADERS) for _ in range(3)]
    finally:
        assert server.stop() == 0, server.stderr()
    assert [status for status, _, _ in answers] == [200] * 3
    stamp = {
        "io.modelcontextprotocol/serverInfo": {
            "name": "ticket-tools",
            "version": version("ticket-tools"),
        }
    }
    refused = {**rate_limited("token subject"), "resultType": "complete", "_meta": stamp}
    results = [json.loads(answer)["result"] for _, _, answer in answers]
    assert results[:2] == [{**OK_104, "resultType": "complete", "_meta": stamp}] * 2
    assert results[2] == refused  # the burst of 2 is spent, and a token takes 1 s


def test_requests_other_than_tool_calls_have_their_own_bucket(
    subject_limited: HttpServer, idp: Issuer
) -> None:
    # alice's tool calls are over their rate; her tools/list are not (5 times as many).
    url = subject_limited.url
    alice = idp.sign(claims("alpha", "alice"))
    calls = _results([request(url, GET_104, bearer=alice) for _ in range(4)])
    assert rate_limited("token subject") in calls
    assert [request(url, LIST, bearer=alice)[0] for _ in range(5)] == [200] * 5


def test_other_requests_over_their_rate_get_429_with_retry_after(
    housekeeping_limited: HttpServer, idp: Issuer
) -> None:
    url = housekeeping_limited.url
    alice = idp.sign(claims("alpha", "alice"))
    answers = [request(url, LIST, bearer=alice) for _ in range(BURST)]
    statuses = [status for status, _, _ in answers]
    assert statuses[:2] == [200, 200]  # the burst
    assert set(statuses) == {200, 429}
    refused = [
        (headers["retry-after"], json.loads(body))
        for status, headers, body in answers
        if status == 429
    ]
    assert refused == [("1", REFUSED_BODY)] * len(refused)
    base = origin(url)
    assert metric(base, "ticket_tools_refusals_total", limit="subject_housekeeping_rate") == len(
        refused
    )
    assert metric(base, "ticket_tools_refusals_total", limit="subject_rate") == 0


def test_a_tenant_over_its_rate_gets_rate_limited_and_another_tenant_is_answered(
    tenant_limited: HttpServer, idp: Issuer
) -> None:
    url = tenant_limited.url
    # Each call from another alpha user: only the tenant's bucket can refuse them.
    results = _results(
        [request(url, GET_104, bearer=idp.sign(claims("alpha", f"user-{n}"))) for n in range(BURST)]
    )
    assert results[:4] == [OK_104] * 4
    refused = [answer for answer in results if answer != OK_104]
    assert refused == [rate_limited("tenant")] * len(refused)
    assert refused
    got = call(url, idp.sign(claims("beta", "bob")), "get_ticket", {"ticket_id": "TKT-104"})
    assert got["structuredContent"]["ok"] is True
    assert metric(origin(url), "ticket_tools_refusals_total", limit="tenant_rate") == len(refused)


# --- a host that opens a session per tool call, against the default limits

WALK_TICKETS = 40
PARALLEL_CALLS = 10
SESSION_VERSION = "2025-11-25"
HOST_INITIALIZE = rpc(
    "initialize",
    {
        "protocolVersion": SESSION_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "session-per-call", "version": "0"},
    },
)
INITIALIZED: dict[str, object] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# What each of the six requests is answered: initialize, initialized, the GET stream,
# tools/call, tools/list, DELETE.
PER_CALL_STATUSES = [200, 202, 200, 200, 200, 200]


def _walk_ticket(n: int) -> dict[str, str]:
    return {"id": f"TKT-{n:03d}", "title": f"Walk ticket {n}", "status": "open"}


@pytest.fixture
def default_limits(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server with sessions and every default limit; alpha holds WALK_TICKETS tickets."""
    records = {f"alpha:TKT-{n:03d}": _walk_ticket(n) for n in range(1, WALK_TICKETS + 1)}
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    started = HttpServer(tmp_path, str(jwks), "--records", str(path))
    yield started
    assert started.stop() == 0, started.stderr()


def _per_call(port: int, bearer: str, name: str, args: dict[str, object]) -> tuple[list[int], Any]:
    """One tool call as langchain-mcp-adapters makes it by default: a session of its own.

    initialize, initialized, the GET stream (held open), tools/call, tools/list, DELETE;
    return each request's status and the call's result.
    """
    headers = {
        "Authorization": f"Bearer {bearer}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    stream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    statuses: list[int] = []

    def post(message: dict[str, object]) -> Any:
        link.request("POST", "/mcp", json.dumps(message), headers)
        response = link.getresponse()
        body = response.read()
        statuses.append(response.status)
        headers.setdefault("Mcp-Session-Id", response.getheader("mcp-session-id") or "")
        return json.loads(body) if body else None

    try:
        post(HOST_INITIALIZE)
        headers["MCP-Protocol-Version"] = SESSION_VERSION
        post(INITIALIZED)
        stream.request("GET", "/mcp", headers={**headers, "Accept": "text/event-stream"})
        statuses.append(stream.getresponse().status)
        answer = post(rpc("tools/call", {"name": name, "arguments": args}))
        post(LIST)
        link.request("DELETE", "/mcp", headers=headers)
        deleted = link.getresponse()
        deleted.read()
        statuses.append(deleted.status)
    finally:
        stream.close()
        link.close()
    return statuses, answer["result"]["structuredContent"]


def test_a_session_per_call_host_walks_40_pages_and_calls_10_at_once(
    default_limits: HttpServer, idp: Issuer
) -> None:
    port, base = default_limits.port, origin(default_limits.url)
    alice = idp.sign(claims("alpha", "alice"))
    pages: list[tuple[list[int], Any]] = []
    args: dict[str, object] = {"limit": 1}
    while len(pages) <= WALK_TICKETS:
        pages.append(_per_call(port, alice, "search_tickets", args))
        cursor = pages[-1][1]["next_cursor"]
        if cursor is None:
            break
        args = {"limit": 1, "cursor": cursor}
    expected_pages = [
        (PER_CALL_STATUSES, {"ok": True, "tickets": [_walk_ticket(n)], "next_cursor": cursor})
        for n, cursor in [(n, f"TKT-{n:03d}") for n in range(1, WALK_TICKETS)]
    ]
    last = {"ok": True, "tickets": [_walk_ticket(WALK_TICKETS)], "next_cursor": None}
    assert pages == [*expected_pages, (PER_CALL_STATUSES, last)]
    # The walk may have spent the whole burst (40 calls): ten more need half a second of
    # the default rate's refill, however fast the walk went.
    time.sleep((PARALLEL_CALLS + 1) / limits.DEFAULT_SUBJECT_RATE)
    ids = [f"TKT-{n:03d}" for n in range(1, PARALLEL_CALLS + 1)]
    with ThreadPoolExecutor(PARALLEL_CALLS) as pool:
        at_once = list(
            pool.map(lambda i: _per_call(port, alice, "get_ticket", {"ticket_id": i}), ids)
        )
    assert at_once == [
        (PER_CALL_STATUSES, {"ok": True, "ticket": _walk_ticket(n)})
        for n in range(1, PARALLEL_CALLS + 1)
    ]
    # Every DELETE was answered, so no session was left to count against the subject.
    wait_until(lambda: metric(base, "ticket_tools_sessions_open") == 0, "no session open")
    refusals = {
        limit: metric(base, "ticket_tools_refusals_total", limit=limit)
        for limit in (
            "tenant_rate",
            "subject_rate",
            "tenant_housekeeping_rate",
            "subject_housekeeping_rate",
        )
    }
    assert refusals == dict.fromkeys(refusals, 0)


@pytest.fixture
def sessions_limited(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server with sessions allowing each subject 5 other requests/s (bursts of 10)."""
    started = HttpServer(tmp_path, str(jwks), "--subject-rate", "1", "--tenant-rate", "0")
    yield started
    assert started.stop() == 0, started.stderr()


FLOOD = 30  # at once: well over what is left of a burst of 10


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_requests_naming_a_session_that_is_not_theirs_are_counted(
    sessions_limited: HttpServer, idp: Issuer, method: str
) -> None:
    # They were answered 404 by the session gate before the rate limits saw them: a flood
    # of them (a DELETE flood too) was never counted nor slowed.
    url, base = sessions_limited.url, origin(sessions_limited.url)
    alice, bob = idp.sign(claims("alpha", "alice")), idp.sign(claims("alpha", "bob"))
    bobs = open_session(url, bob)
    sid = open_session(url, alice)
    headers = {"Mcp-Session-Id": bobs, "Mcp-Protocol-Version": PROTOCOL}
    body = b"" if method == "DELETE" else json.dumps(LIST).encode()
    with ThreadPoolExecutor(FLOOD) as pool:  # at once: a failed DELETE is answered 0.5 s late
        statuses = list(
            pool.map(lambda _: post(url, body, alice, headers, method=method)[0], range(FLOOD))
        )
    refused = statuses.count(429)
    assert (sorted(set(statuses)), statuses.count(404) + refused) == ([404, 429], FLOOD)
    assert metric(base, "ticket_tools_refusals_total", limit="subject_housekeeping_rate") == (
        refused
    )
    # Alice's bucket is empty; ending her own session is still never refused, and bob's
    # session was never touched.
    assert post(url, b"", alice, {**headers, "Mcp-Session-Id": sid}, method="DELETE")[0] == 200
    assert post(url, b"", bob, headers, method="DELETE")[0] == 200


def test_a_request_without_a_valid_token_is_still_401_not_429(
    subject_limited: HttpServer,
) -> None:
    statuses = {request(subject_limited.url, LIST)[0] for _ in range(5)}
    assert statuses == {401}


@pytest.fixture
def pg(postgres_factory: StoreFactory, postgres_database: PostgresDatabase) -> PostgresDatabase:
    """The session's database, holding the fixture records."""
    postgres_factory(fixture_records())
    return postgres_database


@pytest.fixture
def patient(tmp_path: Path, jwks: Path, pg: PostgresDatabase) -> Iterator[HttpServer]:
    """A PostgreSQL server whose calls wait long for the store: 4 workers, 2 per tenant."""
    yield from _serve(tmp_path, jwks, "--postgres", pg.reader, "--store-timeout", "60")


def test_one_tenant_holds_at_most_its_share_of_the_store_workers(
    patient: HttpServer, pg: PostgresDatabase, idp: Issuer
) -> None:
    url, base = patient.url, origin(patient.url)
    bob, alice = idp.sign(claims("beta", "bob")), idp.sign(claims("alpha", "alice"))
    args = {"ticket_id": "TKT-104"}
    with ThreadPoolExecutor(7) as pool, locked_table(pg.superuser):
        beta = [pool.submit(call, url, bob, "get_ticket", args) for _ in range(6)]
        wait_until(lambda: metric(base, "ticket_tools_store_calls_in_flight") == 6, "beta's 6")
        busy_with_beta_alone = metric(base, "ticket_tools_store_workers_busy")
        alpha = pool.submit(call, url, alice, "get_ticket", args)
        wait_until(lambda: metric(base, "ticket_tools_store_calls_in_flight") == 7, "alpha's")
        # Beta asked for six workers and holds its two; alpha's call found a free one.
        wait_until(lambda: metric(base, "ticket_tools_store_workers_busy") == 3, "3 busy")
    assert busy_with_beta_alone == 2
    assert alpha.result()["structuredContent"] == {"ok": True, "ticket": T104}
    assert [future.result()["structuredContent"]["ok"] for future in beta] == [True] * 6


def test_a_bucket_holds_two_seconds_of_its_rate_and_refills() -> None:
    now = [100.0]
    buckets = Buckets(2.0, clock=lambda: now[0])
    for _ in range(4):
        assert buckets.wait("alice") == 0
        buckets.take("alice")
    assert buckets.wait("alice") == 0.5  # one token at 2 per second
    assert buckets.wait("ann") == 0  # a bucket per key
    now[0] += 0.5
    assert buckets.wait("alice") == 0


def test_a_zero_rate_never_refuses_and_keeps_no_bucket() -> None:
    buckets = Buckets(0.0)
    for _ in range(100):
        assert buckets.wait("alice") == 0
        buckets.take("alice")
    assert buckets._buckets == {}


def test_full_buckets_are_dropped_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_BUCKETS", 2)
    now = [0.0]
    buckets = Buckets(1.0, clock=lambda: now[0])
    buckets.take("a")
    buckets.take("b")
    now[0] += 10  # a and b are full again
    buckets.take("c")
    assert list(buckets._buckets) == ["c"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("tenant_rate", -1.0, id="negative"),
        pytest.param("subject_rate", float("nan"), id="nan"),
        pytest.param("tenant_rate", "10", id="a-string"),
        # A refusal's wait was infinite (OverflowError, a 500), or 301 digits of seconds.
        pytest.param("subject_rate", 1e-320, id="denormal"),
        pytest.param("subject_rate", 1e-300, id="tiny"),
        pytest.param("tenant_rate", 0.0009, id="under-the-lowest"),
        pytest.param("tenant_rate", 1e6, id="the-highest"),
        pytest.param("tenant_rate", 1e308, id="huge"),
        pytest.param("subject_rate", float("inf"), id="inf"),
    ],
)
def test_rate_limits_refuse_values_that_break_their_rule(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RateLimits(**{field: value})  # type: ignore[arg-type]


def _share(rate: float, events: list[object], *, draining: bool = False) -> limits.FairShare:
    """FairShare at /mcp with `rate` tool calls/s per subject, tenants unlimited, in front of
    an app that records what reaches it: (subject, method, its mark, the body it reads)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        if scope["method"] == "POST":
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
        user = scope.get("user")
        who = user.access_token.subject if isinstance(user, AuthenticatedUser) else None
        events.append((who, scope["method"], scope.get(limits.RATE_LIMITED_KEY), body))

    return limits.FairShare(
        app,
        path="/mcp",
        limits=RateLimits(tenant_rate=0, subject_rate=rate),
        tenant_claim="tenant",
        draining=lambda: draining,
        refused=lambda limit: events.append(("refused", limit)),
    )


def _user(tenant: str, subject: str) -> AuthenticatedUser:
    claims = {"iss": "https://idp.example.test/", "tenant": tenant}
    token = AccessToken(token="t", client_id=subject, scopes=[], subject=subject, claims=claims)  # noqa: S106
    return AuthenticatedUser(token)


def _ask(method: str, subject: str | None = "alice") -> Scope:
    scope: Scope = {"type": "http", "path": "/mcp", "method": method, "headers": []}
    if subject is not None:
        scope["user"] = _user("alpha", subject)
    return scope


def _receiving(*bodies: bytes) -> Receive:
    """A `receive` giving one body in the pieces given."""
    pending = [
        {"type": "http.request", "body": body, "more_body": n < len(bodies) - 1}
        for n, body in enumerate(bodies)
    ]

    async def receive() -> Message:
        return pending.pop(0)

    return receive


def _sender(events: list[object], subject: str = "alice") -> Send:
    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            events.append((subject, message["status"], dict(message["headers"])[b"retry-after"]))

    return send


CALL_BODY = json.dumps(GET_104).encode()
PEEK = limits.ID_PEEK_BYTES


@pytest.mark.anyio
async def test_a_request_without_a_verified_user_passes_to_the_app_unlimited() -> None:
    # In the served app the token layer answers 401 first; alone, the middleware must still
    # pass such a request on (never count it against a tenant) rather than fail on it.
    events: list[object] = []
    share = _share(0.5, events)
    for _ in range(3):
        await share(_ask("POST", None), _receiving(CALL_BODY), _sender(events))
    assert events == [(None, "POST", None, CALL_BODY)] * 3


@pytest.mark.anyio
async def test_a_refused_tool_call_goes_on_marked_with_whose_rate_and_when_to_retry() -> None:
    events: list[object] = []
    share = _share(0.5, events)  # a burst of 1, a token every 2 s
    for _ in range(2):
        await share(_ask("POST"), _receiving(CALL_BODY[:10], CALL_BODY[10:]), _sender(events))
    assert events == [
        ("alice", "POST", None, CALL_BODY),
        ("refused", "subject_rate"),
        ("alice", "POST", Refusal("token subject", 2), CALL_BODY),
    ]


@pytest.mark.anyio
async def test_a_refusal_waits_and_a_request_sent_after_it_is_answered_first() -> None:
    # A client refused in a loop must wait between its calls, or its refusals take the
    # event loop from everyone: the 429 goes out after REFUSAL_DELAY_SECONDS, and another
    # subject's request, sent after the refused one, is answered before it.
    events: list[object] = []
    share = _share(0.1, events)  # other requests: 0.5/s, a burst of 1
    await share(_ask("GET"), _receiving(b""), _sender(events))
    async with anyio.create_task_group() as group:
        group.start_soon(share, _ask("GET"), _receiving(b""), _sender(events))
        group.start_soon(share, _ask("GET", "bob"), _receiving(b""), _sender(events, "bob"))
    assert events == [
        ("alice", "GET", None, b""),
        ("refused", "subject_housekeeping_rate"),
        ("bob", "GET", None, b""),
        ("alice", 429, b"2"),
    ]
    assert limits.REFUSAL_DELAY_SECONDS == 0.5


@pytest.mark.anyio
async def test_a_body_past_the_peek_counts_as_a_call_and_is_refused_429() -> None:
    # Its method is not read, so it cannot be answered as a tool result.
    events: list[object] = []
    share = _share(0.5, events)
    big = b'{"id": 3, "method": "ping", "pad": "' + b"x" * PEEK + b'"}'
    for _ in range(2):
        pieces = big[:100], big[100 : PEEK + 100], big[PEEK + 100 :]
        await share(_ask("POST"), _receiving(*pieces), _sender(events))
    assert events == [
        ("alice", "POST", None, big),
        ("refused", "subject_rate"),
        ("alice", 429, b"2"),
    ]


@pytest.mark.parametrize(
    ("size", "counted_as"), [(PEEK, "subject_housekeeping_rate"), (PEEK + 1, "subject_rate")]
)
@pytest.mark.anyio
async def test_a_body_that_comes_whole_is_read_only_up_to_the_peek(
    size: int, counted_as: str
) -> None:
    # A chunked body comes in one message, with no Content-Length to say its size first.
    # At the peek its method is read: a ping, housekeeping, whose 429 carries its id. One
    # byte past it, it counts as a call, unparsed: its 429's id is null.
    pad = b"x" * (size - len(b'{"id": 3, "method": "ping", "pad": ""}'))
    ping = b'{"id": 3, "method": "ping", "pad": "' + pad + b'"}'
    assert len(ping) == size
    events: list[object] = []
    share = _share(0.1, events)  # a burst of 1 in each bucket
    answers = []
    for _ in range(2):
        sent: list[Message] = []

        async def send(message: Message, sent: list[Message] = sent) -> None:
            sent.append(message)

        await share(_ask("POST"), _receiving(ping), send)
        answers.append((sent[0]["status"], json.loads(sent[1]["body"])["id"]) if sent else None)
    assert answers == [None, (429, 3 if size == PEEK else None)]
    assert events == [("alice", "POST", None, ping), ("refused", counted_as)]


@pytest.mark.anyio
async def test_a_refusal_at_the_lowest_rate_waits_a_thousand_seconds_at_most() -> None:
    events: list[object] = []
    share = _share(limits.MIN_RATE, events)  # a burst of 1: a token every 1,000 s
    for _ in range(2):
        await share(_ask("POST"), _receiving(CALL_BODY), _sender(events))
    for _ in range(2):
        await share(_ask("GET"), _receiving(b""), _sender(events))  # five times as fast
    assert events == [
        ("alice", "POST", None, CALL_BODY),
        ("refused", "subject_rate"),
        ("alice", "POST", Refusal("token subject", 1000), CALL_BODY),
        ("alice", "GET", None, b""),
        ("refused", "subject_housekeeping_rate"),
        ("alice", 429, b"200"),
    ]
    assert limits.MAX_RETRY_AFTER_SECONDS == 1000


def _answering(status: int, events: list[object]) -> ASGIApp:
    """An app answering every request `status` (a DELETE the gate or the SDK answers)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        events.append(("app", scope["method"], status))
        body = json.dumps({"status": status}).encode()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return app


async def _delete(share: limits.FairShare) -> tuple[int, bytes, bytes | None]:
    """Send a DELETE through `share`; return its status, body and Retry-After."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await share(_ask("DELETE"), _receiving(b""), send)
    return sent[0]["status"], sent[1]["body"], dict(sent[0]["headers"]).get(b"retry-after")


@pytest.mark.parametrize("draining", [False, True])
@pytest.mark.anyio
async def test_a_delete_that_ends_a_session_is_never_counted_nor_refused(draining: bool) -> None:
    events: list[object] = []
    share = _share(0.1, events, draining=draining)  # other requests: 0.5/s, a burst of 1
    share.app = _answering(200, events)
    answers = [await _delete(share) for _ in range(4)]
    assert answers == [(200, b'{"status": 200}', None)] * 4
    assert events == [("app", "DELETE", 200)] * 4


@pytest.mark.anyio
async def test_while_draining_every_request_but_a_delete_is_answered_503() -> None:
    events: list[object] = []
    share = _share(0.1, events, draining=True)
    for method in ("POST", "GET"):
        await share(_ask(method), _receiving(CALL_BODY), _sender(events))
    assert events == [("refused", "draining"), ("alice", 503, b"1")] * 2


@pytest.mark.parametrize("status", [404, 400, 405])
@pytest.mark.anyio
async def test_a_delete_that_ends_no_session_is_counted_and_answered_as_a_refusal(
    status: int,
) -> None:
    # Another identity's session or one that ended (the gate's 404), none named (the SDK's
    # 400), any with --stateless: housekeeping, answered 0.5 s late, 429 past the rate.
    events: list[object] = []
    share = _share(0.1, events)  # other requests: 0.5/s, a burst of 1
    share.app = _answering(status, events)
    first, second = await _delete(share), await _delete(share)
    refused = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32000,
            "message": "too many calls for this token subject; retry after the Retry-After seconds",
        },
    }
    assert (first, second[0], json.loads(second[1]), second[2]) == (
        (status, json.dumps({"status": status}).encode(), None),
        429,
        refused,
        b"2",
    )
    assert events == [
        ("app", "DELETE", status),
        ("app", "DELETE", status),
        ("refused", "subject_housekeeping_rate"),
    ]
    share.app = _answering(200, events)
    assert await _delete(share) == (200, b'{"status": 200}', None)  # its own: still ended


@pytest.mark.anyio
async def test_a_delete_that_ends_no_session_waits_and_others_are_answered_first() -> None:
    events: list[object] = []
    share = _share(0.1, events)
    share.app = _answering(404, events)

    async def other(scope: Scope, receive: Receive, send: Send) -> None:
        events.append("bob answered")

    async def answered(message: Message) -> None:
        if message["type"] == "http.response.start":
            events.append(("alice answered", message["status"]))

    async with anyio.create_task_group() as group:
        group.start_soon(share, _ask("DELETE"), _receiving(b""), answered)
        await anyio.sleep(0.1)  # the gate has answered it 404; the answer waits
        share.app = other
        group.start_soon(share, _ask("GET", "bob"), _receiving(b""), _sender(events, "bob"))
    assert events == [("app", "DELETE", 404), "bob answered", ("alice answered", 404)]


@pytest.mark.anyio
async def test_a_delete_without_a_verified_user_passes_to_the_app_uncounted() -> None:
    events: list[object] = []
    share = _share(0.1, events)
    share.app = _answering(401, events)
    answers = []

    async def send(message: Message) -> None:
        answers.append(message.get("status"))

    for _ in range(3):
        await share(_ask("DELETE", None), _receiving(b""), send)
    assert (events, answers) == ([("app", "DELETE", 401)] * 3, [401, None] * 3)


@pytest.mark.anyio
async def test_a_body_declared_past_the_peek_is_not_read_before_the_app() -> None:
    # The SDK answers 413 from Content-Length alone; the limit must not wait for the body.
    events: list[object] = []
    share = _share(0.5, events)

    async def never() -> Message:
        pytest.fail("the body was read")

    declared = {**_ask("POST"), "headers": [(b"content-length", str(PEEK + 1).encode())]}

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        events.append("413 from the header")

    share.app = app
    await share(declared, never, _sender(events))
    await share(declared, never, _sender(events))
    assert events == ["413 from the header", ("refused", "subject_rate"), ("alice", 429, b"2")]


class _Context:
    """What `rate_limited` reads of a call's context: its HTTP request, if any."""

    def __init__(self, request: object) -> None:
        self.request = request


@pytest.mark.parametrize(
    ("context", "outcome"),
    [
        pytest.param(
            _Context(Request({"type": "http", limits.RATE_LIMITED_KEY: Refusal("tenant", 3)})),
            Outcome(
                {"ok": False, "code": "rate_limited", "retry_after": 3},
                "too many tool calls for this tenant; retry in 3 s",
            ),
            id="marked",
        ),
        pytest.param(_Context(Request({"type": "http"})), None, id="not-marked"),
        pytest.param(_Context(None), None, id="stdio"),
        pytest.param(object(), None, id="no-request"),
    ],
)
def test_rate_limited_reads_the_mark_of_the_calls_request(
    context: object, outcome: Outcome | None
) -> None:
    assert limits.rate_limited(context) == outcome


def _chunks(*bodies: bytes) -> list[Message]:
    last = len(bodies) - 1
    return [
        {"type": "http.request", "body": body, "more_body": n < last}
        for n, body in enumerate(bodies)
    ]


@pytest.mark.parametrize(
    ("messages", "request_id"),
    [
        pytest.param(_chunks(b'{"jsonrpc": "2.0", "id": 7}'), 7, id="int"),
        pytest.param(_chunks(b'{"id": "c-1", "method": "x"}'), "c-1", id="string"),
        pytest.param(_chunks(b'{"id": ', b'"split"}'), "split", id="two-chunks"),
        pytest.param(_chunks(b'{"id": 1.5}'), None, id="float"),
        pytest.param(_chunks(b'{"id": true}'), None, id="bool"),
        pytest.param(_chunks(b'{"method": "notifications/x"}'), None, id="no-id"),
        pytest.param(_chunks(b'[{"id": 1}]'), None, id="batch"),
        pytest.param(_chunks(b"not json"), None, id="not-json"),
        pytest.param(_chunks(b"[" * 100_000), None, id="deep"),
        pytest.param(_chunks(b'{"id": 3, "pad": "' + b"x" * PEEK, b'"}'), None, id="over-peek"),
        pytest.param(_chunks(b'{"id": 3, "pad": "' + b"x" * (PEEK - 20) + b'"}'), 3, id="at-peek"),
        pytest.param(
            _chunks(b'{"id": 3, "pad": "' + b"x" * (PEEK - 19) + b'"}'), None, id="one-past-whole"
        ),
        pytest.param([{"type": "http.disconnect"}], None, id="disconnect"),
    ],
)
@pytest.mark.anyio
async def test_a_429_carries_the_id_of_a_small_body(
    messages: list[Message], request_id: object
) -> None:
    pending = iter(messages)

    async def receive() -> Message:
        return next(pending)

    read, envelope = await limits._peek(receive)
    assert limits._request_id(envelope) == request_id
    # What was read is given on whole: over the peek, the rest is still to be received.
    assert read == messages[: len(read)]
