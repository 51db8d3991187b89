"""W3C trace context of a call: the `traceparent` a client sent, checked to the letter.

A 2026-07-28 request may carry it in `_meta` (SEP-414), any request in the HTTP
`traceparent` header; `_meta` wins, as the MCP specification asks. A value that breaks the
W3C Trace Context rules (https://www.w3.org/TR/trace-context/#traceparent-header) is
ignored, as the recommendation says a receiver must:

    00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01  -> trace id 4bf92f35...4736
    00-00000000000000000000000000000000-00f067aa0ba902b7-01  -> None (an all-zero trace id)
    00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01  -> None (upper-case hex)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_PARENT = "0" * 16
MAX_TRACEPARENT_CHARS = 512  # a later version may append fields; a longer value is not one


def trace_id(value: object) -> str | None:
    """Return the trace id of a valid `traceparent` value, or None."""
    if type(value) is not str or len(value) > MAX_TRACEPARENT_CHARS:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace, parent, _flags, rest = match.groups()
    if version == "ff" or trace == _ZERO_TRACE or parent == _ZERO_PARENT:
        return None
    if version == "00" and rest is not None:
        return None  # version 00 has exactly four fields
    return trace


def call_trace_id(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> str | None:
    """Return the trace id of a call: from its `_meta`, else from its HTTP header."""
    if meta is not None and "traceparent" in meta:
        return trace_id(meta["traceparent"])
    if headers is not None:
        return trace_id(headers.get("traceparent"))
    return None
