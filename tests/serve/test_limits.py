"""Fair share per tenant: rate limits (HTTP 429 before any MCP work) and a share of the workers.

Real servers, each with its own low limits so that a short burst crosses them whatever
the machine's speed; the share of store workers is seen on a real PostgreSQL whose
table is locked, through the server's own metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import Message, Receive, Scope, Send

from conftest import PostgresDatabase, StoreFactory
from expected import T104
from replica_support import call, locked_table, metric, origin, request, rpc, wait_until
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.serve import limits
from ticket_tools.serve.limits import Buckets, RateLimits

# Requests sent one after another: over the small buckets below even though each refusal
# is answered REFUSAL_DELAY_SECONDS late (2 requests/s against 1/s refills).
BURST = 12
LIST = rpc("tools/list")
REFUSED_BODY = {
    "jsonrpc": "2.0",
    "id": 1,  # the refused request's
    "error": {
        "code": -32000,
        "message": "too many calls for this token subject; retry after the Retry-After seconds",
    },
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
    """A server allowing each subject 1 request/s (bursts of 2), tenants unlimited."""
    yield from _serve(tmp_path, jwks, "--subject-rate", "1", "--tenant-rate", "0")


@pytest.fixture
def tenant_limited(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    """A server allowing each tenant 2 requests/s (bursts of 4), subjects unlimited."""
    yield from _serve(tmp_path, jwks, "--tenant-rate", "2", "--subject-rate", "0")


def test_a_subject_over_its_rate_gets_429_with_retry_after_and_runs_no_tool(
    subject_limited: HttpServer, idp: Issuer
) -> None:
    url = subject_limited.url
    alice, ann = idp.sign(claims("alpha", "alice")), idp.sign(claims("alpha", "ann"))
    get_104 = rpc("tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}})
    answers = [request(url, get_104, bearer=alice) for _ in range(BURST)]
    statuses = [status for status, _, _ in answers]
    assert statuses[:2] == [200, 200]  # the burst
    assert set(statuses) == {200, 429}
    refused = [
        (headers["retry-after"], json.loads(body))
        for status, headers, body in answers
        if status == 429
    ]
    assert refused == [("1", REFUSED_BODY)] * len(refused)
    # Another subject of the same tenant is not held back by alice's burst.
    assert request(url, LIST, bearer=ann)[0] == 200
    # A refused call ran no tool: one audit line per call answered, none for the others.
    assert len(subject_limited.audit_lines()) == statuses.count(200)
    base = origin(url)
    assert metric(base, "ticket_tools_refusals_total", limit="subject_rate") == len(refused)
    assert metric(base, "ticket_tools_refusals_total", limit="tenant_rate") == 0


def test_a_tenant_over_its_rate_gets_429_and_another_tenant_is_answered(
    tenant_limited: HttpServer, idp: Issuer
) -> None:
    url = tenant_limited.url
    # Each request from another alpha user: only the tenant's bucket can refuse them.
    statuses = [
        request(url, LIST, bearer=idp.sign(claims("alpha", f"user-{n}")))[0] for n in range(BURST)
    ]
    assert statuses[:4] == [200] * 4
    assert 429 in statuses
    got = call(url, idp.sign(claims("beta", "bob")), "get_ticket", {"ticket_id": "TKT-104"})
    assert got["structuredContent"]["ok"] is True
    assert metric(
        origin(url), "ticket_tools_refusals_total", limit="tenant_rate"
    ) == statuses.count(429)


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
    ],
)
def test_rate_limits_refuse_values_that_break_their_rule(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RateLimits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_request_without_a_verified_user_passes_to_the_app_unlimited() -> None:
    # In the served app the token layer answers 401 first; alone, the middleware must still
    # pass such a request on (never count it against a tenant) rather than fail on it.
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])

    share = limits.FairShare(
        app,
        path="/mcp",
        limits=RateLimits(tenant_rate=1, subject_rate=1),
        tenant_claim="tenant",
        draining=lambda: False,
        refused=lambda limit: pytest.fail(f"refused by {limit}"),
    )

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        pytest.fail("the middleware answered by itself")

    for _ in range(5):
        await share({"type": "http", "path": "/mcp", "headers": []}, receive, send)
    assert seen == ["/mcp"] * 5


def _user(tenant: str, subject: str) -> AuthenticatedUser:
    claims = {"iss": "https://idp.example.test/", "tenant": tenant}
    token = AccessToken(token="t", client_id=subject, scopes=[], subject=subject, claims=claims)  # noqa: S106
    return AuthenticatedUser(token)


@pytest.mark.anyio
async def test_a_refusal_waits_and_a_request_sent_after_it_is_answered_first() -> None:
    # A client refused in a loop must wait between its calls, or its refusals take the
    # event loop from everyone: the 429 goes out after REFUSAL_DELAY_SECONDS, and another
    # subject's request, sent after the refused one, is answered before it.
    events: list[tuple[str, object]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        events.append((scope["user"].access_token.subject, "served"))

    share = limits.FairShare(
        app,
        path="/mcp",
        limits=RateLimits(tenant_rate=0, subject_rate=0.5),  # a burst of 1 each
        tenant_claim="tenant",
        draining=lambda: False,
        refused=lambda limit: events.append(("refused", limit)),
    )

    def ask(subject: str) -> Scope:
        return {"type": "http", "path": "/mcp", "headers": [], "user": _user("alpha", subject)}

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    def sender(subject: str) -> Send:
        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                events.append((subject, message["status"]))

        return send

    await share(ask("alice"), receive, sender("alice"))
    async with anyio.create_task_group() as group:
        group.start_soon(share, ask("alice"), receive, sender("alice"))
        group.start_soon(share, ask("bob"), receive, sender("bob"))
    assert events == [
        ("alice", "served"),
        ("refused", "subject_rate"),
        ("bob", "served"),
        ("alice", 429),
    ]
    assert limits.REFUSAL_DELAY_SECONDS == 0.5


def _chunks(*bodies: bytes) -> list[Message]:
    last = len(bodies) - 1
    return [
        {"type": "http.request", "body": body, "more_body": n < last}
        for n, body in enumerate(bodies)
    ]


PEEK = limits.ID_PEEK_BYTES


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

    assert await limits._request_id(receive) == request_id
