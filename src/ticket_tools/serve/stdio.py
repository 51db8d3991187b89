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

Unlike the SDK's transport, this one does not point file descriptor 1 at stderr
while serving: nothing in this server prints, and its log goes to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pydantic_core
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

Inbound = SessionMessage | types.JSONRPCError | None
"""What one line becomes: a message for the server, an error to answer, or nothing."""

PARSE_ERROR_MESSAGE = "Parse error"
INVALID_REQUEST_MESSAGE = "Invalid Request"
# The SDK's own wording for -32602, so a client sees one message for one code.
INVALID_PARAMS_MESSAGE = "Invalid request parameters"


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


async def _read(
    lines: AsyncIterable[bytes],
    to_server: ObjectSendStream[SessionMessage | Exception],
    to_client: ObjectSendStream[SessionMessage],
) -> None:
    async with to_server, to_client:
        async for line in lines:
            # Undecodable bytes become U+FFFD, as in the SDK's transport: inside
            # a string they are data, anywhere else the line is not JSON.
            inbound = read_line(line.decode("utf-8", errors="replace"))
            if isinstance(inbound, SessionMessage):
                await to_server.send(inbound)
            elif inbound is not None:
                await to_client.send(SessionMessage(inbound))


async def _write(
    messages: ObjectReceiveStream[SessionMessage], out: anyio.AsyncFile[bytes]
) -> None:
    async with messages:
        async for session_message in messages:
            await out.write(f"{encode(session_message.message)}\n".encode())
            await out.flush()


@asynccontextmanager
async def stdio_transport() -> AsyncIterator[
    tuple[ObjectReceiveStream[SessionMessage | Exception], ObjectSendStream[SessionMessage]]
]:
    """Serve JSON-RPC lines from the process's stdin to its stdout.

    Yields the (read, write) stream pair `Server.run` takes, as the SDK's
    `stdio_server()` does; ends when the client closes stdin and the server is done.
    """
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, to_client = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        # The reader answers what it refuses through its own handle on the
        # writer's queue, so the writer ends once both the server and it are done.
        tg.start_soon(_read, anyio.wrap_file(sys.stdin.buffer), to_server, server_writes.clone())
        tg.start_soon(_write, to_client, anyio.wrap_file(sys.stdout.buffer))
        yield server_reads, server_writes
