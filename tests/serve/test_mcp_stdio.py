"""The stdio transport: every line a client sends is answered or, for JSON-RPC's own reasons, not.

The lines go to a real `ticket-tools serve` subprocess as raw bytes, since no SDK client
would send them; `read_line` and `encode` are also checked in-process, rule by rule.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from itertools import count
from typing import Any, BinaryIO, cast

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from expected import ALPHA, T101
from ticket_tools import execute_tool, fixture_records
from ticket_tools.serve import stdio
from ticket_tools.serve.server import build_server
from ticket_tools.serve.stdio import encode, read_line, stdio_transport

REPLY_TIMEOUT = 60.0  # seconds: only reached when the server never answers
PARSE_ERROR = {"code": -32700, "message": "Parse error"}
INVALID_REQUEST = {"code": -32600, "message": "Invalid Request"}
INVALID_PARAMS = {"code": -32602, "message": "Invalid request parameters"}
DEPTH_PAST_SDK = 200  # the SDK's JSON parser refuses nesting from about here
DEPTH_PAST_PYTHON = 5_000  # past Python's recursion limit, so past the stdlib's parser too


def _call(request_id: object, arguments: str, name: str = "search_tickets") -> bytes:
    """A tools/call line with `arguments` written as raw JSON text."""
    return (
        f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, "method": "tools/call", '
        f'"params": {{"name": "{name}", "arguments": {arguments}}}}}'
    ).encode()


def _lists(depth: int) -> str:
    return "[" * depth + "]" * depth


def _objects(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


class RawServer:
    """A `ticket-tools serve` subprocess spoken to in raw JSON-RPC lines."""

    def __init__(self, args: list[str], stderr: BinaryIO) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            # Unbuffered: readline() reads no further than the line, so select() on the
            # pipe is never fooled by a reply already sitting in a buffer.
            bufsize=0,
        )
        self.pings = count()

    def send(self, line: bytes) -> None:
        stdin = cast("BinaryIO", self.process.stdin)
        stdin.write(line + b"\n")

    def reply(self) -> dict[str, Any]:
        stdout = cast("BinaryIO", self.process.stdout)
        ready, _, _ = select.select([stdout], [], [], REPLY_TIMEOUT)
        assert ready, "the server did not answer"
        return cast("dict[str, Any]", json.loads(stdout.readline()))

    def request(self, method: str, params: dict[str, object], request_id: object) -> object:
        """Send one well-formed request; return its reply."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.send(json.dumps(message).encode())
        return self.reply()

    def answers(self, line: bytes) -> list[dict[str, Any]]:
        """Send `line`, then a ping; return every reply that came before the ping's.

        The reader answers a line it refuses before it reads the next one, so an
        answer to `line` always comes first; a line never answered returns [].
        """
        self.send(line)
        ping_id = f"ping-{next(self.pings)}"
        self.send(f'{{"jsonrpc": "2.0", "id": "{ping_id}", "method": "ping"}}'.encode())
        replies = []
        while (reply := self.reply()) != {"jsonrpc": "2.0", "id": ping_id, "result": {}}:
            replies.append(reply)
        return replies

    def handshake(self) -> None:
        initialized = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
            0,
        )
        assert initialized == {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "ticket-tools", "version": version("ticket-tools")},
            },
        }
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')


@pytest.fixture(scope="module")
def stderr() -> Iterator[BinaryIO]:
    """The server's stderr, to read what it logs."""
    with tempfile.TemporaryFile() as log:
        yield cast("BinaryIO", log)


@pytest.fixture(scope="module")
def server(stderr: BinaryIO) -> Iterator[RawServer]:
    """One alpha server for the whole module, past its handshake; it must exit cleanly."""
    raw = RawServer(["--tenant", "alpha"], stderr)
    with raw.process:
        raw.handshake()
        yield raw
        cast("BinaryIO", raw.process.stdin).close()
        assert raw.process.wait(timeout=REPLY_TIMEOUT) == 0
    stderr.seek(0)
    assert b"Traceback" not in stderr.read()


