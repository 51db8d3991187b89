"""Rate limits per tenant and per token subject: token buckets for tool calls, and for the rest.

`FairShare` is ASGI middleware placed after the SDK's bearer-token check, so it reads the
verified token (`scope["user"]`) and nothing the client merely claims. It counts work, not
housekeeping: each `tools/call` (the only request that reaches a store) takes one token
from its tenant's call bucket and one from its subject's; every other request to the MCP
endpoint (`initialize`, notifications, `tools/list`, `ping`, the GET stream) takes one from
the housekeeping buckets, which hold HOUSEKEEPING_FACTOR times as much. A `DELETE` that
ends one of the caller's sessions is never counted nor refused; one that ends none (the app
answers it 4xx) takes from the housekeeping buckets and is answered as a refusal. It sits in
front of the session gate (sessions.py), so a request naming a session that is not the
caller's is counted too. Which kind a POST is comes from its body's `method`, read from at
most ID_PEEK_BYTES of it however it is framed (a larger body counts as a call, unparsed) and
then given on to the app unchanged.

A request over its rate is answered REFUSAL_DELAY_SECONDS after it came, so a client
refused in a loop waits between its calls. A tool call is still answered as a tool result
the model can act on: it goes on to the MCP layer marked (`RATE_LIMITED`), and `ToolCalls`
answers it `{"ok": false, "code": "rate_limited", "retry_after": N}` without running the
tool (`rate_limited`). Anything else is answered HTTP 429 with `Retry-After` (whole
seconds) and never reaches the MCP transport, so it costs a token check and a look at its
body; the 429 carries the request's id, as the 2026-07-28 wire schema wants. While the
server drains, every MCP request but a DELETE is answered 503 with `Retry-After` instead
(another replica will serve it).

A request without a valid token passes through: the SDK answers it 401.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_tools.outcome import Outcome
from ticket_tools.serve.metrics import Limit

DEFAULT_TENANT_RATE = 100.0
"""Tool calls per second one tenant may make on one replica: a hundred agents each calling
a tool every second (an agent's turn waits seconds on its model), a fifth of what one
replica serves."""
DEFAULT_SUBJECT_RATE = 20.0
"""Tool calls per second one token subject (a user, a service account) may make: far
above an agent's pace, far below a runaway loop's; its burst is a 40-page walk."""
HOUSEKEEPING_FACTOR = 5
"""Other requests allowed per tool call, in each bucket. A host that opens a session per
tool call (langchain-mcp-adapters' default) sends initialize, initialized, the GET stream
and tools/list with every call (its DELETE is never counted): four, so its calls meet
their own limit first."""
BURST_SECONDS = 2.0  # a bucket holds this many seconds of its rate: a page walk may burst
MIN_RATE = 0.001
"""The lowest rate but 0 (off): a refused request then waits at most 1,000 s. A rate of
1e-320 made every refusal's wait infinite (an OverflowError, a 500) and 1e-300 gave a
Retry-After of 301 digits."""
MAX_RATE = 1_000_000.0  # a thousand times what one replica serves: as good as off, and finite
MAX_RETRY_AFTER_SECONDS = math.ceil(1 / MIN_RATE)  # what a refused request may be told to wait
MAX_BUCKETS = 100_000  # full buckets are dropped past this many: memory stays bounded
REFUSAL_DELAY_SECONDS = 0.5
"""A refusal (a rate limit here, a session cap in sessions.py) is sent this long after the
request came. A client that calls again at once (a loop, a flood) then waits between its
calls, so its refusals cannot take the event loop from other tenants: one token refused
as fast as it could ask on 4 connections (1,900 refusals a second) raised another
tenant's p50 5x. Below the Retry-After of at least 1 s, so a client that obeys it loses
nothing; the wait holds no worker and no store connection, only the open connection."""
DRAIN_RETRY_SECONDS = 1  # Retry-After while draining: another replica answers at once
RATE_LIMITED = -32000  # JSON-RPC's server-defined range: not a request error
ID_PEEK_BYTES = 64 * 1024  # a tool call is a few hundred bytes; a larger body counts as one
RATE_LIMITED_KEY = "ticket_tools.rate_limited"
"""The ASGI scope key marking a tool call over its rate: a `Refusal`, read by `rate_limited`."""

Who = Literal["tenant", "token subject"]


@dataclass(frozen=True)
class Refusal:
    """Why a tool call was refused, and when to retry it."""

    who: Who
    """Whose bucket was empty: the tenant's or the token subject's."""
    retry_after: int
    """Whole seconds until that bucket has a token again (at least 1)."""


@dataclass(frozen=True)
class RateLimits:
    """Tool calls per second per tenant and per subject, on one replica; 0 turns one off.

    Each allows HOUSEKEEPING_FACTOR times as many other requests, in buckets of their own.
    """

    tenant_rate: float = DEFAULT_TENANT_RATE
    """Each tenant's sustained tool calls per second (`--tenant-rate`); its burst is
    BURST_SECONDS."""
    subject_rate: float = DEFAULT_SUBJECT_RATE
    """Each token subject's sustained tool calls per second (`--subject-rate`)."""

    def __post_init__(self) -> None:
        for name in ("tenant_rate", "subject_rate"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not (value == 0 or MIN_RATE <= value < MAX_RATE):
                raise ValueError(
                    f"{name} must be calls per second from {MIN_RATE} to under {MAX_RATE:.0f}, "
                    "0 for none"
                )


class Buckets:
    """One token bucket per key: `rate` tokens a second, holding at most `burst`.

    With rate 2 and burst 4, a new key may take 4 at once; the fifth waits 0.5 s.
    """

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1.0, rate * BURST_SECONDS)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)

    def wait(self, key: str) -> float:
        """Return the seconds until `key` has a token (0: it has one now)."""
        if self.rate == 0:
            return 0.0
        tokens = self._tokens(key, self._clock())
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> None:
        """Take one token from `key` (after `wait` said it has one)."""
        if self.rate == 0:
            return
        now = self._clock()
        self._buckets[key] = (self._tokens(key, now) - 1, now)
        if len(self._buckets) > MAX_BUCKETS:
            self._drop_full(now)

    def _tokens(self, key: str, now: float) -> float:
        tokens, when = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + (now - when) * self.rate)

    def _drop_full(self, now: float) -> None:
        # A full bucket is the same as no bucket: forgetting it changes nothing.
        full = [key for key in self._buckets if self._tokens(key, now) >= self.burst]
        for key in full:
            del self._buckets[key]


