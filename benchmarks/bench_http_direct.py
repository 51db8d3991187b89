"""Server CPU per 2026-07-28 tools/call: the direct path, the SDK's path, and the floor.

Three servers as subprocesses on 127.0.0.1, the same token verifier and store: `serve http
--stateless` (the direct path, the default), the same with `TICKET_TOOLS_HTTP_PATH=sdk`
(the SDK's single-exchange transport and runner, what clients got before), and the floor
(benchmarks/http_floor.py: bare Starlette + uvicorn standard + the JWT check +
`execute_tool`). The same plain HTTP/1.1 clients as bench_http.py send the same request
bytes (`search_tickets {}` with its `_meta` and routing headers, no session). Rounds
interleave the servers (the order rotates every round); a ratio is the median of the
per-round ratios of server CPU per call; p99 is over every call of every round at 32
clients. The target of issue 25: direct CPU <= 2x the floor at 1 and 8 clients, and the
direct p99 at 32 clients no worse than the SDK path's.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_http

from testkit.server import NO_RATE_LIMITS, ServerProcess, serve_http_command
from testkit.tokens import AUDIENCE, ISSUER, Issuer

VERSION = "2026-07-28"
ROUNDS = int(os.environ.get("BENCH_DIRECT_ROUNDS", "5"))
CONCURRENCY = {1: 300, 8: 60, 32: 16}
TARGET_CPU_RATIO = 2.0
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}
CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"_meta": META, "name": "search_tickets", "arguments": {}},
}


class Client(bench_http.Client):
    """A 2026-07-28 client: no handshake, everything in each request's `_meta` and headers."""

    @classmethod
    async def connect(cls, url: str, bearer: str) -> bench_http.Client:
        """Return a client whose requests carry the 2026-07-28 headers."""
        client = cls(url, bearer)
        client._headers["MCP-Protocol-Version"] = VERSION
        client._headers["Mcp-Method"] = "tools/call"
        client._headers["Mcp-Name"] = "search_tickets"
        return client

    async def search(self) -> None:
        """Call search_tickets {} and check the answer is a success."""
        _, body = await self.post(CALL)
        if json.loads(body)["result"]["structuredContent"]["ok"] is not True:
            raise RuntimeError("a benchmark call failed")


Samples = dict[int, dict[str, list[float]]]
"""By concurrency, by server: server CPU ms per call for each round."""


async def _round(clients: list[bench_http.Client], calls_each: int, latencies: list[float]) -> None:
    async def run(client: bench_http.Client) -> None:
        for _ in range(calls_each):
            start = time.perf_counter()
            await client.search()
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(run(client) for client in clients))


async def _measure(
    servers: dict[str, ServerProcess], tokens: list[str]
) -> tuple[Samples, dict[str, list[float]]]:
    samples: Samples = {n: {name: [] for name in servers} for n in CONCURRENCY}
    tails: dict[str, list[float]] = {name: [] for name in servers}
    clients = {
        name: [await Client.connect(server.url, tokens[i % len(tokens)]) for i in range(32)]
        for name, server in servers.items()
    }
    names = list(servers)
    try:
        for name in names:  # warm up
            await _round(clients[name], 10, [])
        for round_number in range(ROUNDS):
            order = names[round_number % len(names) :] + names[: round_number % len(names)]
            for concurrency, calls_each in CONCURRENCY.items():
                for name in order:
                    latencies: list[float] = []
                    cpu = servers[name].cpu_seconds()
                    await _round(clients[name][:concurrency], calls_each, latencies)
                    cpu_ms = (servers[name].cpu_seconds() - cpu) * 1000
                    samples[concurrency][name].append(cpu_ms / (concurrency * calls_each))
                    if concurrency == 32:
                        tails[name].extend(latencies)
    finally:
        for connections in clients.values():
            for client in connections:
                client.close()
    return samples, tails


def _p99_ms(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100)[98] * 1000


def main() -> None:
    """Print CPU per call for the three servers, the ratios to the floor, and p99 at 32."""
    idp = Issuer()
    tokens = [idp.token(tenant, f"bench-{tenant}") for tenant in ("alpha", "beta")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jwks = idp.write_jwks(folder / "jwks.json")
        serve = serve_http_command(jwks, "--stateless", "--audit-log", os.devnull, *NO_RATE_LIMITS)
        floor = [sys.executable, str(Path(__file__).with_name("http_floor.py")), str(jwks)]
        servers = {
            "direct": ServerProcess(serve, folder / "direct.txt"),
            "sdk": ServerProcess(serve, folder / "sdk.txt", env={"TICKET_TOOLS_HTTP_PATH": "sdk"}),
            "floor": ServerProcess([*floor, ISSUER, AUDIENCE], folder / "floor.txt"),
        }
        try:
            samples, tails = asyncio.run(_measure(servers, tokens))
        finally:
            for process in servers.values():
                process.stop()
    print(
        f"2026-07-28 search_tickets {{}} (serve http --stateless), {ROUNDS} rounds in turn, "
        f"medians over rounds; load average {Path('/proc/loadavg').read_text().split()[:3]}\n"
        f"{'clients':>7} {'direct CPU ms':>13} {'sdk CPU ms':>10} {'floor CPU ms':>12} "
        f"{'direct/floor':>12} {'sdk/floor':>9}"
    )
    for concurrency, by_server in samples.items():
        direct, sdk, floor_ms = by_server["direct"], by_server["sdk"], by_server["floor"]
        to_floor = statistics.median(a / b for a, b in zip(direct, floor_ms, strict=True))
        sdk_to_floor = statistics.median(a / b for a, b in zip(sdk, floor_ms, strict=True))
        print(
            f"{concurrency:>7} {statistics.median(direct):>13.3f} {statistics.median(sdk):>10.3f} "
            f"{statistics.median(floor_ms):>12.3f} {to_floor:>12.2f} {sdk_to_floor:>9.2f}"
        )
        if concurrency in (1, 8):
            verdict = "met" if to_floor <= TARGET_CPU_RATIO else "missed"
            print(
                f"target: direct CPU per call <= {TARGET_CPU_RATIO:g}x the floor at "
                f"{concurrency} client(s): {to_floor:.3f}x, {verdict}"
            )
    direct_p99, sdk_p99 = _p99_ms(tails["direct"]), _p99_ms(tails["sdk"])
    verdict = "met" if direct_p99 <= sdk_p99 else "missed"
    print(
        f"target: direct p99 at 32 clients no worse than the SDK path's: {direct_p99:.1f} ms "
        f"against {sdk_p99:.1f} ms (floor {_p99_ms(tails['floor']):.1f} ms), {verdict}"
    )


if __name__ == "__main__":
    main()
