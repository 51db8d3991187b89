"""The HTTP server's audit log: one JSON line per tool call, who called what and how it ended.

A line holds exactly: time (UTC, ISO 8601), tenant and subject (from the verified token),
tool (a registered name, or null for an unknown one: the name asked for is untrusted text),
code ("ok", a failure code, "unavailable" for a store that did not answer, or
"internal_error"), latency_ms, request_id (the JSON-RPC id), and trace_id (of a valid W3C
`traceparent` in the request's `_meta` or HTTP header, else null: serve/tracing.py).
Never argument values, ticket contents or the token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TextIO

from mcp.server.auth.middleware.auth_context import get_access_token
from starlette.requests import Request

from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Outcome
from ticket_tools.serve.server import RequestRef
from ticket_tools.serve.tokens import TokenRules
from ticket_tools.serve.tracing import call_trace_id

MAX_REQUEST_ID_CHARS = 64  # a JSON-RPC id is the client's choice: keep a line short


class AuditLog:
    """Write one audit line per tool call to `stream`."""

    def __init__(self, stream: TextIO, rules: TokenRules) -> None:
        self._stream = stream
        self._rules = rules
        self._lock = threading.Lock()

    def observe(self, ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> None:
        """Record one call: its outcome, or None when the call failed inside the server."""
        token = get_access_token()
        claims = {} if token is None else token.claims or {}
        if outcome is None:
            code = "internal_error"
        else:
            code = "ok" if outcome.result["ok"] is True else str(outcome.result["code"])
        request_id = ctx.request_id
        if isinstance(request_id, str):
            request_id = request_id[:MAX_REQUEST_ID_CHARS]
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "tenant": claims.get(self._rules.tenant_claim),
            "subject": None if token is None else token.subject,
            "tool": name if REGISTRY.get(name) is not None else None,
            "code": code,
            "latency_ms": round(seconds * 1000, 3),
            "request_id": request_id,
            "trace_id": call_trace_id(getattr(ctx, "meta", None), _headers(ctx)),
        }
        text = json.dumps(line) + "\n"  # ASCII-escaped: one line whatever the claims hold
        with self._lock:
            self._stream.write(text)
            self._stream.flush()


def _headers(ctx: RequestRef) -> Mapping[str, str] | None:
    """Return the HTTP headers of the call's request (None over stdio)."""
    request = getattr(ctx, "request", None)
    return request.headers if isinstance(request, Request) else None
