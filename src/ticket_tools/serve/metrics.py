"""The HTTP server's Prometheus metrics: one registry per server, labels from small fixed sets.

Needs the `mcp` extra (prometheus-client comes with it). Every label value comes from a
fixed set known at start: a tool is a registered name or "unknown"; a code is "ok", a
contract code, "unavailable" or "internal_error"; a store error's reason, a refusal's
limit likewise. No tenant, subject or argument is ever a label: one series per tenant
would grow with the customers (10,000 tenants x tools x codes x buckets), and a label
value is shown to whoever reads the metrics. Per-tenant figures come from the audit log,
which names the tenant of every call (docs/http.md shows how).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.exposition import choose_encoder
from starlette.requests import Request
from starlette.responses import Response

from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Code, Outcome
from ticket_tools.serve.server import RequestRef
from ticket_tools.stores.failure import FailureReason

UNKNOWN_TOOL = "unknown"  # the one `tool` value that is not a registered name
ResultCode = Literal[Code, "ok", "unavailable", "internal_error"]
StoreErrorReason = Literal[FailureReason, "timeout"]
Limit = Literal[
    "tenant_rate",
    "subject_rate",
    "tenant_housekeeping_rate",
    "subject_housekeeping_rate",
    "draining",
]
"""Why a request was refused before any MCP work: its tenant's or subject's rate, or a drain."""
# Tool calls take about a millisecond; a store stall lasts up to the deadline (2 s).
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The server's counters, histogram and gauges, in a registry of their own."""

    def __init__(self) -> None:
        # Not prometheus-client's global registry: each server (and each test) its own.
        self.registry = CollectorRegistry()
        registry = self.registry
        ProcessCollector(registry=registry)  # CPU, memory, open file descriptors
        self.calls = Counter(
            "ticket_tools_tool_calls",
            "Tool calls answered, by tool and result code.",
            ["tool", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "ticket_tools_tool_call_duration_seconds",
            "Time from a tool call's arrival in the server to its result, by tool.",
            ["tool"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            "ticket_tools_store_errors",
            "Store calls that failed, by reason (timeout: past the deadline).",
            ["reason"],
            registry=registry,
        )
        self.refusals = Counter(
            "ticket_tools_refusals",
            "Requests refused before any MCP work (HTTP 429 or 503), by limit.",
            ["limit"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "ticket_tools_store_calls_in_flight",
            "Tool calls waiting for the store now (for a worker, or on one).",
            registry=registry,
        )
        self.store_busy = Gauge(
            "ticket_tools_store_workers_busy",
            "Store worker threads busy now, calls past their deadline included.",
            registry=registry,
        )
        self.sessions = Gauge(
            "ticket_tools_sessions_open",
            "MCP sessions open now (0 with --stateless).",
            registry=registry,
        )
        self.titles_cleaned = Counter(
            "ticket_tools_titles_cleaned",
            "Titles of --records whose invisible characters were removed when loaded.",
            registry=registry,
        )
        self.ready = Gauge(
            "ticket_tools_ready",
            "1 while /readyz answers 200: the store answered its probe and no drain is on.",
            registry=registry,
        )
        self.staleness = Gauge(
            "ticket_tools_store_staleness_seconds",
            "How far the store was behind its primary at the last readiness probe that "
            "answered: 0 caught up or not a replica, +Inf unknown, NaN before the first.",
            registry=registry,
        )
        # Every series exists from the start, at 0: a rate() over a new label works at once.
        tools = [tool.name for tool in REGISTRY]
        for tool in tools:
            for code in get_args(ResultCode):
                if code != "unknown_tool":
                    self.calls.labels(tool=tool, code=code)
        self.calls.labels(tool=UNKNOWN_TOOL, code="unknown_tool")
        for tool in tools:
            self.duration.labels(tool=tool)
        for reason in get_args(StoreErrorReason):
            self.store_errors.labels(reason=reason)
        for limit in get_args(Limit):
            self.refusals.labels(limit=limit)

    def observe(self, ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> None:
        """Count one tool call: its tool, its code, and how long it took."""
        tool = name if REGISTRY.get(name) is not None else UNKNOWN_TOOL
        if outcome is None:
            code = "internal_error"
        else:
            code = "ok" if outcome.result["ok"] is True else str(outcome.result["code"])
        self.calls.labels(tool=tool, code=code).inc()
        if tool != UNKNOWN_TOOL:
            self.duration.labels(tool=tool).observe(seconds)

    def store_error(self, reason: str) -> None:
        """Count one failed store call."""
        self.store_errors.labels(reason=reason).inc()

    def refused(self, limit: Limit) -> None:
        """Count one request refused by `limit`."""
        self.refusals.labels(limit=limit).inc()

    def watch(
        self,
        *,
        in_flight: Callable[[], float],
        busy: Callable[[], float],
        sessions: Callable[[], float],
        ready: Callable[[], bool],
        staleness: Callable[[], float],
    ) -> None:
        """Read the gauges from these functions whenever the metrics are scraped."""
        self.in_flight.set_function(in_flight)
        self.store_busy.set_function(busy)
        self.sessions.set_function(sessions)
        self.ready.set_function(lambda: 1.0 if ready() else 0.0)
        self.staleness.set_function(staleness)

    async def endpoint(self, request: Request) -> Response:
        """Serve the metrics in the format the scraper asks for (Prometheus text by default)."""
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(self.registry), headers={"Content-Type": content_type})
