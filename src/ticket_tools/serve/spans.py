"""One OpenTelemetry span per tool call, by the MCP semantic conventions; off by default.

Needs the `otel` extra (in a clone, `pip install -e '.[mcp,otel]'`) and only when the standard
variables ask for spans; nothing imports `opentelemetry.sdk` otherwise (`wanted` reads the
environment alone). Spans are on when, `OTEL_SDK_DISABLED` not being "true":
- `OTEL_TRACES_EXPORTER` names `otlp` and/or `console` (comma-separated; `none`: off), or
- it is unset and `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is.
OTLP goes over http/protobuf, configured by the exporter's own `OTEL_EXPORTER_OTLP_*`
variables; `OTEL_SERVICE_NAME` names the service (default "ticket-tools").

A call's span (https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/), kind SERVER:

    name        "tools/call get_ticket" ("tools/call" for a name not registered)
    attributes  mcp.method.name "tools/call", gen_ai.operation.name "execute_tool",
                gen_ai.tool.name (registered names only), jsonrpc.request.id (first 64
                characters, absent for a null id), mcp.protocol.version, network.transport
                "tcp", network.protocol.name "http"; on failure error.type: "tool_error" for
                an isError result (the status description is its code, e.g. "not_found"),
                the JSON-RPC code ("-32602", "-32603") for a protocol error, which
                rpc.response.status_code repeats.
    parent      the call's valid W3C `traceparent` (`_meta`, else the HTTP header; with its
                `tracestate`), else none: the span starts a trace.

Never an argument, a title, a token or a name the registry does not know. The spans use a
provider of their own, not the global one, so the SDK's own middleware (which traces to the
global provider) stays a no-op and a call has exactly one span.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Outcome
from ticket_tools.serve.server import INTERNAL_ERROR_MESSAGE, RequestRef
from ticket_tools.serve.tracing import trace_id

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

EXPORTERS = ("otlp", "console")
OTLP_PROTOCOL = "http/protobuf"
MAX_REQUEST_ID_CHARS = 64  # as the audit line: a JSON-RPC id is the client's choice
INSTALL_HINT = "in a clone of ticket-tools, pip install -e '.[mcp,otel]'"
_PROPAGATED = ("traceparent", "tracestate")


class SpansError(Exception):
    """The OTEL_* variables ask for what this server cannot do: a one-line reason."""


def wanted(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Return the span exporters the OTEL_* variables ask for (none: spans are off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    value = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not value:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return ("otlp",) if any(environ.get(name, "").strip() for name in endpoints) else ()
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",")))
    if names == ("none",):
        return ()
    for name in names:
        if name not in EXPORTERS:
            raise SpansError(f"OTEL_TRACES_EXPORTER names otlp, console or none; not {name!r}")
    if "otlp" in names:
        protocol = environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        )
        if protocol.strip() not in ("", OTLP_PROTOCOL):
            raise SpansError(f"OTLP spans go over {OTLP_PROTOCOL} only")
    return names


def exporter(name: str) -> SpanExporter:
    """Return the span exporter `name` (from `EXPORTERS`), configured by its OTEL_* variables."""
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
    except ImportError:
        raise SpansError(f"OTLP spans need the OTLP exporter: {INSTALL_HINT}") from None
    return OTLPSpanExporter()


def start(environ: Mapping[str, str]) -> CallSpans | None:
    """Return the span observer the OTEL_* variables ask for, or None (spans off)."""
    names = wanted(environ)
    if not names:
        return None
    try:
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError:
        raise SpansError(f"OTEL_* variables ask for spans: {INSTALL_HINT}") from None
    attributes: dict[str, Any] = {"service.version": version("ticket-tools")}
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "ticket-tools"
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(exporter(name)))
    return CallSpans(provider)


class CallSpans:
    """Record one span per tool call on `provider`: the observer `ToolCalls` is given."""

    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.context import Context as Root  # noqa: PLC0415
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: PLC0415

        self.provider = provider
        self._tracer = provider.get_tracer("ticket-tools", version("ticket-tools"))
        self._trace = trace
        self._root = Root
        self._propagator = TraceContextTextMapPropagator()

    def observe(self, ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> None:
        """Record the span of one call that took `seconds` and ended now."""
        ended = time.time_ns()
        known = REGISTRY.get(name) is not None
        attributes: dict[str, str] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "network.transport": "tcp",
            "network.protocol.name": "http",
        }
        if known:
            attributes["gen_ai.tool.name"] = name
        request_id = ctx.request_id
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)[:MAX_REQUEST_ID_CHARS]
        protocol = getattr(ctx, "protocol_version", None)
        if isinstance(protocol, str):
            attributes["mcp.protocol.version"] = protocol
        status = self._trace.StatusCode.UNSET
        description = None
        if outcome is None:
            attributes["error.type"] = attributes["rpc.response.status_code"] = "-32603"
            status, description = self._trace.StatusCode.ERROR, INTERNAL_ERROR_MESSAGE
        elif outcome.result["ok"] is not True:
            code = str(outcome.result["code"])
            status = self._trace.StatusCode.ERROR
            if code == "unknown_tool":
                attributes["error.type"] = attributes["rpc.response.status_code"] = "-32602"
                description = f"{code}: {outcome.detail}"
            else:
                attributes["error.type"], description = "tool_error", code
        span = self._tracer.start_span(
            f"tools/call {name}" if known else "tools/call",
            context=self._parent(ctx),
            kind=self._trace.SpanKind.SERVER,
            attributes=attributes,
            start_time=ended - int(seconds * 1e9),
        )
        if status is not self._trace.StatusCode.UNSET:
            span.set_status(status, description)
        span.end(end_time=ended)

    def _parent(self, ctx: RequestRef) -> Context:
        """Return the context the call's traceparent names, or an empty one (a new trace)."""
        meta = getattr(ctx, "meta", None)
        carrier: Mapping[str, Any] | None = None
        if meta is not None and "traceparent" in meta:
            carrier = meta
        else:
            request = getattr(ctx, "request", None)
            headers = getattr(request, "headers", None)
            if headers is not None and "traceparent" in headers:
                carrier = headers
        if carrier is None or trace_id(carrier["traceparent"]) is None:
            return self._root()
        fields = {key: carrier[key] for key in _PROPAGATED if isinstance(carrier.get(key), str)}
        return self._propagator.extract(fields)

    def shutdown(self) -> None:
        """Send the spans still buffered, then stop the exporters."""
        self.provider.shutdown()
