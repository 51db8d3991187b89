"""Request bodies bounded: counted as they arrive, refused past MAX_BODY_BYTES.

Needs the `mcp` extra. `BodyLimit` sits in front of the MCP endpoint right after the token
check, before anything that reads a body (the protocol and session gates, the rate limits,
the direct path, the SDK), so none of them is ever given more than MAX_BODY_BYTES:

- a request without a verified token passes untouched: it is answered `401`, its body
  never read;
- a `Content-Length` past MAX_BODY_BYTES is answered `413` at once, the body unread;
- any other body is counted as it arrives, chunked or not, and answered `413` as soon as
  the count passes MAX_BODY_BYTES, before more of it is kept (uvicorn holds at most its
  64 KiB read-ahead beyond what was asked for);
- a body that arrived whole is handed on as one message (`replay`), so every layer behind
  reads the same bytes object, never a copy.

The refusal is the server's own, the same on the direct path and the SDK's (whose own
limit, told MAX_BODY_BYTES, is never reached). After a `413` the rest of the body is read
and dropped as it comes; one that never ends is closed by the header deadline. A body that
stalls is the connection's to end (`connections.guarded_protocol`: `408` past
`--header-timeout`), where it costs no timer per request.
"""

from __future__ import annotations

import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024
"""A tool call is under 1 KiB (a query is at most 40 characters); a MiB leaves room for any
`_meta` a host adds. The SDK's default is 4 MiB. A connection so holds at most this plus
uvicorn's 64 KiB read-ahead and one socket read of body: a dozen endless bodies at once,
under 16 MiB."""
INVALID_REQUEST = -32600
_LENGTH = b"content-length"


class BodyLimit:
    """ASGI middleware bounding the bodies of verified requests at `path` (see the module doc)."""

    def __init__(self, app: ASGIApp, *, path: str, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self._path = path
        self._limit = limit
        self._too_large = f"Request body too large: at most {limit} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != self._path
            or not isinstance(scope.get("user"), AuthenticatedUser)
        ):
            await self.app(scope, receive, send)
            return
        # uvicorn's parsers admit one Content-Length at most, of digits.
        declared = next((int(v) for k, v in scope["headers"] if k == _LENGTH and v.isdigit()), 0)
        if declared > self._limit:
            await _refuse(send, 413, self._too_large)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left (or the body deadline closed it): nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._limit:
                await _refuse(send, 413, self._too_large)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        chunks.clear()
        await self.app(scope, replay(whole, receive), send)


def replay(message: Message, receive: Receive) -> Receive:
    """Return a `receive` giving `message` once, then the connection's own messages."""
    pending = [message]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def limit_bodies(app: Starlette, path: str) -> None:
    """Install `BodyLimit` at `path`: call it before any other middleware is appended."""
    # Appended, so it runs after the SDK's authentication middleware, before the others.
    app.user_middleware.append(Middleware(BodyLimit, path=path))


async def _refuse(send: Send, status: int, message: str) -> None:
    error = {"code": INVALID_REQUEST, "message": message}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
