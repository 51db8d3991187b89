"""Round trip of one tool call through `ticket-tools serve` over stdio, against the core alone.

Each call is timed from the client's `call_tool` to its parsed result, through a real
server subprocess and the official SDK client; the same call through `execute_tool`
in-process gives the ratio, which is what the MCP layer (JSON-RPC, pipes, two event
loops, pydantic models) costs per call.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from ticket_tools import execute_tool, fixture_records
from ticket_tools.cli.acceptance import ALPHA

CALLS_PER_ROW = 500
WARMUP_CALLS = 20
CASES: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("get_ticket TKT-104", "get_ticket", {"ticket_id": "TKT-104"}),
    ("search_tickets {}", "search_tickets", {}),
    ("search_tickets limit 11 (error)", "search_tickets", {"limit": 11}),
)


def _median_p90_us(samples: list[float]) -> tuple[float, float]:
    deciles = statistics.quantiles(samples, n=10)
    return statistics.median(samples) * 1e6, deciles[8] * 1e6


async def _mcp_samples() -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"],
        env=dict(os.environ),
    )
    samples: dict[str, list[float]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        for label, name, args in CASES:
            for _ in range(WARMUP_CALLS):
                await session.call_tool(name, args)
            timings: list[float] = []
            for _ in range(CALLS_PER_ROW):
                start = time.perf_counter()
                await session.call_tool(name, args)
                timings.append(time.perf_counter() - start)
            samples[label] = timings
    return samples


def _in_process_samples(name: str, args: dict[str, object]) -> list[float]:
    records = fixture_records()
    timings: list[float] = []
    for _ in range(CALLS_PER_ROW):
        start = time.perf_counter()
        execute_tool(name, args, ALPHA, records)
        timings.append(time.perf_counter() - start)
    return timings


def main() -> None:
    """Print the median and p90 per call over MCP stdio and in-process, and their ratio."""
    mcp = anyio.run(_mcp_samples)
    print(
        f"{CALLS_PER_ROW} calls per row, alpha session, fixture store; microseconds per call\n"
        f"{'call':<32} {'MCP median':>10} {'MCP p90':>9} {'core median':>11} "
        f"{'core p90':>9} {'ratio':>7}"
    )
    for label, name, args in CASES:
        mcp_median, mcp_p90 = _median_p90_us(mcp[label])
        core_median, core_p90 = _median_p90_us(_in_process_samples(name, args))
        print(
            f"{label:<32} {mcp_median:>10.0f} {mcp_p90:>9.0f} {core_median:>11.1f} "
            f"{core_p90:>9.1f} {mcp_median / core_median:>6.0f}x"
        )


if __name__ == "__main__":
    main()