ANSWERED_WITH_AN_ERROR = [
    pytest.param(b"this line is not JSON", None, PARSE_ERROR, id="not-json"),
    pytest.param(b"\xff\xfe{", None, PARSE_ERROR, id="not-utf-8"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', None, PARSE_ERROR, id="cut-short"
    ),
    pytest.param(
        _call(2, f'{{"query": {_lists(DEPTH_PAST_PYTHON)}}}'),
        None,
        PARSE_ERROR,
        id="nested-past-pythons-recursion-limit",
    ),
    pytest.param(_call(3, '{"limit": 1' + "0" * 5_000 + "}"), None, PARSE_ERROR, id="5001-digits"),
    pytest.param(
        b'[{"jsonrpc": "2.0", "id": 4, "method": "ping"}]', None, INVALID_REQUEST, id="batch"
    ),
    pytest.param(b"5", None, INVALID_REQUEST, id="a-number"),
    pytest.param(b'{"foo": "boo"}', None, INVALID_REQUEST, id="not-a-message"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": [1]}',
        5,
        INVALID_PARAMS,
        id="params-an-array",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": "six", "method": "tools/list", "params": "x"}',
        "six",
        INVALID_PARAMS,
        id="params-a-string",
    ),
    pytest.param(
        b'{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}', 7, INVALID_REQUEST, id="jsonrpc-1.0"
    ),
    pytest.param(b'{"id": 8, "method": "tools/list"}', 8, INVALID_REQUEST, id="no-jsonrpc"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 9, "method": 5}', 9, INVALID_REQUEST, id="method-not-a-string"
    ),
    pytest.param(
        b'{"jsonrpc": "1.0", "id": 10, "method": "tools/call", "params": [1]}',
        10,
        INVALID_REQUEST,
        id="params-an-array-in-a-bad-envelope",
    ),
    # The SDK reads a request whose id is not a string or an integer as a notification.
    pytest.param(
        b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', None, INVALID_REQUEST, id="id-true"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', None, INVALID_REQUEST, id="id-null"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', None, INVALID_REQUEST, id="id-1.5"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": [11], "method": "tools/call", "params": [1]}',
        None,
        INVALID_REQUEST,
        id="id-an-array",
    ),
]


@pytest.mark.parametrize(("line", "request_id", "error"), ANSWERED_WITH_AN_ERROR)
def test_a_line_the_sdk_cannot_read_is_answered_with_an_error(
    server: RawServer, line: bytes, request_id: object, error: dict[str, object]
) -> None:
    assert server.answers(line) == [{"jsonrpc": "2.0", "id": request_id, "error": error}]


# A JSON value the SDK's parser refuses but the standard library's reads: the tools answer
# it as execute_tool does. (args sent, the same args as Python sees them)
FORWARDED = [
    pytest.param('{"query": "\\ud800"}', {"query": "\ud800"}, id="lone-surrogate-value"),
    pytest.param('{"\\udfff": 1}', {"\udfff": 1}, id="lone-surrogate-key"),
    pytest.param(
        f'{{"query": {_lists(DEPTH_PAST_SDK)}}}',
        {"query": json.loads(_lists(DEPTH_PAST_SDK))},
        id="lists-nested-200-deep",
    ),
    pytest.param(
        f'{{"status": {_objects(900)}}}',
        {"status": json.loads(_objects(900))},
        id="objects-nested-900-deep",
    ),
]


@pytest.mark.parametrize(("arguments", "args"), FORWARDED)
def test_valid_json_the_sdk_cannot_read_reaches_the_tools(
    server: RawServer, arguments: str, args: dict[str, object]
) -> None:
    server.send(_call("forwarded", arguments))
    reply = server.reply()
    structured = reply["result"]["structuredContent"]
    contract = {key: value for key, value in structured.items() if key != "detail"}
    assert contract == execute_tool("search_tickets", args, ALPHA, fixture_records())


def test_a_lone_surrogate_echoed_back_is_written_as_an_escape(server: RawServer) -> None:
    # The SDK's "Method not found" carries the method name; pydantic cannot write the
    # surrogate as UTF-8, so the line goes out with \u escapes, which JSON reads back intact.
    server.send(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "\\udbff"}')
    assert server.reply() == {
        "jsonrpc": "2.0",
        "id": "\ud800",
        "error": {"code": -32601, "message": "Method not found", "data": "\udbff"},
    }


NEVER_ANSWERED = [
    pytest.param(b"", b"", id="blank"),
    pytest.param(b" \t\r", b"", id="whitespace"),
    pytest.param(
        b'{"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]}',
        b"ticket-tools: WARNING dropped an invalid JSON-RPC notification\n",
        id="invalid-notification",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 12, "result": 5}',
        b"ticket-tools: WARNING dropped an invalid JSON-RPC response\n",
        id="invalid-result",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 13, "error": "x"}',
        b"ticket-tools: WARNING dropped an invalid JSON-RPC response\n",
        id="invalid-error",
    ),
]


@pytest.mark.parametrize(("line", "logged"), NEVER_ANSWERED)
def test_what_json_rpc_never_answers_is_logged(
    server: RawServer, stderr: BinaryIO, line: bytes, logged: bytes
) -> None:
    stderr.seek(0, 2)
    start = stderr.tell()
    assert server.answers(line) == []
    stderr.seek(start)
    assert stderr.read() == logged