class FairShare:
    """ASGI middleware: hold back an MCP request over its rate, or refuse it while draining."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str,
        limits: RateLimits,
        tenant_claim: str,
        draining: Callable[[], bool],
        refused: Callable[[Limit], None],
    ) -> None:
        self.app = app
        self._path = path
        self._tenant_claim = tenant_claim
        housekeeping = HOUSEKEEPING_FACTOR
        self._calls = Buckets(limits.tenant_rate), Buckets(limits.subject_rate)
        self._housekeeping = (
            Buckets(limits.tenant_rate * housekeeping),
            Buckets(limits.subject_rate * housekeeping),
        )
        self._draining = draining
        self._refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on (a refused tool call marked), or answer it 429 or 503 here."""
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "DELETE":
            await self._delete(scope, receive, send)
            return
        if self._draining():
            self._refused("draining")
            message = "this server is shutting down; retry on another replica"
            await _refuse(send, 503, DRAIN_RETRY_SECONDS, message)
            return
        who = self._caller(scope)
        if who is None:
            await self.app(scope, receive, send)  # the SDK answers 401
            return
        tenant, subject = who
        envelope: object = None
        if scope["method"] == "POST" and _declared_long(scope["headers"]):
            envelope = _UNREAD  # nothing is read: the SDK may answer 413 from the header alone
        elif scope["method"] == "POST":
            messages, envelope = await _peek(receive)
            receive = _replay(messages, receive)
        tool_call = isinstance(envelope, dict) and envelope.get("method") == "tools/call"
        is_call = tool_call or (scope["method"] == "POST" and envelope is _UNREAD)
        tenants, subjects = self._calls if is_call else self._housekeeping
        refusal = self._take((tenants, tenant), (subjects, subject), is_call=is_call)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await anyio.sleep(REFUSAL_DELAY_SECONDS)
        if tool_call:
            # A tool result the model reads, from the MCP layer (which knows the session
            # and the protocol version it must be written for).
            await self.app({**scope, RATE_LIMITED_KEY: refusal}, receive, send)
            return
        await _refuse_rate(send, refusal, _request_id(envelope))

    def _caller(self, scope: Scope) -> tuple[str, str] | None:
        """Return the verified token's tenant and subject, or None without a verified token."""
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            return None
        token = user.access_token
        # The verifier admits only tokens whose tenant and subject are non-empty strings.
        return str((token.claims or {}).get(self._tenant_claim)), str(token.subject)

    def _take(
        self, tenant: tuple[Buckets, str], subject: tuple[Buckets, str], *, is_call: bool
    ) -> Refusal | None:
        """Take a token from each bucket, or return why not (counted) and take none."""
        checks: tuple[tuple[Who, Buckets, str], ...] = (
            ("tenant", *tenant),
            ("token subject", *subject),
        )
        for who, buckets, key in checks:
            wait = buckets.wait(key)
            if wait > 0:
                self._refused(_limit(who, is_call))
                return Refusal(who, min(math.ceil(wait), MAX_RETRY_AFTER_SECONDS))
        for _, buckets, key in checks:
            buckets.take(key)
        return None

    async def _delete(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a DELETE: one that ends a session is never counted nor refused.

        One that ends none (another identity's session, one that ended, none named, any
        with `--stateless`: the app's own 4xx) is a refusal: it takes from the housekeeping
        buckets, and its answer (a 429 past their rate) is sent REFUSAL_DELAY_SECONDS after
        it came, so that a loop of them cannot take the event loop either.
        """
        who = self._caller(scope)
        if who is None:
            await self.app(scope, receive, send)  # the SDK answers 401
            return
        held: list[Message] = []

        async def hold_refusals(message: Message) -> None:
            if held or (message["type"] == "http.response.start" and message["status"] >= 400):
                held.append(message)  # a short error body: kept until the delay is over
            else:
                await send(message)

        await self.app(scope, receive, hold_refusals)
        if not held:
            return  # it ended a session of the caller's
        tenant, subject = who
        tenants, subjects = self._housekeeping
        refusal = self._take((tenants, tenant), (subjects, subject), is_call=False)
        await anyio.sleep(REFUSAL_DELAY_SECONDS)
        if refusal is not None:
            await _refuse_rate(send, refusal, None)
            return
        for message in held:
            await send(message)


def _limit(who: Who, is_call: bool) -> Limit:
    if who == "tenant":
        return "tenant_rate" if is_call else "tenant_housekeeping_rate"
    return "subject_rate" if is_call else "subject_housekeeping_rate"


def rate_limited(ctx: object) -> Outcome | None:
    """Return the outcome of a tool call `FairShare` marked as over its rate, else None.

    `ctx` is the call's request context (the SDK's or the direct path's), whose `request`
    is the HTTP request over stdio's None.
    """
    request = getattr(ctx, "request", None)
    if not isinstance(request, Request):
        return None
    refusal = request.scope.get(RATE_LIMITED_KEY)
    if not isinstance(refusal, Refusal):
        return None
    seconds = refusal.retry_after
    detail = f"too many tool calls for this {refusal.who}; retry in {seconds} s"
    return Outcome({"ok": False, "code": "rate_limited", "retry_after": seconds}, detail)


_UNREAD = object()
"""What `_peek` returns for a body longer than ID_PEEK_BYTES: not read whole."""


def _declared_long(headers: list[tuple[bytes, bytes]]) -> bool:
    """Say whether the request's Content-Length says its body is longer than ID_PEEK_BYTES."""
    length = next((value for key, value in headers if key == b"content-length"), b"")
    return length.isdigit() and int(length) > ID_PEEK_BYTES


async def _peek(receive: Receive) -> tuple[list[Message], object]:
    """Read a body of at most ID_PEEK_BYTES; return the messages read and its JSON value.

    The value is None for a body that is not JSON, and _UNREAD for one that is longer.
    """
    messages: list[Message] = []
    size = 0
    more = True
    while more and size <= ID_PEEK_BYTES:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))  # http.disconnect has none
        more = message.get("more_body", False)
    if size > ID_PEEK_BYTES:
        # Also a body that came whole in one message (chunked: no Content-Length said so
        # first), which was parsed whole: a dense 1.5 MB one took 39 ms of the event loop.
        return messages, _UNREAD
    try:
        return messages, json.loads(b"".join(m.get("body", b"") for m in messages))
    except (ValueError, RecursionError):
        return messages, None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """Return a `receive` giving `messages` again, then the connection's own."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _request_id(envelope: object) -> str | int | None:
    """Return the id of a request body, if it is a string or an integer."""
    request_id = envelope.get("id") if isinstance(envelope, dict) else None
    return request_id if type(request_id) in (str, int) else None


async def _refuse_rate(send: Send, refusal: Refusal, request_id: str | int | None) -> None:
    """Answer a request over its rate (not a tool call) 429, with when to retry."""
    message = f"too many calls for this {refusal.who}; retry after the Retry-After seconds"
    await _refuse(send, 429, refusal.retry_after, message, request_id)


async def _refuse(
    send: Send, status: int, retry_after: int, message: str, request_id: str | int | None = None
) -> None:
    """Answer with a JSON-RPC error body, as the SDK's own HTTP refusals are."""
    error = {"code": RATE_LIMITED, "message": message}
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
