"""What a tool call pays for spans: off (the default), and on (to an in-memory exporter).

In-process, no server: `ToolCalls.call` of `get_ticket` on the fixture records, with the
observer `serve http` builds (serve/http.py: audit and metrics left out, they are the same
either way) given `spans=None` (off) or a `CallSpans` behind a BatchSpanProcessor (on).
Rounds interleave the variants; each figure is the median over rounds of microseconds per
call. A whole call's figure is noisy (its store call goes through a worker thread), so the
observer alone is timed too, in nanoseconds per call: the cost spans add, and nothing else.

    PYTHONPATH=src:. python benchmarks/bench_spans.py [calls per round] [rounds]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ticket_tools import fixture_records
from ticket_tools.execute import Context
from ticket_tools.outcome import Outcome
from ticket_tools.serve import spans
from ticket_tools.serve.server import CallObserver, RequestRef, ToolCalls


class _Ctx:
    def __init__(self) -> None:
        self.request_id = 1
        self.protocol_version = "2026-07-28"
        self.meta = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
        self.request = None


def _observer(spans_observer: CallObserver | None) -> CallObserver:
    """The shape of serve/http.py's observer, the audit and metrics calls left out."""

    def observe(ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> None:
        if spans_observer is not None:
            spans_observer(ctx, name, outcome, seconds)

    return observe


async def _per_call(tool_calls: ToolCalls, calls: int) -> float:
    ctx = _Ctx()
    started = time.perf_counter()
    for _ in range(calls):
        await tool_calls.call(ctx, "get_ticket", {"ticket_id": "TKT-104"})
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    """Print microseconds per call: no observer, spans off, spans on."""
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    context: Context = {"tenant": "alpha", "can_read_tickets": True}
    records = fixture_records()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    variants: dict[str, Callable[[], ToolCalls]] = {
        "no observer": lambda: ToolCalls(context, records),
        "spans off": lambda: ToolCalls(context, records, observe=_observer(None)),
        "spans on": lambda: ToolCalls(
            context, records, observe=_observer(spans.CallSpans(provider).observe)
        ),
    }
    figures: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, make in variants.items():
            figures[name].append(asyncio.run(_per_call(make(), calls)))
    alone: dict[str, list[float]] = {"spans off": [], "spans on": []}
    ctx, outcome = _Ctx(), Outcome({"ok": True, "ticket": {}})
    observers = {
        "spans off": _observer(None),
        "spans on": _observer(spans.CallSpans(provider).observe),
    }
    for _ in range(rounds):
        for name, observe in observers.items():
            started = time.perf_counter()
            for _ in range(calls):
                observe(ctx, "get_ticket", outcome, 0.001)
            alone[name].append((time.perf_counter() - started) / calls * 1e9)
    provider.shutdown()
    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average: {load.read().strip()}")
    base = statistics.median(figures["no observer"])
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"{name:12} {median:8.2f} us/call  ({median - base:+.2f} us)")
    for name, values in alone.items():
        print(f"observer alone, {name:9} {statistics.median(values):8.0f} ns/call")


if __name__ == "__main__":
    main()
