"""Sessions bounded per identity: caps per token subject and per tenant, and tenant-bound ids.

Needs the `mcp` extra. The SDK's session manager keeps one pool for every caller (10,000
sessions, then HTTP 503 for everyone), binds a session to the token's (client, issuer,
subject) but not to its tenant, and idles a session out after 30 minutes. `SessionGate`
sits in front of it, after the token is verified:

- a request that would open a session is refused with HTTP 429 once the token's (issuer,
  subject) holds `per_subject` sessions, or its tenant `per_tenant`, before the SDK sees
  it (REFUSAL_DELAY_SECONDS after it came, as a rate limit's 429); so one token holder
  fills its own quota, never the pool;
- a session id answers only the (client, issuer, subject, tenant) that opened it; any
  other token, or an id this gate never saw open, gets the SDK's own `404 Session not
  found`, as if it did not exist;
- a session with no request in flight for `idle_seconds` is forgotten (the SDK is given the
  same timeout and ends it too); a DELETE or a 404 from the SDK forgets it at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import principal_components
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_tools.serve.limits import REFUSAL_DELAY_SECONDS

SESSION_HEADER = b"mcp-session-id"
DEFAULT_IDLE_SECONDS = 300.0
"""5 minutes: a host that comes back later re-initializes on the 404 (the spec asks it to)."""
DEFAULT_PER_SUBJECT = 32  # an agent host opens a few per user; 32 leaves room for tabs and retries
DEFAULT_PER_TENANT = 1000  # ten tenants at their cap are needed to fill the SDK's 10,000
SESSION_LIMIT_CODE = -32000  # JSON-RPC's implementation-defined server error range
NOT_FOUND_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}
).encode()

Key = TypeVar("Key")
Owner = tuple[str, str | None, str | None, str]
"""Who opened a session: the token's client id, issuer, subject and tenant."""


@dataclass(frozen=True)
class SessionLimits:
    """How many sessions one identity may hold, and how long an idle one lives."""

    per_subject: int = DEFAULT_PER_SUBJECT
    """Open sessions allowed per token (issuer, subject), across tenants."""
    per_tenant: int = DEFAULT_PER_TENANT
    """Open sessions allowed per tenant, all its subjects together."""
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    """A session with no request in flight for this long is ended."""

    def __post_init__(self) -> None:
        if self.per_subject < 1 or self.per_tenant < 1:
            raise ValueError("session caps must be at least 1")
        if not 0 < self.idle_seconds < float("inf"):
            raise ValueError("the session idle timeout must be a positive number of seconds")


@dataclass(eq=False)
class _Session:
    owner: Owner
    last_seen: float
    in_flight: int = 1  # counted from the request that opens it
    sid: str | None = None
    subject_key: tuple[str | None, str | None] = field(init=False)

    def __post_init__(self) -> None:
        self.subject_key = (self.owner[1], self.owner[2])

    def idle_since(self, now: float, seconds: float) -> bool:
        return self.in_flight == 0 and now - self.last_seen >= seconds


