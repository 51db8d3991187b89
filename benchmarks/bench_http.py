"""Tool calls per second through `ticket-tools serve --http`, against the SDK's `MCPServer`.

Both servers run as subprocesses on 127.0.0.1 with the same token verifier, store, uvicorn
and transport settings (JSON responses, sessions on); the baseline is
benchmarks/http_baseline.py. Clients in this process (plain HTTP/1.1 on kept-alive
connections, see `Client`) drive them: at each concurrency, every client holds its own
connection, session and token (alpha and beta alternate) and calls `search_tickets {}`
in a loop. Rounds interleave the two servers (the order
swaps every round); the ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from testkit.server import NO_RATE_LIMITS, ServerProcess, serve_http_command
from testkit.tokens import AUDIENCE, ISSUER, Issuer

PROTOCOL = "2025-11-25"
ROUNDS = 9
# Calls per client in one measurement, by concurrency: 300-512 calls, about half a second.
CONCURRENCY = {1: 300, 8: 60, 32: 16}


class Client:
    """One MCP client on one kept-alive connection: plain HTTP/1.1, so the servers are measured.

    The SDK client costs more CPU per call than either server; driving 32 of them from one
    process would measure the client.
    """

    def __init__(self, url: str, bearer: str) -> None:
        self._address = urlsplit(url)
        self._headers = {
            "Host": self._address.netloc,
            "Authorization": f"Bearer {bearer}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    @classmethod
    async def connect(cls, url: str, bearer: str) -> Client:
        """Open a connection and an MCP session on it."""
        client = cls(url, bearer)
        info = {"name": "bench", "version": "1"}
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info}
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        headers, _ = await client.post(initialize)
        client._headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        client._headers["Mcp-Protocol-Version"] = PROTOCOL
        await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    async def post(self, message: dict[str, object]) -> tuple[dict[str, str], bytes]:
        """Send one JSON-RPC message; return the response's headers and body.

        uvicorn closes a connection idle for 5 s (the 32-client phase's extra clients wait
        that long): then the request goes again on a new connection, in the same session.
        """
        try:
            return await self._exchange(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.close()
            return await self._exchange(message)

    async def _exchange(self, message: dict[str, object]) -> tuple[dict[str, str], bytes]:
        if self._streams is None:
            host, port = self._address.hostname, self._address.port
            self._streams = await asyncio.open_connection(host, port)
            sock = self._streams[1].get_extra_info("socket")
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader, writer = self._streams
        body = json.dumps(message).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in self._headers.items())
        request = f"POST /mcp HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        writer.write(request.encode() + body)
        raw = await reader.readuntil(b"\r\n\r\n")
        status, *lines = raw.decode("latin-1").split("\r\n")
        if status.split(" ")[1] not in ("200", "202"):
            raise RuntimeError(f"benchmark call refused: {status}")
        pairs = (line.partition(":") for line in lines if line)
        headers = {name.lower(): value.strip() for name, _, value in pairs}
        return headers, await reader.readexactly(int(headers.get("content-length", "0")))

    async def search(self) -> None:
        """Call search_tickets {} and check the answer is a success."""
        call = {"name": "search_tickets", "arguments": {}}
        _, body = await self.post(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        )
        if json.loads(body)["result"]["structuredContent"]["ok"] is not True:
            raise RuntimeError("a benchmark call failed")

    def close(self) -> None:
        """Close the connection, if open."""
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _rate(clients: list[Client], calls_each: int) -> float:
    """Return calls per second with every client calling `calls_each` times at once."""

    async def run(client: Client) -> None:
        for _ in range(calls_each):
            await client.search()

    start = time.perf_counter()
    await asyncio.gather(*(run(client) for client in clients))
    return len(clients) * calls_each / (time.perf_counter() - start)


Samples = dict[int, dict[str, list[tuple[float, float]]]]
"""By concurrency, by server: (calls/s, server CPU ms per call) for each round."""


async def _measure(servers: dict[str, ServerProcess], tokens: list[str]) -> Samples:
    samples: Samples = {n: {name: [] for name in servers} for n in CONCURRENCY}
    clients = {
        name: [
            await Client.connect(server.url, tokens[i % len(tokens)])
            for i in range(max(CONCURRENCY))
        ]
        for name, server in servers.items()
    }
    try:
        for name in servers:  # warm up both servers
            await _rate(clients[name], 10)
        for round_number in range(ROUNDS):
            order = list(servers) if round_number % 2 == 0 else list(reversed(servers))
            for concurrency, calls_each in CONCURRENCY.items():
                for name in order:
                    cpu = servers[name].cpu_seconds()
                    rate = await _rate(clients[name][:concurrency], calls_each)
                    cpu_ms = (servers[name].cpu_seconds() - cpu) * 1000
                    samples[concurrency][name].append((rate, cpu_ms / (concurrency * calls_each)))
    finally:
        for connections in clients.values():
            for client in connections:
                client.close()
    return samples


def main() -> None:
    """Print calls/s at each concurrency for both servers and the median per-round ratio."""
    idp = Issuer()
    tokens = [idp.token(tenant, f"bench-{tenant}") for tenant in ("alpha", "beta")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jwks = idp.write_jwks(folder / "jwks.json")
        baseline_script = str(Path(__file__).with_name("http_baseline.py"))
        baseline = [sys.executable, baseline_script, str(jwks), ISSUER, AUDIENCE]
        servers = {
            "ticket-tools": ServerProcess(
                # Rate limits off: this measures what one replica serves, not what it allows.
                serve_http_command(jwks, "--audit-log", os.devnull, *NO_RATE_LIMITS),
                folder / "tt.txt",
            ),
            "MCPServer": ServerProcess(baseline, folder / "base.txt"),
        }
        try:
            samples = asyncio.run(_measure(servers, tokens))
        finally:
            for process in servers.values():
                process.stop()
    print(
        f"search_tickets {{}} over Streamable HTTP, {ROUNDS} interleaved rounds, medians over "
        "rounds;\nserver CPU is the server process's user+system time per call\n"
        f"{'clients':>7} {'ticket-tools calls/s':>20} {'MCPServer calls/s':>17} "
        f"{'ratio':>6} {'ticket-tools CPU ms':>19} {'MCPServer CPU ms':>16}"
    )
    for concurrency, by_server in samples.items():
        ours, theirs = by_server["ticket-tools"], by_server["MCPServer"]
        ratio = statistics.median(a[0] / b[0] for a, b in zip(ours, theirs, strict=True))
        print(
            f"{concurrency:>7} {statistics.median(r for r, _ in ours):>20.0f} "
            f"{statistics.median(r for r, _ in theirs):>17.0f} {ratio:>6.2f} "
            f"{statistics.median(c for _, c in ours):>19.2f} "
            f"{statistics.median(c for _, c in theirs):>16.2f}"
        )


if __name__ == "__main__":
    main()
