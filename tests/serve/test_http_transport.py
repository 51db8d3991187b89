"""`serve http`'s transport walked: every way a request's bytes can arrive, on every path.

Raw sockets against real `ticket-tools serve http` processes: the direct path (the default)
and the SDK's path (`TICKET_TOOLS_HTTP_PATH=sdk`), 2026-07-28 calls (no session, the
envelope in `_meta`) and 2025-11-25 calls (in a session), and h11 (without httptools)
for the header limit. Each request is sent all in one read, split at each boundary of its
parts, pipelined behind a request in flight (behind an open `GET /mcp` stream too),
chunked, endless, at each limit and one byte past it, with and without credentials, and
with a token that lacks the read scope. Each limit of docs/http.md is proved here on every
path; the memory tests measure the server's RSS from /proc while a dozen connections each
send an endless header or body, and ask `/readyz` between rounds with a 1 s timeout.
"""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from expected import T104
from http_support import open_session
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.serve.bodies import MAX_BODY_BYTES
from ticket_tools.serve.connections import MAX_HEADER_BYTES
from ticket_tools.serve.direct import SWITCH

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "transport", "version": "1"},
}
UNLIMITED = ("--tenant-rate", "0", "--subject-rate", "0")
HEADER_TIMEOUT = 3  # seconds: the transport servers' --header-timeout, a stalled body's too
WAIT_SECONDS = 30.0  # generous: only reached when the server never answers
READYZ_TIMEOUT = 1.0  # the bound: /readyz answers within 1 s throughout a flood
FLOODERS = 12  # the red-team run's dozen
MEMORY_BOUND = 64 * 1024 * 1024
FLOOD_BUDGET = 16 * 1024 * 1024  # bytes offered per connection: 192 MiB in all, past the bound
GET_104 = {"ok": True, "ticket": T104}
PATHS = ["direct", "sdk"]
VERSIONS = [MODERN, HANDSHAKE]


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider the servers trust."""
    return Issuer("idp")


def _started(folder: Path, name: str, *extra: str, **options: Any) -> HttpServer:
    return HttpServer(folder / name, str(folder / "jwks.json"), *extra, **options)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[dict[str, Any]]:
    """Sessions on, no rate limits: the direct path, the SDK's path, and h11 (direct).

    "limited" is stateless with a subject rate of one call per 100 s: every call after the
    first is refused, so a request is in flight for the refusal's 0.5 s delay.
    """
    folder = tmp_path_factory.mktemp("transport")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    timeout = ("--header-timeout", str(HEADER_TIMEOUT))
    started: dict[str, HttpServer] = {}
    try:
        started["direct"] = _started(folder, "direct", *UNLIMITED, *timeout)
        started["sdk"] = _started(folder, "sdk", *UNLIMITED, *timeout, env={SWITCH: "sdk"})
        started["h11"] = _started(folder, "h11", *UNLIMITED, *timeout, plain=True)
        limited = ("--stateless", "--subject-rate", "0.01", *timeout)
        started["limited"] = _started(folder, "limited", *limited)
        yield started
    finally:
        for server in started.values():
            assert server.stop() == 0, server.stderr()


@pytest.fixture(scope="module")
def bearers(idp: Issuer) -> dict[str, str]:
    """Tokens: alpha with the read scope, alpha without it."""
    return {
        "read": idp.sign(claims("alpha", "transport")),
        "no-read": idp.sign(claims("alpha", "transport-no-read", scope="openid")),
    }


@pytest.fixture(scope="module")
def sessions(servers: dict[str, HttpServer], bearers: dict[str, str]) -> dict[tuple[str, str], str]:
    """A 2025-11-25 session per (server, token kind), opened over raw HTTP."""
    return {
        (name, kind): open_session(servers[name].url, bearer)
        for name in ("direct", "sdk", "h11")
        for kind, bearer in bearers.items()
    }


@dataclass(frozen=True)
class Call:
    """A get_ticket TKT-104 call to one server, as one protocol version sends it."""

    server: HttpServer
    bearer: str | None
    version: str
    sid: str | None = None

    def body(self, request_id: int = 1, size: int | None = None) -> bytes:
        """Return the JSON body; `size`: padded with trailing spaces to exactly that many bytes."""
        params: dict[str, object] = {"name": "get_ticket", "arguments": {"ticket_id": "TKT-104"}}
        if self.version == MODERN:
            params["_meta"] = META
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        raw = json.dumps(body).encode()
        return raw if size is None else raw + b" " * (size - len(raw))

    def head(self, *, length: int | None, extra: str = "") -> bytes:
        """Return the request line and headers; `length` None: chunked."""
        lines = [
            "POST /mcp HTTP/1.1",
            f"Host: 127.0.0.1:{self.server.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"MCP-Protocol-Version: {self.version}",
        ]
        if self.bearer is not None:
            lines.append(f"Authorization: Bearer {self.bearer}")
        if self.version == MODERN:
            lines += ["Mcp-Method: tools/call", "Mcp-Name: get_ticket"]
        if self.sid is not None:
            lines.append(f"Mcp-Session-Id: {self.sid}")
        lines.append(
            "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
        )
        return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()

    def request(self, request_id: int = 1, size: int | None = None) -> bytes:
        """Return the whole request, with a Content-Length."""
        body = self.body(request_id, size)
        return self.head(length=len(body)) + body


CallFor = Callable[..., Call]


@pytest.fixture(scope="module")
def call_for(
    servers: dict[str, HttpServer], bearers: dict[str, str], sessions: dict[tuple[str, str], str]
) -> CallFor:
    """Return the call to server `name` in `version` with a token of `kind` (None: none)."""

    def make(name: str, version: str, kind: str | None = "read") -> Call:
        bearer = None if kind is None else bearers[kind]
        sid = sessions[(name, kind)] if version == HANDSHAKE and kind is not None else None
        return Call(servers[name], bearer, version, sid)

    return make


def connect(server: HttpServer, timeout: float = WAIT_SECONDS) -> socket.socket:
    """Open a TCP connection to the server, Nagle off (each send is a segment of its own)."""
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


@dataclass(frozen=True)
class Response:
    """One HTTP response as read off the wire."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """Return the body decoded."""
        return json.loads(self.body)

    def result(self) -> object:
        """Return the structured result of a tools/call answer."""
        return self.json()["result"]["structuredContent"]


class Reader:
    """Read responses one after another off a connection (pipelined ones in order)."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.pending = b""

    def _more(self) -> bool:
        try:
            chunk = self.connection.recv(65536)
        except ConnectionResetError:
            chunk = b""
        self.pending += chunk
        return bool(chunk)

    def head(self) -> tuple[int, dict[str, str]]:
        """Read a status line and headers; return the status and the headers (lower-case)."""
        while b"\r\n\r\n" not in self.pending:
            if not self._more():
                raise EOFError(self.pending)
        head, _, self.pending = self.pending.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        return int(status_line.split(" ")[1]), headers

    def response(self) -> Response:
        """Read one whole response with a Content-Length body."""
        status, headers = self.head()
        length = int(headers["content-length"])
        while len(self.pending) < length:
            if not self._more():
                raise EOFError(self.pending)
        body, self.pending = self.pending[:length], self.pending[length:]
        return Response(status, headers, body)

    def closed(self) -> bytes:
        """Wait until the server closes the connection; return what came before the close."""
        while self._more():
            pass
        return self.pending


