"""The audit log's line, in-process: the fields, and what happens outside a verified request."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any, cast

from mcp.server import ServerRequestContext

from testkit.tokens import AUDIENCE, ISSUER
from ticket_tools.outcome import failure, success
from ticket_tools.serve.audit import MAX_REQUEST_ID_CHARS, AuditLog
from ticket_tools.serve.http import request_context
from ticket_tools.serve.tokens import TokenRules

RULES = TokenRules(ISSUER, AUDIENCE)


def _request(request_id: object) -> ServerRequestContext[Any]:
    # The log reads only the JSON-RPC id from the request context.
    return cast("ServerRequestContext[Any]", SimpleNamespace(request_id=request_id))


def test_outside_a_verified_request_nobody_is_named_and_nothing_is_readable() -> None:
    stream = io.StringIO()
    log = AuditLog(stream, RULES)
    log.observe(_request("r" * 500), "search_tickets", success(tickets=[]), 0.0012345)
    log.observe(_request(3), "list_tickets", failure("unknown_tool", "x"), 0.5)
    log.observe(_request(None), "get_ticket", None, 0)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [{k: v for k, v in line.items() if k != "time"} for line in lines] == [
        {
            "tenant": None,
            "subject": None,
            "tool": "search_tickets",
            "code": "ok",
            "latency_ms": 1.234,
            "request_id": "r" * MAX_REQUEST_ID_CHARS,
            "trace_id": None,
        },
        {
            "tenant": None,
            "subject": None,
            "tool": None,
            "code": "unknown_tool",
            "latency_ms": 500.0,
            "request_id": 3,
            "trace_id": None,
        },
        {
            "tenant": None,
            "subject": None,
            "tool": "get_ticket",
            "code": "internal_error",
            "latency_ms": 0,
            "request_id": None,
            "trace_id": None,
        },
    ]
    assert request_context(RULES) == {"tenant": None, "can_read_tickets": False}