def test_the_server_still_answers_right_after_every_bad_line(server: RawServer) -> None:
    lines = [cast("bytes", param.values[0]) for param in ANSWERED_WITH_AN_ERROR + NEVER_ANSWERED]
    for line in lines[:-1]:
        server.send(line)
    errors = server.answers(lines[-1])
    assert [error["error"]["code"] for error in errors] == [
        cast("dict[str, int]", param.values[2])["code"] for param in ANSWERED_WITH_AN_ERROR
    ]
    reply = server.request(
        "tools/call", {"name": "get_ticket", "arguments": {"ticket_id": "TKT-101"}}, 14
    )
    assert reply == {
        "jsonrpc": "2.0",
        "id": 14,
        "result": {
            "content": [{"type": "text", "text": json.dumps({"ok": True, "ticket": T101})}],
            "structuredContent": {"ok": True, "ticket": T101},
            "isError": False,
        },
    }


# --- read_line and encode in-process: each rule, by name.


def _error(request_id: types.RequestId | None, error: dict[str, object]) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData.model_validate(error)
    )


@pytest.mark.parametrize(("line", "request_id", "error"), ANSWERED_WITH_AN_ERROR)
def test_read_line_answers(line: bytes, request_id: object, error: dict[str, object]) -> None:
    request = cast("types.RequestId | None", request_id)
    assert read_line(line.decode("utf-8", errors="replace")) == _error(request, error)


@pytest.mark.parametrize(("line", "logged"), NEVER_ANSWERED)
def test_read_line_drops(line: bytes, logged: bytes, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ticket_tools.serve.stdio"):
        assert read_line(line.decode()) is None
    assert [f"ticket-tools: WARNING {r.getMessage()}\n".encode() for r in caplog.records] == (
        [logged] if logged else []
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param(
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
            types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/list"),
            id="request",
        ),
        pytest.param(
            '{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
            types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
            id="notification",
        ),
        pytest.param(
            '{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"q": "\\ud800"}}',
            types.JSONRPCRequest(jsonrpc="2.0", id=2, method="ping", params={"q": "\ud800"}),
            id="lone-surrogate",
        ),
    ],
)
def test_read_line_passes_a_message_on(line: str, message: types.JSONRPCMessage) -> None:
    got = read_line(line)
    assert isinstance(got, SessionMessage)
    assert got.message == message


@pytest.mark.parametrize(
    ("message", "line"),
    [
        pytest.param(
            types.JSONRPCResponse(jsonrpc="2.0", id=1, result={"title": "Échec"}),
            '{"jsonrpc":"2.0","id":1,"result":{"title":"Échec"}}',
            id="as-the-sdk-writes-it",
        ),
        pytest.param(
            types.JSONRPCNotification(jsonrpc="2.0", method="x", params={"t": "\ud800é"}),
            '{"jsonrpc": "2.0", "method": "x", "params": {"t": "\\ud800\\u00e9"}}',
            id="lone-surrogate-escaped",
        ),
    ],
)
def test_encode(message: types.JSONRPCMessage, line: str) -> None:
    assert encode(message) == line
    assert json.loads(line) == message.model_dump(mode="json", by_alias=True, exclude_unset=True)


def test_transport_in_process_answers_refused_lines_and_every_request_before_eof() -> None:
    # In-process too, so that mutation testing reaches the reader, the relay and the writer.
    call = _call(9, '{"ticket_id": "TKT-101"}', name="get_ticket")
    lines = [b"hello", b"", b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', b"[]"]
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.write(stdin_write, b"\n".join([*lines, call]) + b"\n")
    os.close(stdin_write)
    server = build_server(ALPHA, fixture_records())

    async def run() -> None:
        async with stdio_transport(stdin_read, stdout_write) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(run)
        os.close(stdout_write)
        with os.fdopen(stdout_read, "rb") as out:
            written = out.read().decode().splitlines()
    finally:
        os.close(stdin_read)
    text = json.dumps({"ok": True, "ticket": T101})
    answer = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"ok": True, "ticket": T101},
    }
    assert written[:2] == [
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}',
    ]
    assert [json.loads(line) for line in written[2:]] == [
        {"jsonrpc": "2.0", "id": 9, "result": {**answer, "isError": False}}
    ]


def test_the_relay_settles_a_request_for_each_answer_only() -> None:
    # A notification from the server is passed on and answers nothing.
    unanswered = stdio._Unanswered()
    for request_id in (1, 2):
        unanswered.track(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))
    sent: list[SessionMessage] = []
    messages = [
        SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/x")),
        SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={})),
    ]

    async def run() -> None:
        to_relay, from_server = anyio.create_memory_object_stream[SessionMessage](2)
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage](2)
        for message in messages:
            await to_relay.send(message)
        to_relay.close()
        await stdio._relay(from_server, to_client, unanswered)
        async with client_reads:
            sent.extend([item async for item in client_reads])

    anyio.run(run)
    assert (sent, unanswered.count) == (messages, 1)
