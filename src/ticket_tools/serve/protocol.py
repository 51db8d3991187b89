"""Answers the SDK gets wrong for this server: the 401 challenge, bodies that are not requests.

Needs the `mcp` extra. `ProtocolGate` sits in front of the MCP endpoint, after the token
is verified:

- a request without a verified token gets the RFC 6750 §3 challenge: with no credentials
  at all (no `Authorization`, or another scheme), `WWW-Authenticate: Bearer
  resource_metadata="...", scope="tickets:read"` and no error code (§3.1: "SHOULD NOT
  include an error code"); with a bearer token that is refused, `error="invalid_token"`
  too. The SDK sends `error="invalid_token"` in both cases and no `scope`.
- a body that is valid JSON but not a JSON-RPC message (`[]`, `{}`, no `method`, a wrong
  `jsonrpc`) gets JSON-RPC's `-32600 Invalid Request`, where the SDK answers `-32602` with
  pydantic's text, which quotes the input; a batch (a non-empty array) gets `-32600` saying
  batches are not supported (see docs/http.md for why). The answer, the SDK's other
  400s (`Missing session ID`) and every `404 Session not found` carry the body's id when it
  is a string or an integer (the gate reads the body first: `BodyLimit`, in front of it,
  bounds it). A
  well-formed request's `-32602` (a 2026-07-28 call without the `_meta` envelope) is the
  SDK's own and passes unchanged;
- a request whose id is neither a string nor an integer (`1.5`, `true`, `null`) gets
  `-32600`, where the SDK takes it for a notification and answers a silent `202`;
- header values lose surrounding spaces and tabs (RFC 9110 §5.5: they are not part of the
  value), so `Mcp-Name:  get_ticket ` names `get_ticket`.

`correct_protocol` installs the gate and names the read scope in the protected-resource
metadata (`scopes_supported`); `transport_security` lets a server bound to loopback answer
to `localhost` as well as to its address.
"""

from __future__ import annotations

import ipaddress
import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ticket_tools.serve.bodies import replay
from ticket_tools.serve.tokens import TokenRules

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602  # what the SDK's transport answers for a body of the wrong shape
NOT_A_REQUEST = "Invalid Request: the body is not a JSON-RPC request, notification or response"
NO_BATCHES = "Invalid Request: JSON-RPC batches are not supported; send one message per POST"
BAD_ID = "Invalid Request: the id must be a string or an integer"
OWS = b" \t"  # RFC 9110 §5.6.3 optional whitespace
NO_CREDENTIALS = "Authentication required: send an OAuth bearer token"
REFUSED_TOKEN = "The access token is invalid, expired or not meant for this server"  # noqa: S105
HELD = (400, 404, 202)  # the answers `_Corrector` may rewrite: each has a short body


class ProtocolGate:
    """ASGI middleware correcting the SDK's 401 and malformed-body answers at `path`."""

    def __init__(self, app: ASGIApp, *, path: str, metadata_url: str, scope: str) -> None:
        self.app = app
        self._path = path
        self._challenge = f'resource_metadata="{metadata_url}", scope="{scope}"'

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        if not isinstance(scope.get("user"), AuthenticatedUser):
            await self._unauthorized(scope, send)
            return
        scope = {**scope, "headers": [(k, v.strip(OWS)) for k, v in scope["headers"]]}
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        # BodyLimit, in front, hands on the whole body as one message (at most MAX_BODY_BYTES).
        message = await receive()
        body = message.get("body", b"")  # http.disconnect has none
        await self.app(scope, replay(message, receive), _Corrector(send, body))

    async def _unauthorized(self, scope: Scope, send: Send) -> None:
        authorization = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        # Trailing spaces are not part of a value (RFC 9110 §5.5), and some parsers keep
        # them: "Bearer " is "Bearer", a scheme with no token, whatever the parser.
        if authorization.strip(OWS)[:7].lower() == b"bearer ":
            challenge = f'Bearer error="invalid_token", {self._challenge}'
            body = {"error": "invalid_token", "error_description": REFUSED_TOKEN}
        else:
            challenge = f"Bearer {self._challenge}"
            body = {"error_description": NO_CREDENTIALS}
        payload = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"www-authenticate", challenge.encode()),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


