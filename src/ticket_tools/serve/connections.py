"""Connections bounded: a header deadline and size, a cap with a clean refusal, no log flood.

Needs the `mcp` extra. uvicorn closes a kept-alive connection idle between requests
(`timeout_keep_alive`), but never one that connects and then sends its request headers
slowly or not at all (slowloris): it waits forever. Its `limit_concurrency` answers 503 to
every request, on old connections too, once the count is reached. And when the process runs
out of file descriptors, asyncio logs a traceback for every failed `accept()` (up to the
listen backlog per loop tick: 456,314 of them in 30 s in one run). So:

- `guarded_protocol` wraps uvicorn's HTTP protocol (httptools when installed, else h11): a
  connection whose request headers are not complete `header_timeout` seconds after it
  opened, or after its previous response, is closed, and one whose request body is not
  complete `header_timeout` seconds after its headers is answered `408` and closed (uvicorn
  waits for a body forever too); a connection beyond `max_connections`
  is answered `503` with `Connection: close` at once and closed, the others unaffected; a
  request whose line and headers pass MAX_HEADER_BYTES is answered `431` and closed
  (counted on every read, with a request in flight or not, and whole once they end,
  however they arrived: `GuardedProtocol` says how). httptools has no limit of its own
  and keeps every byte of an endless header: twelve connections sending 55-88 MB each took
  the server from 86 to 440 MB, and its loop was too busy to answer `/readyz`. h11 keeps
  at most `h11_max_incomplete_event_size` of unparsed input, which `Replica.serve` sets to
  MAX_HEADER_BYTES (its own `400` past it), and stops reading behind a request in flight;
- `GuardedServer` runs uvicorn with an event-loop exception handler that turns the
  `accept()` failures for lack of descriptors into one log line per LOG_INTERVAL_SECONDS,
  with a count; so do the two refusals above.

The default `max_connections` stays below the file limit (`default_max_connections`), so
the server refuses cleanly before `accept()` can fail at all.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import re
import resource
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

DEFAULT_HEADER_TIMEOUT = 10.0  # nginx's client_header_timeout is 60 s; an agent's headers take ms
FD_RESERVE = 128  # descriptors kept for the store, the logs, the JWKS fetch and the listener
MIN_CONNECTIONS = 16
MAX_HEADER_BYTES = 32 * 1024
"""nginx's default whole header (4 buffers of 8 KiB); room for an 8 KiB token and a proxy's
headers. A connection holds at most this plus two socket reads (256 KiB each) of headers."""
LOG_INTERVAL_SECONDS = 10.0
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"retry-after: 1\r\n"
    b"content-length: 41\r\n"
    b"\r\n"
    b"Too many open connections; retry shortly\n"
)
_TOO_LARGE_TEXT = b"The request line and headers are too large\n"
_TOO_LARGE_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"connection", b"close"),
    (b"content-length", str(len(_TOO_LARGE_TEXT)).encode()),
]


HEADER_BYTES_KEY = "ticket_tools.header_bytes"
"""The ASGI scope key holding how many bytes of request line and headers were received."""
_BLANK_LINE = b"\r\n\r\n"  # both parsers want CRLF: headers end only at one of these
_LINE_BREAKS = re.compile(b"[\r\n]+")
CHUNKED_SPLITS = 16
"""Blank lines a read is split at inside a chunked body, where they may be data; past them
the read is parsed whole (a body of blank lines would cost a parse per 4 bytes)."""


def _response(status_line: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    lines = [status_line, *(name + b": " + value for name, value in headers), b"", body]
    return b"\r\n".join(lines)


HEADERS_TOO_LARGE = _response(
    b"HTTP/1.1 431 Request Header Fields Too Large", _TOO_LARGE_HEADERS, _TOO_LARGE_TEXT
)


def body_too_slow(timeout: float) -> bytes:
    """Return the 408 for a body not complete `timeout` seconds after its request's headers."""
    message = f"Request body not received within {timeout:g} s"
    error = {"code": -32600, "message": message}  # JSON-RPC's Invalid Request, as a 413's
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"connection", b"close"),
        (b"content-length", str(len(body)).encode()),
    ]
    return _response(b"HTTP/1.1 408 Request Timeout", headers, body)


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take to send its headers, and how many may connect at once."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    """Seconds from connecting (or from the previous response) to complete request headers."""
    max_connections: int | None = None
    """Open connections allowed; None: `default_max_connections()` (below the file limit)."""

    def __post_init__(self) -> None:
        if not 0 < self.header_timeout < float("inf"):
            raise ValueError("the header timeout must be a positive number of seconds")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError("the connection limit must be at least 1")


def default_max_connections() -> int:
    """Return the connection cap the file limit allows: its soft value less FD_RESERVE."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(MIN_CONNECTIONS, soft - FD_RESERVE)


