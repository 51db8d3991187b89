"""MCP over stdin and stdout: one JSON-RPC message a line, and every request answered.

The `mcp` SDK's own `stdio_server()` parses each line with pydantic's JSON
parser and, when that fails, hands the server an exception the server only logs
at debug level: the client never hears back and waits for its own timeout. No
option changes that (`Server.run` takes none, and the dispatcher's observer gets
the exception, not the line and its id), so this transport replaces the SDK's;
the server itself, `Server.run`, is still the SDK's.

Each line goes first through the SDK's own parser, so whatever the SDK accepts
reaches the server exactly as before. What it refuses is read again with the
standard library's parser:
- valid JSON the SDK's parser alone refuses (a lone surrogate escape such as
  `"\\ud800"`, nesting past its limit of about 200) reaches the server like any
  other message, so the tools answer it as `execute_tool` answers those values;
- a line that is not JSON, or nests past Python's recursion limit, is answered
  -32700 "Parse error" with id null (its id cannot be read);
- a JSON value that is not a JSON-RPC message is answered -32600 "Invalid
  Request", with its id when the id is a valid one, else null; a request whose
  envelope is valid but whose `params` is not an object is answered -32602;
- an invalid notification (no `id`) or response (no `method`) is never answered,
  as JSON-RPC 2.0 requires, and is logged to stderr.
Blank lines are skipped. No error written here echoes what the client sent but its id.
A line longer than MAX_LINE_BYTES is answered -32600 with id null as soon as it passes
the limit, and its rest is skipped.

At the end of input, every request already read is answered before the server's read
stream ends: the SDK's server cancels the requests still running when it does, and
answered them "Connection closed" (a request the client cancelled is not waited for).
stdin and stdout are read and written on daemon threads of their own, so a read that
never returns (a silent client) or a write that never does (a full pipe nobody reads)
cannot hold the process's exit after a signal.

Unlike the SDK's transport, this one does not point file descriptor 1 at stderr
while serving: nothing in this server prints, and its log goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import select
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import NoReturn, TypeVar

import anyio
import mcp_types as types
import pydantic_core
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import ServerMessageMetadata, SessionMessage

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line read, newline not counted: serve http's body limit (the SDK's 4 MiB), for
a tool call of a few hundred bytes. A longer line is answered as soon as it passes the limit
and the rest of it is skipped as it arrives, so the transport holds at most this much of
one line, plus one read (READ_BYTES)."""
READ_BYTES = 64 * 1024  # a pipe's whole buffer

Inbound = SessionMessage | types.JSONRPCError | None
"""What one line becomes: a message for the server, an error to answer, or nothing."""

PARSE_ERROR_MESSAGE = "Parse error"
INVALID_REQUEST_MESSAGE = "Invalid Request"
# The SDK's own wording for -32602, so a client sees one message for one code.
INVALID_PARAMS_MESSAGE = "Invalid request parameters"
LINE_TOO_LONG_MESSAGE = f"Invalid Request: a line may hold at most {MAX_LINE_BYTES} bytes"