class _Corrector:
    """Pass a response through, rewriting the SDK's answers to bodies that are not requests.

    A 400 `-32602` for a body that is not a well-formed request becomes `-32600`; any other
    400 or 404 JSON-RPC error with a null id (the SDK's, or the session gate's `Session not
    found`) gets the body's id when it is known; a 202 for a body with an id that is not a
    string or integer becomes a 400 `-32600`.
    """

    def __init__(self, send: Send, body: bytes) -> None:
        self._send = send
        self._body = body
        self._held: Message | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] in HELD:
            self._held = message  # one short body: hold the start until it is read
            return
        held, self._held = self._held, None
        if held is None:
            await self._send(message)
            return
        body = message.get("body", b"")
        corrected = self._corrected(held["status"], body)
        if corrected is not None:
            body = corrected
            headers = [
                (k, v)
                for k, v in held.get("headers", [])
                if k not in (b"content-length", b"content-type")
            ]
            length = str(len(body)).encode()
            json_type = (b"content-type", b"application/json")
            headers = [*headers, json_type, (b"content-length", length)]
            status = 400 if held["status"] == 202 else held["status"]
            held = {**held, "status": status, "headers": headers}
        await self._send(held)
        await self._send({**message, "body": body})

    def _corrected(self, status: int, body: bytes) -> bytes | None:
        sent = self._body.strip(b" \t\r\n")
        try:
            envelope = json.loads(sent)
        except (ValueError, RecursionError):
            envelope = None  # the SDK answered -32700 already
        request_id = envelope.get("id") if isinstance(envelope, dict) else None
        if type(request_id) not in (str, int):
            request_id = None
        if status == 202:
            if not isinstance(envelope, dict) or "id" not in envelope or request_id is not None:
                return None  # a notification, or a response the SDK took
            return _invalid_request(None, BAD_ID)
        try:
            answer = json.loads(body)
            code = answer["error"]["code"]
        except (ValueError, TypeError, KeyError):
            return None  # a plain-text 400 (a bad header): not a JSON-RPC body
        if code != INVALID_PARAMS or _well_formed(envelope):
            if answer.get("id") is not None or request_id is None:
                return None
            return json.dumps({**answer, "id": request_id}).encode()  # the SDK's, with the id
        # The SDK parsed the body as JSON already (else -32700), so a non-empty array is one
        # that opens with "[" and does not close at once.
        batch = sent[:1] == b"[" and sent[1:].lstrip(b" \t\r\n")[:1] != b"]"
        return _invalid_request(request_id, NO_BATCHES if batch else NOT_A_REQUEST)


def _well_formed(envelope: object) -> bool:
    """Say whether a decoded body is a JSON-RPC request: its -32602 is about its params."""
    if not isinstance(envelope, dict):
        return False
    return (
        envelope.get("jsonrpc") == "2.0"
        and type(envelope.get("method")) is str
        and type(envelope.get("id")) in (str, int)
        and type(envelope.get("params", {})) is dict
    )


def _invalid_request(request_id: str | int | None, message: str) -> bytes:
    error = {"code": INVALID_REQUEST, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def correct_protocol(app: Starlette, path: str, *, resource_url: str, rules: TokenRules) -> None:
    """Install `ProtocolGate` at `path` (after token verification) and `scopes_supported`."""
    with_scopes_supported(app, resource_url, rules.issuer, [rules.read_scope])
    metadata = str(build_resource_metadata_url(AnyHttpUrl(resource_url)))
    # Appended, so it runs after the SDK's authentication middleware, before its endpoint.
    gate = Middleware(ProtocolGate, path=path, metadata_url=metadata, scope=rules.read_scope)
    app.user_middleware.append(gate)


def transport_security(
    host: str, netloc: str, allowed_hosts: tuple[str, ...]
) -> TransportSecuritySettings:
    """Return the DNS-rebinding settings for a server bound to `host`, reached at `netloc`.

    Allowed: `netloc`, its loopback aliases, each allowed host; Origins the same over
    http (over https for the allowed hosts, which sit behind a TLS proxy).
    """
    port = int(netloc.rsplit(":", 1)[1])
    local = list(dict.fromkeys([netloc, *loopback_aliases(host, port)]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*local, *allowed_hosts],
        allowed_origins=[f"http://{h}" for h in local] + [f"https://{h}" for h in allowed_hosts],
    )


def loopback_aliases(host: str, port: int) -> list[str]:
    """Return the Host values a client may use for a server bound to `host`:`port`.

    A loopback bind answers to every loopback name, so a client configured with
    `http://localhost:8765/mcp` reaches a server bound to 127.0.0.1:8765; no other bind
    gains any name. 127.0.0.1 -> ["localhost:8765", "127.0.0.1:8765", "[::1]:8765"].
    """
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return [f"{name}:{port}" for name in ("localhost", "127.0.0.1", "[::1]")] if loopback else []


def with_scopes_supported(
    app: Starlette, resource_url: str, issuer: str, scopes: list[str]
) -> None:
    """Replace the SDK's protected-resource metadata route with one naming `scopes`.

    The SDK names scopes there only as `AuthSettings.required_scopes`, which would also
    answer 403 to every token without them, where this server's contract answers `forbidden`
    from the tool.
    """
    replacement = create_protected_resource_routes(
        resource_url=AnyHttpUrl(resource_url),
        authorization_servers=[AnyHttpUrl(issuer)],
        scopes_supported=scopes,
    )
    paths = {route.path for route in replacement}
    routes: list[BaseRoute] = app.router.routes
    routes[:] = [r for r in routes if not (isinstance(r, Route) and r.path in paths)]
    routes.extend(replacement)