class IntervalLog:
    """Log an event at once, then at most one line per interval, with a count of the rest."""

    def __init__(
        self, message: str, *, interval: float = LOG_INTERVAL_SECONDS, log: logging.Logger = logger
    ) -> None:
        self._message = message
        self._interval = interval
        self._log = log
        self._pending = 0
        self._quiet = False

    def hit(self) -> None:
        """Record one event; log it now unless a line went out less than an interval ago."""
        if self._quiet:
            self._pending += 1
            return
        self._log.warning("%s (1 time)", self._message)
        self._quiet = True
        asyncio.get_running_loop().call_later(self._interval, self._flush)

    def _flush(self) -> None:
        count, self._pending = self._pending, 0
        if count == 0:
            self._quiet = False
            return
        message, interval = self._message, self._interval
        self._log.warning("%s (%d more times in the last %g s)", message, count, interval)
        asyncio.get_running_loop().call_later(self._interval, self._flush)


def _http_base() -> type[asyncio.Protocol]:
    """Return uvicorn's httptools protocol when httptools is installed, else its h11 one."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: PLC0415
    except ImportError:
        return H11Protocol
    return HttpToolsProtocol


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """Return uvicorn's HTTP protocol class with the header deadline, size and connection cap."""
    base = _http_base()
    cap = limits.max_connections or default_max_connections()
    timeout = limits.header_timeout
    refused = IntervalLog(f"refused connections over the limit of {cap}")
    oversized = IntervalLog(f"answered 431 to headers over {MAX_HEADER_BYTES} bytes")
    cut = IntervalLog(f"closed connections sending headers over {MAX_HEADER_BYTES} bytes")
    slow = IntervalLog(f"closed connections that sent no complete headers within {timeout:g} s")
    stalled = IntervalLog(f"answered 408 to bodies not complete within {timeout:g} s")
    too_slow = body_too_slow(timeout)

    def checked(app: ASGIApp) -> ASGIApp:
        async def header_checked(scope: Scope, receive: Receive, send: Send) -> None:
            # Set by the protocol below for every request it hands on (always "http").
            if scope[HEADER_BYTES_KEY] <= MAX_HEADER_BYTES:
                await app(scope, receive, send)
                return
            # Answered as the app would, in its turn behind any request still in flight.
            oversized.hit()
            start = {"type": "http.response.start", "status": 431, "headers": _TOO_LARGE_HEADERS}
            await send(start)
            await send({"type": "http.response.body", "body": _TOO_LARGE_TEXT})

        return header_checked

    class GuardedProtocol(base):  # type: ignore[valid-type,misc]
        """uvicorn's protocol, closing slow-header connections and refusing those over the cap.

        The header count is of the bytes received, not of what the parser kept (it drops
        the spaces around a value, and the scheme and host of an absolute-form target):
        a request whose headers ended is checked whole before its app runs (`checked`,
        from HEADER_BYTES_KEY), however its bytes arrived; while they have not ended, every
        read is counted, with an earlier request in flight or not, and one past the limit
        is cut off at once. With httptools each read is given to the parser in pieces:
        outside a body, up to each blank line, so that a request's headers end with a piece
        and its header bytes are the pieces from its first byte to that one (line breaks
        before a request line, which the parser skips: one piece, counted too); a
        Content-Length body, exactly; a chunked body, up to its first CHUNKED_SPLITS blank
        lines (its end is one), then whole. Inside a chunked body,
        the pieces that hold no body byte are counted the same way (trailer fields, which
        httptools keeps as it keeps headers), from the last piece that held one. h11 bounds
        what it has not parsed itself; what its request events took of its buffer is the
        size of their headers.
        """

        _header_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _header_bytes = 0  # of the header or trailer fields being read, before this piece
        _in_body = False  # httptools: the parser is inside a request's body
        _boundary = False  # httptools: a request ended in this piece
        _body_read = 0  # httptools: the body bytes this piece held
        _began = False  # httptools: a request began in this piece
        _headers_ended = False  # httptools: a request's headers ended with this piece
        _piece_in_body = False  # httptools: this piece began inside a body
        _piece = 0  # httptools: the length of the piece being parsed
        _tail = b""  # httptools: the last bytes of the previous read
        _remaining: int | None = None  # httptools: what is left of a Content-Length body
        _in_headers = False  # httptools: a request began and its headers have not ended
        _counted = base is not H11Protocol

        app: ASGIApp

        def __init__(
            self,
            config: uvicorn.Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self.app = checked(self.app)
            self._h11_header_bytes: int | None = None
            if not self._counted:
                self.conn.next_event = self._next_event  # h11: see what each event took

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > cap:
                # Closed before any read: no request on it ever reaches the app.
                refused.hit()
                transport.write(REFUSAL)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if not self._counted:
                super().data_received(data)
                if not self.transport.is_closing():
                    self._watch_body()
                return
            # Searched with the end of the previous read: a blank line may be split by reads.
            joined, shift = self._tail + data, len(self._tail)
            self._tail = joined[-len(_BLANK_LINE) + 1 :]
            pos, splits = 0, 0
            while pos < len(data):
                if self._in_body and self._remaining is not None:
                    end = pos + max(1, self._remaining)  # a Content-Length body: exactly it
                elif self._in_body and splits >= CHUNKED_SPLITS:
                    end = len(data)
                elif not self._in_body and not self._in_headers and data[pos] in b"\r\n":
                    # Blank lines before a request line (the parser skips them): one piece,
                    # not one per blank line (a read of them took 43 ms to be cut off).
                    end = _LINE_BREAKS.match(data, pos).end()  # type: ignore[union-attr]
                else:
                    found = joined.find(_BLANK_LINE, max(0, pos + shift - len(_BLANK_LINE) + 1))
                    end = len(data) if found == -1 else found + len(_BLANK_LINE) - shift
                    splits += self._in_body
                if not self._feed(data[pos:end]):
                    return
                pos = end

        def _feed(self, piece: bytes) -> bool:
            """Parse one piece of a read (httptools) and count it; False once closing."""
            self._boundary = self._began = self._headers_ended = False
            self._body_read = 0
            self._piece, self._piece_in_body = len(piece), self._in_body
            super().data_received(piece)
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return False
            self._watch_body()
            if self._piece_in_body and not self._began:
                if self._body_read:
                    self._header_bytes = 0  # the body's own limit is the app's (bodies.py)
                    return True
                if self._boundary:
                    return True  # the body's last chunk: checked no further
            elif self._headers_ended:
                return True  # checked whole, in on_headers_complete
            self._header_bytes += self._header_part()
            if self._header_bytes > MAX_HEADER_BYTES:
                self._refuse_fields()
                return False
            return True

        def _header_part(self) -> int:
            """Return how many bytes of this piece are header (or trailer) bytes."""
            if self._piece_in_body and self._began:
                # A chunked body ended in this piece, past CHUNKED_SPLITS: its framing and
                # any request before this one in the piece are counted too (never fewer).
                return self._piece - self._body_read
            return self._piece

        def _next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
            """h11's next event; a request's records the header bytes it took."""
            buffered = len(self.conn._receive_buffer)
            event = h11.Connection.next_event(self.conn)
            if isinstance(event, h11.Request):
                self._h11_header_bytes = buffered - len(self.conn._receive_buffer)
            return event

        def handle_events(self) -> None:
            """h11: handle the events, and give the request begun among them its size."""
            self._h11_header_bytes = None
            super().handle_events()
            if self._h11_header_bytes is not None:  # at most one: h11 pauses after it
                self.scope[HEADER_BYTES_KEY] = self._h11_header_bytes

        def _watch_body(self) -> None:
            """Arm the body deadline while a request's body is coming, disarm it once not."""
            cycle = self.cycle
            coming = cycle is not None and cycle.more_body and not cycle.response_complete
            if coming and self._body_timer is None:
                self._body_timer = self.loop.call_later(timeout, self._body_late)
            elif not coming and self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_late(self) -> None:
            self._body_timer = None
            cycle = self.cycle
            if self._counted and any(queued is cycle for queued, _ in self.pipeline):
                self._watch_body()  # behind a response in flight, unread: its turn is to come
                return
            stalled.hit()
            if not cycle.response_started:
                self.transport.write(too_slow)
            self.transport.close()

        def _refuse_fields(self) -> None:
            cycle = self.cycle
            if self._in_body:  # trailer fields: the answer is this request's, if not begun
                answer = cycle is not None and not cycle.response_started
            else:  # the next request's headers: answered only after every response before
                answer = cycle is None or cycle.response_complete
            if answer:
                oversized.hit()
                self.transport.write(HEADERS_TOO_LARGE)
            else:
                cut.hit()  # a response is being written on this connection: nothing may cut in
            self.transport.close()

        def on_message_begin(self) -> None:
            if self._piece_in_body:
                self._header_bytes = 0  # a body's trailer count ends with it
            self._began = self._in_headers = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            # The piece ends here (at its blank line): the headers' bytes are all counted.
            self.scope[HEADER_BYTES_KEY] = self._header_bytes + self._header_part()
            # The parser refuses a Content-Length that is not digits, or beside chunked.
            length = next((v for k, v in self.headers if k == b"content-length"), None)
            self._remaining = None if length is None else int(length)
            self._in_body = self._headers_ended = True
            self._in_headers = False
            self._header_bytes = 0
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            self._body_read += len(body)
            if self._remaining is not None:
                self._remaining -= len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._boundary, self._in_body = True, False
            self._header_bytes = 0
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's headers get the same deadline
            self._watch_body()  # and a pipelined request begun meanwhile, its body's

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._body_timer is not None:
                self._body_timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                return  # its headers came in: a request is being served
            slow.hit()
            self.transport.close()

    return GuardedProtocol


class GuardedServer(uvicorn.Server):
    """uvicorn's server, logging `accept()` failures for lack of descriptors once per interval."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve as uvicorn does, with the rate-limited exception handler on the loop."""
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(accept_error_handler(loop.default_exception_handler))
        await super().serve(sockets)


Handler = Callable[[dict[str, Any]], None]
LoopHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]


def accept_error_handler(default: Handler) -> LoopHandler:
    """Return a loop exception handler counting descriptor exhaustion, else calling `default`."""
    exhausted = IntervalLog("cannot accept connections: out of file descriptors")

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in OUT_OF_DESCRIPTORS:
            exhausted.hit()
            return
        default(context)

    return handle