def _error(request_id: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _request_id(value: object) -> types.RequestId | None:
    """Return `value` if it is a valid MCP request id (a string or an integer), else None."""
    if type(value) is str or type(value) is int:
        return value
    return None


def _invalid(value: dict[str, object]) -> types.JSONRPCError | None:
    """Answer a JSON object that is not a valid JSON-RPC message, or drop it (None)."""
    method = value.get("method")
    if "method" not in value and ("result" in value or "error" in value):
        logger.warning("dropped an invalid JSON-RPC response")
        return None
    if "id" not in value and type(method) is str:
        logger.warning("dropped an invalid JSON-RPC notification")
        return None
    request_id = _request_id(value.get("id"))
    envelope_ok = value.get("jsonrpc") == "2.0" and type(method) is str and request_id is not None
    if envelope_ok and "params" in value and type(value["params"]) is not dict:
        return _error(request_id, types.INVALID_PARAMS, INVALID_PARAMS_MESSAGE)
    return _error(request_id, types.INVALID_REQUEST, INVALID_REQUEST_MESSAGE)


def _reread(line: str) -> Inbound:
    """Read a line the SDK's parser refused with the standard library's."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        # ValueError: not JSON, or an integer longer than Python converts.
        return _error(None, types.PARSE_ERROR, PARSE_ERROR_MESSAGE)
    if type(value) is not dict:
        return _error(None, types.INVALID_REQUEST, INVALID_REQUEST_MESSAGE)
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except pydantic_core.ValidationError:
        return _invalid(value)
    return _checked(message, value)


def _checked(message: types.JSONRPCMessage, value: dict[str, object]) -> Inbound:
    """Pass `message` on, unless it is a request whose id the SDK read as absent."""
    # The SDK reads {"id": true, "method": ...} (any id that is not a string or
    # an integer, null included) as a notification and would never answer it.
    if isinstance(message, types.JSONRPCNotification) and "id" in value:
        return _error(None, types.INVALID_REQUEST, INVALID_REQUEST_MESSAGE)
    return SessionMessage(message)


def read_line(line: str) -> Inbound:
    """Turn one line from the client into a message for the server, an error, or nothing.

    '{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}' becomes that request;
    'hello' becomes a -32700 error with id null; a blank line becomes None.
    """
    if not line.strip():
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic_core.ValidationError:
        return _reread(line)
    if isinstance(message, types.JSONRPCNotification):
        return _checked(message, pydantic_core.from_json(line))
    return SessionMessage(message)


def encode(message: types.JSONRPCMessage) -> str:
    """Return `message` as one line of JSON (without the newline)."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except pydantic_core.PydanticSerializationError:
        # pydantic writes UTF-8 and refuses a lone surrogate, which only an echo
        # of the client's own id or method name can hold ("Method not found"
        # carries the method). JSON's \uXXXX escape carries it back intact.
        return json.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True))