def exchange(server: HttpServer, *sends: bytes, pause: float = 0.0) -> Response:
    """Send `sends` on a new connection (`pause` seconds apart); return the one response."""
    with connect(server) as connection:
        for number, data in enumerate(sends):
            if number and pause:
                time.sleep(pause)
            connection.sendall(data)
        return Reader(connection).response()


def chunked(body: bytes, size: int) -> bytes:
    """Return `body` in the chunked coding, `size` bytes a chunk, with the last chunk."""
    pieces = [body[at : at + size] for at in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def tool_answer(response: Response) -> tuple[int, object]:
    """Return the status and the structured result (or the JSON-RPC error) of an answer."""
    answer = response.json()
    return response.status, answer["result"]["structuredContent"] if "result" in answer else answer


def boundaries(data: bytes) -> list[int]:
    """Return the offsets to split `data` at: each side of every CR and LF, the middle and
    the colon of every header line, and the body's first, middle and last byte."""
    head_end = data.index(b"\r\n\r\n") + 4
    offsets = {1, head_end - 1, head_end, head_end + 1, (head_end + len(data)) // 2, len(data) - 1}
    start = 0
    for end in [m.start() for m in re.finditer(b"\r\n", data[:head_end])]:
        offsets.update({end, end + 1, end + 2, (start + end) // 2})
        colon = data.find(b":", start, end)
        if colon != -1:
            offsets.update({colon, colon + 1, colon + 2})
        start = end + 2
    return sorted(at for at in offsets if 0 < at < len(data))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_call_in_one_read_is_answered(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    assert tool_answer(exchange(call.server, call.request())) == (200, GET_104)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_call_split_at_each_boundary_is_answered_alike(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    data = call.request()
    answers = {
        at: tool_answer(exchange(call.server, data[:at], data[at:], pause=0.02))
        for at in boundaries(data)
    }
    assert answers == dict.fromkeys(boundaries(data), (200, GET_104))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_call_sent_a_byte_at_a_time_is_answered(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    data = call.request()
    sends = [data[at : at + 1] for at in range(len(data))]
    assert tool_answer(exchange(call.server, *sends)) == (200, GET_104)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_pipelined_calls_are_answered_in_order(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    with connect(call.server) as connection:
        connection.sendall(b"".join(call.request(request_id) for request_id in (1, 2, 3)))
        reader = Reader(connection)
        answers = [reader.response().json() for _ in range(3)]
    got = [(a["id"], a["result"]["structuredContent"]) for a in answers]
    assert got == [(1, GET_104), (2, GET_104), (3, GET_104)]


def header_request(server: HttpServer, size: int) -> bytes:
    """Return a GET /healthz whose request line and headers are exactly `size` bytes."""
    start = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Pad: ".encode()
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


HEALTHY = (200, b'{"status":"ok"}')
TOO_LARGE = (431, b"The request line and headers are too large\n")
HEADER_SERVERS = ["direct", "sdk", "h11"]


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[at : at + size] for at in range(0, len(data), size)]


@pytest.mark.parametrize(
    "delivery",
    [
        pytest.param(lambda data: [data], id="one-read"),
        pytest.param(lambda data: _pieces(data, 4096), id="4-KiB-reads"),
        pytest.param(lambda data: [data[:-1], data[-1:]], id="last-byte-apart"),
        pytest.param(lambda data: [data[:-4], data[-4:]], id="blank-line-apart"),
    ],
)
@pytest.mark.parametrize("name", HEADER_SERVERS)
def test_headers_at_the_limit_are_served_and_one_byte_more_is_431(
    servers: dict[str, HttpServer], name: str, delivery: Callable[[bytes], list[bytes]]
) -> None:
    server = servers[name]
    got = {}
    for size in (MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1):
        response = exchange(server, *delivery(header_request(server, size)), pause=0.02)
        got[size] = (response.status, response.body)
    assert got == {MAX_HEADER_BYTES: HEALTHY, MAX_HEADER_BYTES + 1: TOO_LARGE}


@pytest.mark.parametrize("name", HEADER_SERVERS)
def test_a_431_closes_the_connection(servers: dict[str, HttpServer], name: str) -> None:
    server = servers[name]
    with connect(server) as connection:
        connection.sendall(
            header_request(server, MAX_HEADER_BYTES + 1) + header_request(server, 100)
        )
        reader = Reader(connection)
        response = reader.response()
        assert (response.status, response.headers["connection"], reader.closed()) == (
            431,
            "close",
            b"",
        )


@pytest.mark.parametrize("size", [MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1])
@pytest.mark.parametrize("name", ["limited"])
def test_headers_pipelined_behind_a_request_in_flight_count_the_same(
    servers: dict[str, HttpServer], bearers: dict[str, str], name: str, size: int
) -> None:
    # Every call after the first on this server is refused 0.5 s after it came: in flight.
    server = servers[name]
    call = Call(server, bearers["read"], MODERN)
    exchange(server, call.request())
    with connect(server) as connection:
        connection.sendall(call.request() + header_request(server, size))
        reader = Reader(connection)
        first, second = reader.response(), reader.response()
    assert first.json()["id"] == 1  # answered first, whatever the answer
    assert (second.status, second.body) == (HEALTHY if size == MAX_HEADER_BYTES else TOO_LARGE)


BODY_DELIVERIES = [
    pytest.param(lambda call, body: [call.head(length=len(body)) + body], id="one-read"),
    pytest.param(
        lambda call, body: [call.head(length=len(body)), *_pieces(body, 65536)],
        id="length-in-64-KiB-reads",
    ),
    pytest.param(
        lambda call, body: [call.head(length=None), chunked(body, 65536)], id="chunked-64-KiB"
    ),
    pytest.param(
        lambda call, body: [call.head(length=None), chunked(body, 1000)], id="chunked-1000-B"
    ),
]
Delivery = Callable[[Call, bytes], list[bytes]]
TOO_LARGE_BODY = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": -32600,
        "message": f"Request body too large: at most {MAX_BODY_BYTES} bytes",
    },
}
FORBIDDEN = {
    "ok": False,
    "code": "forbidden",
    "detail": "this session may not read tickets",
}


@pytest.mark.parametrize("delivery", BODY_DELIVERIES)
@pytest.mark.parametrize("kind", ["read", "no-read"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_body_at_the_limit_is_answered_and_one_byte_more_is_413(
    call_for: CallFor,
    path: str,
    version: str,
    kind: str,
    delivery: Delivery,
) -> None:
    call = call_for(path, version, kind)
    got = {}
    for size in (MAX_BODY_BYTES, MAX_BODY_BYTES + 1):
        response = exchange(call.server, *delivery(call, call.body(size=size)))
        got[size] = tool_answer(response)
    allowed = GET_104 if kind == "read" else FORBIDDEN
    assert got == {MAX_BODY_BYTES: (200, allowed), MAX_BODY_BYTES + 1: (413, TOO_LARGE_BODY)}


@pytest.mark.parametrize("size", [5_000_000, 50_000_000])
@pytest.mark.parametrize(
    "chunks", [pytest.param(False, id="length"), pytest.param(True, id="chunked")]
)
@pytest.mark.parametrize("version", VERSIONS)
def test_a_5_or_50_mb_call_gets_the_same_413_on_both_paths(
    call_for: CallFor,
    version: str,
    chunks: bool,
    size: int,
) -> None:
    answers = {}
    for path in PATHS:
        call = call_for(path, version)
        body = call.body(size=size)
        head = call.head(length=None if chunks else len(body))
        with connect(call.server) as connection:
            connection.sendall(head)
            # Sent as a client that reads the answer meanwhile: the 413 may come at once.
            rest = chunked(body, 65536) if chunks else body
            for piece in _pieces(rest, 1024 * 1024):
                if select.select([connection], [], [], 0)[0]:
                    break
                connection.sendall(piece)
            response = Reader(connection).response()
        answers[path] = tool_answer(response)
    assert answers == dict.fromkeys(PATHS, (413, TOO_LARGE_BODY))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_declared_length_past_the_limit_is_413_before_the_body(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    response = exchange(call.server, call.head(length=MAX_BODY_BYTES + 1))  # no body sent
    assert tool_answer(response) == (413, TOO_LARGE_BODY)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_without_credentials_the_body_is_never_read(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version, kind=None)
    for head in (call.head(length=50_000_000), call.head(length=None)):  # no body sent
        response = exchange(call.server, head)
        assert (response.status, response.json()) == (401, NO_CREDENTIALS)


NO_CREDENTIALS = {"error_description": "Authentication required: send an OAuth bearer token"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", PATHS)
def test_a_stalled_body_is_answered_408_after_the_header_timeout(
    call_for: CallFor,
    path: str,
    version: str,
) -> None:
    call = call_for(path, version)
    body = call.body()
    with connect(call.server) as connection:
        connection.sendall(call.head(length=len(body)) + body[:10])  # the rest never comes
        reader = Reader(connection)
        response = reader.response()
        closed = reader.closed()
    assert (response.status, response.headers["connection"], response.json(), closed) == (
        408,
        "close",
        STALLED,
        b"",
    )


STALLED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": -32600,
        "message": f"Request body not received within {HEADER_TIMEOUT} s",
    },
}


@pytest.mark.parametrize("path", PATHS)
def test_a_body_sent_slowly_within_the_deadline_is_answered(
    call_for: CallFor,
    path: str,
) -> None:
    call = call_for(path, MODERN)
    body = call.body()
    sends = [call.head(length=None), *(chunked(piece, 64)[:-5] for piece in _pieces(body, 64))]
    response = exchange(call.server, *sends, b"0\r\n\r\n", pause=0.1)
    assert tool_answer(response) == (200, GET_104)


def rss(server: HttpServer) -> int:
    """Return the server process's resident set size in bytes (Linux /proc)."""
    status = Path(f"/proc/{server.process.pid}/status").read_text(encoding="ascii")
    return int(re.search(r"VmRSS:\s+([0-9]+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def readyz(server: HttpServer) -> tuple[int, bytes] | str:
    """Ask /readyz on a new connection, waiting at most READYZ_TIMEOUT; "timeout" if late."""
    deadline = time.monotonic() + READYZ_TIMEOUT
    try:
        with connect(server, timeout=READYZ_TIMEOUT) as connection:
            request = f"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n"
            connection.sendall(request.encode())
            reader = Reader(connection)
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            response = reader.response()
    except TimeoutError:
        return "timeout"
    return response.status, response.body


READY = (200, b'{"status":"ready"}')


@dataclass
class Flooder:
    """One connection sending an endless header or body, and what became of it."""

    connection: socket.socket
    sent: int = 0
    received: bytes = b""
    closed: bool = False
    """The server closed the connection (or reset it)."""
    blocked: int = 0
    """Rounds in a row the server took no byte: it stopped reading this connection."""

    def offer(self, piece: bytes) -> None:
        """Send what the socket takes of `piece` now; note a close by the server."""
        try:
            while readable(self.connection):
                chunk = self.connection.recv(65536)
                if not chunk:
                    self.closed = True
                    return
                self.received += chunk
            self.sent += self.connection.send(piece)
            self.blocked = 0
        except BlockingIOError:
            self.blocked += 1
        except OSError:  # reset, or a broken pipe: the server closed it
            self.closed = True

    def done(self) -> bool:
        """Say whether this connection needs no more bytes: closed, answered, held or spent."""
        answered = self.received.count(b"HTTP/1.1 ") > self.expected_heads and not self.to_close
        return self.closed or answered or self.blocked >= 20 or self.sent >= FLOOD_BUDGET

    expected_heads: int = 0
    """Responses the connection gets before its flood is answered (a call pipelined first)."""
    to_close: bool = False
    """Keep sending after the answer, until the server closes the connection."""


def readable(connection: socket.socket) -> bool:
    """Say whether the connection has bytes (or its end) to read now."""
    return bool(select.select([connection], [], [], 0)[0])


def flood(
    server: HttpServer, flooders: list[Flooder], piece: bytes, *, pause: float = 0.0
) -> tuple[int, list[Any]]:
    """Offer `piece` to every flooder until each is done; return the RSS growth and the probes.

    /readyz is asked and the RSS read after each round; `pause` seconds pass between rounds.
    """
    baseline = peak = rss(server)
    probes: list[Any] = []
    for flooder in flooders:
        flooder.connection.setblocking(False)
    while not all(flooder.done() for flooder in flooders):
        for flooder in flooders:
            if not flooder.done():
                flooder.offer(piece)
        probes.append(readyz(server))
        peak = max(peak, rss(server))
        if pause or any(f.blocked for f in flooders):
            time.sleep(pause or 0.01)  # or the server stopped reading one: let the round pass
    for flooder in flooders:
        flooder.connection.close()
    return peak - baseline, probes


ENDLESS_HEADER = b"a" * 65536


def endless_header_start(server: HttpServer) -> bytes:
    """Return the start of a request whose header never ends."""
    return f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Flood: ".encode()


def open_stream(server: HttpServer, bearer: str) -> Flooder:
    """Open a session and its `GET /mcp` event stream on a new connection; return it, read to
    the stream's response head."""
    sid = open_session(server.url, bearer)
    connection = connect(server)
    request = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {bearer}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: {HANDSHAKE}\r\n\r\n"
    )
    connection.sendall(request.encode())
    reader = Reader(connection)
    status, headers = reader.head()
    assert (status, headers["content-type"]) == (200, "text/event-stream")
    return Flooder(connection, received=reader.pending, expected_heads=0)


def answered_once(flooder: Flooder) -> tuple[bytes, int, bool]:
    """Return a flooder's first status line, how many responses it got, and whether it closed."""
    received = flooder.received
    return received.split(b"\r\n")[0], received.count(b"HTTP/1.1"), flooder.closed


def check_flood(growth: int, probes: list[Any], flooders: list[Flooder]) -> None:
    """Assert the bounds: every probe ready, the RSS growth under MEMORY_BOUND, none spent."""
    assert probes == [READY] * len(probes)
    assert growth < MEMORY_BOUND, f"RSS grew {growth / 2**20:.0f} MiB"
    assert [f.sent < FLOOD_BUDGET for f in flooders] == [True] * FLOODERS


@pytest.mark.parametrize("name", HEADER_SERVERS)
def test_a_dozen_endless_headers_behind_open_streams_stay_bounded(
    servers: dict[str, HttpServer], idp: Issuer, name: str
) -> None:
    server = servers[name]
    flooders = [
        open_stream(server, idp.sign(claims("alpha", f"stream-{n}"))) for n in range(FLOODERS)
    ]
    for flooder in flooders:
        flooder.connection.sendall(endless_header_start(server))
    growth, probes = flood(server, flooders, ENDLESS_HEADER)
    check_flood(growth, probes, flooders)
    # Each was closed with no answer written into its stream (its own response is in flight);
    # h11 instead stops reading a connection behind a request in flight, so it holds one read.
    fate = [("closed" if f.closed else "unread", b"HTTP/1.1" in f.received) for f in flooders]
    assert fate == [("unread" if name == "h11" else "closed", False)] * FLOODERS


def test_a_dozen_endless_headers_behind_refused_calls_stay_bounded(
    servers: dict[str, HttpServer], bearers: dict[str, str]
) -> None:
    # Each call is in flight for the refusal's 0.5 s: the header behind it comes a MiB a send,
    # so that the window holds more than the bound (the count stopped while it lasted).
    server = servers["limited"]
    call = Call(server, bearers["read"], MODERN)
    flooders = [Flooder(connect(server), expected_heads=1) for _ in range(FLOODERS)]
    for flooder in flooders:
        flooder.connection.sendall(call.request() + endless_header_start(server))
    growth, probes = flood(server, flooders, ENDLESS_HEADER * 16)
    check_flood(growth, probes, flooders)
    assert [f.closed for f in flooders] == [True] * FLOODERS


@pytest.mark.parametrize("path", PATHS)
def test_a_dozen_endless_headers_stay_bounded(servers: dict[str, HttpServer], path: str) -> None:
    server = servers[path]
    flooders = [Flooder(connect(server)) for _ in range(FLOODERS)]
    for flooder in flooders:
        flooder.connection.sendall(endless_header_start(server))
    growth, probes = flood(server, flooders, ENDLESS_HEADER)
    check_flood(growth, probes, flooders)
    assert [f.received[:36] for f in flooders] == [
        b"HTTP/1.1 431 Request Header Fields T"
    ] * FLOODERS


ENDLESS_CHUNK = b"%x\r\n%s\r\n" % (65536, b" " * 65536)


@pytest.mark.parametrize(
    ("version", "kind"),
    [
        pytest.param(MODERN, "read", id="2026-read"),
        pytest.param(MODERN, "no-read", id="2026-no-read"),
        pytest.param(HANDSHAKE, "read", id="2025-read"),
    ],
)
@pytest.mark.parametrize("path", [*PATHS, "h11"])
def test_a_dozen_endless_bodies_are_413_and_stay_bounded(
    call_for: CallFor,
    path: str,
    version: str,
    kind: str,
) -> None:
    call = call_for(path, version, kind)
    flooders = [Flooder(connect(call.server)) for _ in range(FLOODERS)]
    for flooder in flooders:
        # A well-formed call's start, then spaces forever (valid JSON, were it to end).
        flooder.connection.sendall(call.head(length=None) + chunked(call.body()[:-1], 65536)[:-5])
    growth, probes = flood(call.server, flooders, ENDLESS_CHUNK)
    check_flood(growth, probes, flooders)
    status_lines = [f.received.split(b"\r\n")[0] for f in flooders]
    assert status_lines == [b"HTTP/1.1 413 Request Entity Too Large"] * FLOODERS


@pytest.mark.parametrize("path", PATHS)
def test_a_dozen_endless_bodies_without_credentials_are_401_and_stay_bounded(
    servers: dict[str, HttpServer], path: str
) -> None:
    # The 401 comes at once; the body that follows is dropped as it comes, until the header
    # deadline (armed again by the response) closes the connection.
    call = Call(servers[path], None, MODERN)
    flooders = [Flooder(connect(call.server), to_close=True) for _ in range(FLOODERS)]
    for flooder in flooders:
        flooder.connection.sendall(call.head(length=None))
    growth, probes = flood(call.server, flooders, ENDLESS_CHUNK, pause=0.05)
    check_flood(growth, probes, flooders)
    fate = [answered_once(f) for f in flooders]
    assert fate == [(b"HTTP/1.1 401 Unauthorized", 1, True)] * FLOODERS


@pytest.mark.parametrize("path", PATHS)
def test_a_dozen_endless_bodies_behind_open_streams_stay_bounded(
    servers: dict[str, HttpServer], idp: Issuer, path: str
) -> None:
    server = servers[path]
    bearers = [idp.sign(claims("alpha", f"body-stream-{n}")) for n in range(FLOODERS)]
    flooders = [open_stream(server, bearer) for bearer in bearers]
    for flooder, bearer in zip(flooders, bearers, strict=True):
        # Pipelined behind the stream: the server reads no more of it until the stream ends.
        flooder.connection.sendall(Call(server, bearer, MODERN).head(length=None))
    growth, probes = flood(server, flooders, ENDLESS_CHUNK)
    check_flood(growth, probes, flooders)


@pytest.mark.parametrize("path", PATHS)
def test_a_client_that_leaves_mid_body_costs_nothing(
    servers: dict[str, HttpServer], call_for: CallFor, path: str
) -> None:
    call = call_for(path, MODERN)
    before = call.server.stderr()
    body = call.body()
    with connect(call.server) as connection:
        connection.sendall(call.head(length=len(body)) + body[:10])
        time.sleep(0.2)  # the server is reading the body when the client goes
    assert tool_answer(exchange(call.server, call.request())) == (200, GET_104)
    logged = call.server.stderr().removeprefix(before).splitlines()
    # Nothing logged (but an earlier test's count of refusals, which comes a while after).
    assert [line for line in logged if "more times in the last" not in line] == []


@pytest.mark.parametrize("name", HEADER_SERVERS)
def test_a_chunked_call_with_trailer_fields_is_answered(
    servers: dict[str, HttpServer], bearers: dict[str, str], name: str
) -> None:
    call = Call(servers[name], bearers["read"], MODERN)
    body = chunked(call.body(), 100)[:-2] + b"X-Checksum: 1234\r\nX-Other: a\r\n\r\n"
    assert tool_answer(exchange(call.server, call.head(length=None), body)) == (200, GET_104)


TRAILER_REFUSALS = {
    "direct": b"HTTP/1.1 431 Request Header Fields Too Large",
    "sdk": b"HTTP/1.1 431 Request Header Fields Too Large",
    "h11": b"HTTP/1.1 400 Bad Request",  # h11's own bound on unparsed input, at 32 KiB too
}


@pytest.mark.parametrize("name", HEADER_SERVERS)
def test_a_dozen_endless_trailer_fields_stay_bounded(
    servers: dict[str, HttpServer], bearers: dict[str, str], name: str
) -> None:
    # The fields after a chunked body's last chunk: httptools keeps them as it keeps headers.
    call = Call(servers[name], bearers["read"], MODERN)
    flooders = [Flooder(connect(call.server)) for _ in range(FLOODERS)]
    for flooder in flooders:
        flooder.connection.sendall(call.head(length=None) + b"2\r\n{}\r\n0\r\nX-Trailer: ")
    growth, probes = flood(call.server, flooders, ENDLESS_HEADER)
    check_flood(growth, probes, flooders)
    status_lines = [f.received.split(b"\r\n")[0] for f in flooders]
    assert status_lines == [TRAILER_REFUSALS[name]] * FLOODERS


@pytest.mark.parametrize("path", PATHS)
def test_endless_trailer_fields_after_a_401_close_the_connection(
    servers: dict[str, HttpServer], path: str
) -> None:
    # The 401 is written before the trailers come: nothing may follow it on the connection.
    call = Call(servers[path], None, MODERN)
    flooders = [Flooder(connect(call.server), to_close=True) for _ in range(FLOODERS)]
    for flooder in flooders:
        flooder.connection.sendall(call.head(length=None) + b"2\r\n{}\r\n0\r\nX-Trailer: ")
    growth, probes = flood(call.server, flooders, ENDLESS_HEADER, pause=0.01)
    check_flood(growth, probes, flooders)
    fate = [answered_once(f) for f in flooders]
    assert fate == [(b"HTTP/1.1 401 Unauthorized", 1, True)] * FLOODERS


def test_a_body_queued_behind_an_open_stream_is_not_timed_out(
    servers: dict[str, HttpServer], idp: Issuer
) -> None:
    # Its body cannot come while the stream holds the connection: the deadline waits its turn.
    server = servers["direct"]
    bearer = idp.sign(claims("alpha", "queued-body"))
    stream = open_stream(server, bearer)
    body = Call(server, bearer, MODERN).body()
    with stream.connection as connection:
        connection.sendall(Call(server, bearer, MODERN).head(length=len(body)) + body[:10])
        time.sleep(HEADER_TIMEOUT + 1.5)
        connection.settimeout(0.5)
        with pytest.raises(TimeoutError):
            connection.recv(4096)  # nothing written into the stream, and it is still open
