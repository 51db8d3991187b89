"""The direct path: a 2026-07-28 `tools/call` answered without the SDK's per-POST machinery.

Needs the `mcp` extra. A 2026-07-28 request stands alone (no session, its protocol version
and client capabilities in `_meta`), so answering it needs no transport, dispatcher or
runner: `DirectPath` sits in front of the SDK's endpoint, after the token check, the
protocol gate and the rate limits, and answers a well-formed `tools/call` itself through
the same `ToolCalls` (checks, store workers, audit line, metrics) the SDK's handler uses.
The request is checked with the SDK's own inbound ladder (`classify_inbound_request`,
the routing-header and `Mcp-Param-*` checks) and its own parse of the params and their
`_meta` envelope (`validate_client_request`, which the SDK's runner makes before any
handler), and the answer is the one the SDK writes, byte for byte
(tests/serve/test_http_direct.py sends both paths the same requests). The body comes whole
in one message, at most MAX_BODY_BYTES: `BodyLimit` (serve/bodies.py) sits in front.

Anything else goes to the SDK unchanged, its body replayed: another method, a session,
another protocol version, a body, `_meta` or header the SDK refuses, extra parameters.
Those answers are the SDK's by construction. `TICKET_TOOLS_HTTP_PATH=sdk` turns the path off
(the comparison test and the benchmark use it).
"""

from __future__ import annotations

import json
import os
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types.methods import validate_client_request
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ticket_tools.declarations import export_declarations
from ticket_tools.serve.bodies import replay
from ticket_tools.serve.server import ToolCalls

VERSION = "2026-07-28"
"""The one revision answered here: its requests carry everything in `_meta`."""
SWITCH = "TICKET_TOOLS_HTTP_PATH"
"""Set to "sdk" to send every request to the SDK (for the comparison test and benchmark)."""
_VERSION_HEADER = b"mcp-protocol-version"
_CALL_KEYS = frozenset({"_meta", "name", "arguments"})
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


def direct_enabled() -> bool:
    """Say whether the direct path is on (the default) for this process."""
    return os.environ.get(SWITCH, "direct") != "sdk"


class _Request:
    """What an observer sees of a request answered here: as the SDK's context shows it."""

    __slots__ = ("meta", "protocol_version", "request", "request_id")

    def __init__(self, request_id: types.RequestId, meta: dict[str, Any], request: Request) -> None:
        self.request_id = request_id
        self.meta = meta
        self.request = request
        self.protocol_version = VERSION


class DirectPath:
    """ASGI middleware answering a well-formed 2026-07-28 `tools/call` at `path` itself."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str,
        server: Server,
        tool_calls: ToolCalls,
        security: TransportSecuritySettings,
    ) -> None:
        self.app = app
        self._path = path
        self._tool_calls = tool_calls
        self._security = TransportSecurityMiddleware(security)
        self._stamp = server.server_info_stamp
        self._schemas = {
            str(tool["name"]): tool["inputSchema"]
            for tool in export_declarations("mcp", tool_calls.registry)
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != self._path
            or scope["method"] != "POST"
            or next((v for k, v in scope["headers"] if k == _VERSION_HEADER), None)
            != VERSION.encode()
        ):
            await self.app(scope, receive, send)
            return
        # BodyLimit, in front, hands on the whole body as one message (at most MAX_BODY_BYTES):
        # anything else is the SDK's to read on.
        message = await receive()
        answer = None
        if message["type"] == "http.request" and not message.get("more_body", False):
            answer = await self._answer(scope, message.get("body", b""))
        if answer is None:
            await self.app(scope, replay(message, receive), send)
            return
        status, payload = answer
        headers = [
            (b"content-length", str(len(payload)).encode()),
            (b"content-type", b"application/json"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, scope: Scope, body: bytes) -> tuple[int, bytes] | None:
        """Return the status and body of the answer, or None: the SDK answers this one."""
        request = Request(scope)
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        if not check_accept_headers(request)[0]:
            return None
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or decoded.keys() != _ENVELOPE_KEYS:
            return None
        request_id, params = decoded["id"], decoded["params"]
        if (
            decoded["jsonrpc"] != "2.0"
            or decoded["method"] != "tools/call"
            or not (type(request_id) is int or type(request_id) is str)
            or not isinstance(params, dict)
            or not params.keys() <= _CALL_KEYS
            or type(params.get("name")) is not str
            or type(params.get("arguments", {})) is not dict
        ):
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        headers = dict(request.headers)
        if isinstance(classify_inbound_request(decoded, headers=headers), InboundLadderRejection):
            return None
        try:
            # The parse of the params and their `_meta` envelope that the SDK's runner makes
            # before any handler: both paths share it, so neither admits what the other refuses.
            validate_client_request("tools/call", VERSION, params)
        except ValidationError:
            return None
        name: str = params["name"]
        arguments: dict[str, Any] = params.get("arguments", {})
        schema = self._schemas.get(name)
        if (
            schema is not None
            and (arguments or any(h.startswith(_PARAM_PREFIX) for h in headers))
            and validate_mcp_param_headers(schema, arguments, headers) is not None
        ):
            return None
        try:
            result = await self._tool_calls.call(
                _Request(request_id, params["_meta"], request), name, arguments
            )
        except MCPError as error:
            data = modern_error_data(error)
            status = ERROR_CODE_HTTP_STATUS.get(data.code, 200)
            reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=data)
            dumped = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
            return status, json.dumps(dumped, separators=(",", ":")).encode()
        text = result.content[0]
        # The shape the SDK's runner gives a 2026-07-28 tools/call result, keys in its order.
        wire = {
            "content": [{"text": text.text, "type": "text"}],  # type: ignore[union-attr]
            "isError": result.is_error,
            "resultType": "complete",
            "structuredContent": result.structured_content,
            "_meta": {types.SERVER_INFO_META_KEY: self._stamp},
        }
        reply_body = {"jsonrpc": "2.0", "id": request_id, "result": wire}
        return 200, json.dumps(reply_body, separators=(",", ":")).encode()