class _Blocking:
    """A daemon thread making one blocking call at a time for the event loop.

    A read of stdin or a write to stdout may block for ever (a client that stays silent, a
    full pipe nobody reads). On a daemon thread such a call never holds the process's exit
    after a signal, as one on anyio's worker threads would: those are joined at exit.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def close(self) -> None:
        """Let the thread end once its call, if any, returns."""
        self._calls.put(None)

    async def run(self, call: Callable[[], T]) -> T:
        """Return what `call` returns, run on the thread; raise what it raises."""
        loop = asyncio.get_running_loop()
        done = anyio.Event()
        outcome: list[Callable[[], T]] = []

        def job() -> None:
            try:
                value = call()
                outcome.append(lambda: value)
            except Exception as error:  # raised again in the caller's task
                outcome.append(partial(_raise, error))
            finally:
                with suppress(RuntimeError):  # the loop has closed: nobody waits any more
                    loop.call_soon_threadsafe(done.set)

        self._calls.put(job)
        await done.wait()
        return outcome[0]()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            call()


def _raise(error: Exception) -> NoReturn:
    raise error


class Lines:
    """Cut bytes into lines of at most `limit` bytes (newline not counted), as they arrive.

    feed(b'{"a": 1}\\n{"b"') returns [b'{"a": 1}'] and keeps b'{"b"'; with limit 4,
    feed(b"123456") returns [None] (a line past the limit, at once) and the rest of that
    line is skipped up to its newline, so no more than `limit` bytes are ever kept.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()
        self._skipping = False  # within the rest of a line past the limit

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """Return the lines `chunk` completes, None for each one past the limit."""
        lines: list[bytes | None] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            piece = chunk[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
            elif len(self._partial) + len(piece) > self._limit:
                lines.append(None)
            else:
                lines.append(bytes(self._partial + piece))
            self._partial.clear()
        rest = chunk[start:]
        if self._skipping:
            return lines
        if len(self._partial) + len(rest) > self._limit:
            lines.append(None)
            self._partial.clear()
            self._skipping = True
        else:
            self._partial += rest
        return lines

    def end(self) -> list[bytes]:
        """Return the last line, when the input ended without a newline after it."""
        return [bytes(self._partial)] if self._partial else []


class _Unanswered:
    """The requests passed to the server and not answered yet: the end of input waits for them."""

    def __init__(self) -> None:
        self.count = 0
        self._none_left = anyio.Event()

    def track(self, message: types.JSONRPCRequest) -> SessionMessage:
        """Count `message` as unanswered; return it for the server, told to settle it."""
        self.count += 1

        async def unanswered() -> None:
            # The server settled it without an answer: the client cancelled it.
            self.settle()

        return SessionMessage(message, ServerMessageMetadata(on_request_unanswered=unanswered))

    def settle(self) -> None:
        """Count one request as answered."""
        self.count -= 1
        if self.count == 0:
            self._none_left.set()

    async def wait(self) -> None:
        """Return once every request counted so far is answered."""
        while self.count:
            self._none_left = anyio.Event()
            await self._none_left.wait()


async def _read(
    read: Callable[[], Awaitable[bytes]],
    to_server: ObjectSendStream[SessionMessage | Exception],
    to_client: ObjectSendStream[SessionMessage],
    unanswered: _Unanswered,
) -> None:
    lines = Lines(MAX_LINE_BYTES)
    async with to_server, to_client:
        while True:
            try:
                chunk = await read()
            except OSError as error:
                logger.warning("stopped reading stdin: %s", error.strerror)
                chunk = b""
            for line in lines.feed(chunk) if chunk else lines.end():
                if line is None:
                    too_long = _error(None, types.INVALID_REQUEST, LINE_TOO_LONG_MESSAGE)
                    await to_client.send(SessionMessage(too_long))
                    continue
                # Undecodable bytes become U+FFFD, as in the SDK's transport: inside
                # a string they are data, anywhere else the line is not JSON.
                inbound = read_line(line.decode("utf-8", errors="replace"))
                if isinstance(inbound, SessionMessage):
                    message = inbound.message
                    if isinstance(message, types.JSONRPCRequest):
                        inbound = unanswered.track(message)
                    await to_server.send(inbound)
                elif inbound is not None:
                    await to_client.send(SessionMessage(inbound))
            if not chunk:
                # The end of input: the server stops once to_server closes, and would
                # answer the requests still running "Connection closed". So they finish first.
                await unanswered.wait()
                return


async def _relay(
    from_server: ObjectReceiveStream[SessionMessage],
    to_client: ObjectSendStream[SessionMessage],
    unanswered: _Unanswered,
) -> None:
    async with from_server, to_client:
        async for message in from_server:
            if isinstance(message.message, types.JSONRPCResponse | types.JSONRPCError):
                unanswered.settle()
            await to_client.send(message)


async def _write(
    messages: ObjectReceiveStream[SessionMessage],
    write: Callable[[bytes], Awaitable[None]],
    lost: Callable[[OSError], None],
) -> None:
    async with messages:
        async for session_message in messages:
            try:
                await write(f"{encode(session_message.message)}\n".encode())
            except OSError as error:
                lost(error)
                return


def _read_some(fd: int) -> bytes:
    """Return the next bytes of `fd` (b"": its end), waiting even if it is non-blocking."""
    while True:
        try:
            return os.read(fd, READ_BYTES)
        except BlockingIOError:
            # A descriptor the host made non-blocking (O_NONBLOCK is shared with it).
            select.select([fd], [], [])


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, waiting even if it is non-blocking."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


@asynccontextmanager
async def stdio_transport(
    stdin: int = 0, stdout: int = 1
) -> AsyncIterator[
    tuple[ObjectReceiveStream[SessionMessage | Exception], ObjectSendStream[SessionMessage]]
]:
    """Serve JSON-RPC lines from file descriptor `stdin` to `stdout`.

    Yields the (read, write) stream pair `Server.run` takes, as the SDK's
    `stdio_server()` does. At the end of input, every request already read is
    answered, then the server's read stream ends. Raises BrokenPipeError when
    `stdout` can no longer be written (the client is gone); the server is stopped.
    """
    reading, writing = _Blocking("ticket-tools-stdin"), _Blocking("ticket-tools-stdout")
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    to_client, client_reads = anyio.create_memory_object_stream[SessionMessage](0)
    unanswered = _Unanswered()
    lost: list[OSError] = []

    async def read() -> bytes:
        return await reading.run(partial(_read_some, stdin))

    async def write(data: bytes) -> None:
        await writing.run(partial(_write_all, stdout, data))

    try:
        async with anyio.create_task_group() as tg:

            def output_lost(error: OSError) -> None:
                lost.append(error)
                tg.cancel_scope.cancel()

            # The reader answers what it refuses through its own handle on the writer's
            # queue, so the writer ends once both the server (through the relay) and it are.
            tg.start_soon(_read, read, to_server, to_client.clone(), unanswered)
            tg.start_soon(_relay, from_server, to_client, unanswered)
            tg.start_soon(_write, client_reads, write, output_lost)
            yield server_reads, server_writes
    finally:
        reading.close()
        writing.close()
    if lost:
        raise BrokenPipeError(lost[0].errno, lost[0].strerror)