class SessionGate:
    """ASGI middleware bounding and binding the SDK's sessions at `path` (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str,
        limits: SessionLimits,
        tenant_claim: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self._path = path
        self._limits = limits
        self._tenant_claim = tenant_claim
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._by_subject: dict[tuple[str | None, str | None], set[_Session]] = {}
        self._by_tenant: dict[str, set[_Session]] = {}
        self._swept_at = clock()

    def open_sessions(self) -> int:
        """Return how many sessions are open now (opening ones included)."""
        return sum(len(group) for group in self._by_tenant.values())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        if not isinstance(user, AuthenticatedUser):
            await self.app(scope, receive, send)  # the auth layer answers 401
            return
        token = user.access_token
        tenant = str((token.claims or {}).get(self._tenant_claim))
        owner: Owner = (*principal_components(token), tenant)
        now = self._clock()
        if now - self._swept_at >= self._limits.idle_seconds / 4:
            self._sweep(now)
        sid = next((value for key, value in scope["headers"] if key == SESSION_HEADER), None)
        if sid is None:
            await self._open(owner, scope, receive, send)
        else:
            await self._serve(sid.decode("latin-1"), owner, scope, receive, send)

    async def _serve(
        self, sid: str, owner: Owner, scope: Scope, receive: Receive, send: Send
    ) -> None:
        # One idle past the timeout is either swept already or ended by the SDK (same timeout),
        # which answers 404 and so has it forgotten below.
        session = self._sessions.get(sid)
        if session is None or session.owner != owner:
            await _send(send, 404, NOT_FOUND_BODY)
            return
        session.in_flight += 1
        status = None
        try:
            status = await _status_of(self.app, scope, receive, send)
        finally:
            session.in_flight -= 1
            session.last_seen = self._clock()
            ended = scope["method"] == "DELETE" and status is not None and status < 300
            if ended or status == 404:  # the SDK ended it (DELETE, its own idle timeout)
                self._forget(session)

    async def _open(self, owner: Owner, scope: Scope, receive: Receive, send: Send) -> None:
        now = self._clock()
        limits = self._limits
        subject = self._live(self._by_subject.get((owner[1], owner[2])), now)
        tenant = self._live(self._by_tenant.get(owner[3]), now)
        if subject >= limits.per_subject:
            await _refuse(send, f"this token's subject already holds {limits.per_subject}")
            return
        if tenant >= limits.per_tenant:
            await _refuse(send, f"this tenant already holds {limits.per_tenant}")
            return
        session = _Session(owner, now)
        self._by_subject.setdefault(session.subject_key, set()).add(session)
        self._by_tenant.setdefault(owner[3], set()).add(session)
        sid: str | None = None

        async def watch(message: Message) -> None:
            nonlocal sid
            if message["type"] == "http.response.start" and message["status"] < 400:
                headers = message.get("headers", [])
                sid = next((v.decode() for k, v in headers if k.lower() == SESSION_HEADER), None)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            session.in_flight -= 1
            session.last_seen = self._clock()
            if sid is None:
                self._forget(session)  # nothing was opened: a refused or failed request
            else:
                session.sid = sid
                self._sessions[sid] = session

    def _live(self, group: set[_Session] | None, now: float) -> int:
        """Return how many sessions in `group` are live, forgetting the idle ones."""
        if group is None:
            return 0
        for session in [s for s in group if s.idle_since(now, self._limits.idle_seconds)]:
            self._forget(session)
        return len(group)

    def _sweep(self, now: float) -> None:
        self._swept_at = now
        idle = [s for s in self._sessions.values() if s.idle_since(now, self._limits.idle_seconds)]
        for session in idle:
            self._forget(session)

    def _forget(self, session: _Session) -> None:
        if session.sid is not None:
            self._sessions.pop(session.sid, None)
        _discard(self._by_subject, session.subject_key, session)
        _discard(self._by_tenant, session.owner[3], session)


def _discard(index: dict[Key, set[_Session]], key: Key, session: _Session) -> None:
    group = index.get(key, set())
    group.discard(session)
    if not group:
        index.pop(key, None)


def bound_sessions(app: Starlette, path: str, limits: SessionLimits, tenant_claim: str) -> None:
    """Install `SessionGate` at `path`, after the SDK's token verification."""
    # Appended, so it runs after the SDK's authentication middleware, before its endpoint.
    gate = Middleware(SessionGate, path=path, limits=limits, tenant_claim=tenant_claim)
    app.user_middleware.append(gate)


async def _status_of(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    """Run `app` for one request; return the HTTP status it answered (None: no response)."""
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status


async def _refuse(send: Send, reason: str) -> None:
    await anyio.sleep(REFUSAL_DELAY_SECONDS)  # a client opening sessions in a loop waits
    message = (
        f"Too many open sessions: {reason}; end one (HTTP DELETE with its Mcp-Session-Id) "
        "or let one idle out"
    )
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": SESSION_LIMIT_CODE, "message": message}}
    await _send(send, 429, json.dumps(body).encode())


async def _send(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
