"""Rate limits per tenant and per token subject: token buckets, and the 429 before any MCP work.

`FairShare` is ASGI middleware placed after the SDK's bearer-token check, so it reads the
verified token (`scope["user"]`) and nothing the client merely claims. Each request to
the MCP endpoint with a valid token takes one token from its tenant's bucket and one
from its subject's; when either is empty the request is answered HTTP 429 with
`Retry-After` (whole seconds), REFUSAL_DELAY_SECONDS after it came, and never reaches
the MCP transport, so a refused call costs a token check and a look at its id (the 429
carries it, as the 2026-07-28 wire schema wants; from a body of at most ID_PEEK_BYTES, else
null) and no session or store work, and a client refused in a loop waits between its calls.
While the server drains, every MCP request is answered 503 with `Retry-After` instead
(another replica will serve it).

A request without a valid token passes through: the SDK answers it 401.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from ticket_tools.serve.metrics import Limit

DEFAULT_TENANT_RATE = 100.0
"""Calls per second one tenant may make on one replica: a hundred agents each calling a
tool every second (an agent's turn waits seconds on its model), a fifth of what one
replica serves."""
DEFAULT_SUBJECT_RATE = 20.0
"""Calls per second one token subject (a user, a service account) may make: far above
an agent's pace, far below a runaway loop's."""
BURST_SECONDS = 2.0  # a bucket holds this many seconds of its rate: a page walk may burst
MAX_BUCKETS = 100_000  # full buckets are dropped past this many: memory stays bounded
REFUSAL_DELAY_SECONDS = 0.5
"""A 429 (a rate limit here, a session cap in sessions.py) is sent this long after the
request came. A client that calls again at once (a loop, a flood) then waits between its
calls, so its refusals cannot take the event loop from other tenants: one token refused
as fast as it could ask on 4 connections (1,900 refusals a second) raised another
tenant's p50 5x. Below the Retry-After of at least 1 s, so a client that obeys it loses
nothing; the wait holds no worker and no store connection, only the open connection."""
DRAIN_RETRY_SECONDS = 1  # Retry-After while draining: another replica answers at once
RATE_LIMITED = -32000  # JSON-RPC's server-defined range: not a request error
ID_PEEK_BYTES = 64 * 1024  # a tool call is a few hundred bytes; a larger body's 429 has id null


@dataclass(frozen=True)
class RateLimits:
    """Calls per second per tenant and per subject, on one replica; 0 turns one off."""

    tenant_rate: float = DEFAULT_TENANT_RATE
    """Each tenant's sustained calls per second (`--tenant-rate`); its burst is BURST_SECONDS."""
    subject_rate: float = DEFAULT_SUBJECT_RATE
    """Each token subject's sustained calls per second (`--subject-rate`)."""

    def __post_init__(self) -> None:
        for name in ("tenant_rate", "subject_rate"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number of calls per second, 0 for none")


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
    """ASGI middleware: refuse an MCP request over its tenant's or subject's rate, or draining."""

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
        self._tenants = Buckets(limits.tenant_rate)
        self._subjects = Buckets(limits.subject_rate)
        self._draining = draining
        self._refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer it 429 or 503 here."""
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        if self._draining():
            self._refused("draining")
            message = "this server is shutting down; retry on another replica"
            await _refuse(send, 503, DRAIN_RETRY_SECONDS, message)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            await self.app(scope, receive, send)  # the SDK answers 401
            return
        token = user.access_token
        # The verifier admits only tokens whose tenant and subject are non-empty strings.
        tenant = str((token.claims or {}).get(self._tenant_claim))
        subject = str(token.subject)
        checks: tuple[tuple[Limit, Buckets, str], ...] = (
            ("tenant_rate", self._tenants, tenant),
            ("subject_rate", self._subjects, subject),
        )
        for limit, buckets, key in checks:
            wait = buckets.wait(key)
            if wait > 0:
                self._refused(limit)
                who = "tenant" if limit == "tenant_rate" else "token subject"
                message = f"too many calls for this {who}; retry after the Retry-After seconds"
                request_id = await _request_id(receive)
                await anyio.sleep(REFUSAL_DELAY_SECONDS)
                await _refuse(send, 429, math.ceil(wait), message, request_id)
                return
        self._tenants.take(tenant)
        self._subjects.take(subject)
        await self.app(scope, receive, send)


async def _request_id(receive: Receive) -> str | int | None:
    """Return the id of the request body, if it is a string or an integer and the body small."""
    body = b""
    while len(body) <= ID_PEEK_BYTES:
        message = await receive()
        body += message.get("body", b"")  # http.disconnect has none
        if not message.get("more_body", False):
            break
    else:
        return None
    try:
        envelope = json.loads(body)
    except (ValueError, RecursionError):
        return None
    request_id = envelope.get("id") if isinstance(envelope, dict) else None
    return request_id if type(request_id) in (str, int) else None


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
