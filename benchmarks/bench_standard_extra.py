"""Server CPU per call of `serve http` with and without uvicorn's `standard` extra.

Two servers from the same install, side by side: one as installed (uvloop and httptools,
from the `mcp` extra), one with both hidden (`import uvloop` and `import httptools` fail,
so uvicorn falls back to the asyncio loop and h11). The same plain HTTP/1.1 clients as
bench_http.py call `search_tickets {}` on both, rounds interleaved (the order swaps every
round); the figures are medians over rounds, the ratio the median of per-round ratios.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

import bench_http

from testkit.server import NO_RATE_LIMITS, ServerProcess, hide_standard_extra, serve_http_command
from testkit.tokens import Issuer


def main() -> None:
    """Print calls/s and server CPU ms per call for both servers at each concurrency."""
    idp = Issuer()
    tokens = [idp.token(tenant, f"bench-{tenant}") for tenant in ("alpha", "beta")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jwks = idp.write_jwks(folder / "jwks.json")
        serve = serve_http_command(jwks, "--audit-log", os.devnull, *NO_RATE_LIMITS)
        hidden = hide_standard_extra(folder)
        plain_env = {"PYTHONPATH": os.pathsep.join([str(hidden), *sys.path])}
        servers = {
            "standard": ServerProcess(serve, folder / "standard.txt"),
            "plain": ServerProcess(serve, folder / "plain.txt", env=plain_env),
        }
        try:
            samples = asyncio.run(bench_http._measure(servers, tokens))
        finally:
            for process in servers.values():
                process.stop()
    print(
        f"search_tickets {{}} over Streamable HTTP, {bench_http.ROUNDS} interleaved rounds; "
        "standard = uvloop + httptools, plain = asyncio + h11\n"
        f"{'clients':>7} {'standard calls/s':>16} {'plain calls/s':>13} "
        f"{'standard CPU ms':>15} {'plain CPU ms':>12} {'CPU ratio':>9}"
    )
    for concurrency, by_server in samples.items():
        fast, plain = by_server["standard"], by_server["plain"]
        ratio = statistics.median(a[1] / b[1] for a, b in zip(fast, plain, strict=True))
        print(
            f"{concurrency:>7} {statistics.median(r for r, _ in fast):>16.0f} "
            f"{statistics.median(r for r, _ in plain):>13.0f} "
            f"{statistics.median(c for _, c in fast):>15.3f} "
            f"{statistics.median(c for _, c in plain):>12.3f} {ratio:>9.2f}"
        )


if __name__ == "__main__":
    main()
