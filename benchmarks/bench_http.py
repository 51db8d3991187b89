"""Tool calls per second through `ticket-tools serve http`, against the SDK's `MCPServer`.

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
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://idp.bench.test/"
AUDIENCE = "https://tickets.bench.test/mcp"

PROTOCOL = "2025-11-25"
ROUNDS = 9
# Calls per client in one measurement, by concurrency: 300-512 calls, about half a second.
CONCURRENCY = {1: 300, 8: 60, 32: 16}
START_TIMEOUT_SECONDS = 60.0


class Process:
    """A server subprocess that prints its URL on stderr, stopped with SIGTERM."""

    def __init__(
        self, args: list[str], stderr_path: Path, env: dict[str, str] | None = None
    ) -> None:
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        prefix = "ticket-tools: serving MCP on "
        while time.monotonic() < deadline and self.process.poll() is None:
            lines = stderr_path.read_text(encoding="utf-8").splitlines()
            found = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
            if found:
                self.url = found[0]
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not start: {stderr_path.read_text(encoding='utf-8')}")

    def cpu_seconds(self) -> float:
        """Return the CPU time the server process has used so far (user + system)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """Stop the server and wait for it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


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


async def _measure(servers: dict[str, Process], tokens: list[str]) -> Samples:
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


def _identity_provider() -> tuple[dict[str, object], list[str]]:
    """Return a JWKS with one RS256 key, and an alpha and a beta token signed with it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "bench", "alg": "RS256"}
    now = int(time.time())
    tokens = [
        jwt.encode(
            {
                "iss": ISSUER,
                "aud": AUDIENCE,
                "sub": f"bench-{tenant}",
                "exp": now + 3600,
                "tenant": tenant,
                "scope": "tickets:read",
            },
            key,
            algorithm="RS256",
            headers={"kid": "bench"},
        )
        for tenant in ("alpha", "beta")
    ]
    return {"keys": [jwk]}, tokens


def main() -> None:
    """Print calls/s at each concurrency for both servers and the median per-round ratio."""
    document, tokens = _identity_provider()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jwks = folder / "jwks.json"
        jwks.write_text(json.dumps(document), encoding="utf-8")
        rules = ["--jwks", str(jwks), "--issuer", ISSUER, "--audience", AUDIENCE]
        serve = [sys.executable, "-m", "ticket_tools.cli", "serve", "http", "127.0.0.1:0", *rules]
        audit = ["--audit-log", os.devnull]
        baseline_script = str(Path(__file__).with_name("http_baseline.py"))
        baseline_args = [sys.executable, baseline_script, str(jwks), ISSUER, AUDIENCE]
        servers = {
            "ticket-tools": Process([*serve, *audit], folder / "tt.txt"),
            "MCPServer": Process(baseline_args, folder / "base.txt"),
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
