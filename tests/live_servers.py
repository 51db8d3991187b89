"""Real `serve` subprocesses spoken to as a host would: stdio lines, or stateless HTTP calls."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import urllib.request
from typing import Any, BinaryIO, cast

from testkit.server import HttpServer

PROTOCOL = "2025-11-25"
REPLY_TIMEOUT = 60.0  # seconds: only reached when the server never answers


class StdioServer:
    """`ticket-tools serve --tenant alpha ...` spoken to in JSON-RPC lines."""

    def __init__(self, *store: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ticket_tools.cli",
                "serve",
                "stdio",
                "--tenant",
                "alpha",
                *store,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        self.next_id = 0
        try:
            self.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "live", "version": "0"},
                },
            )
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except BaseException:
            self.process.kill()
            self.stop()
            raise

    def _send(self, message: dict[str, object]) -> None:
        cast(BinaryIO, self.process.stdin).write(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: dict[str, object]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        stdout = cast(BinaryIO, self.process.stdout)
        ready, _, _ = select.select([stdout], [], [], REPLY_TIMEOUT)
        assert ready, "the server did not answer"
        return cast("dict[str, Any]", json.loads(stdout.readline()))

    def call(self, name: str, arguments: dict[str, object]) -> object:
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        return reply["result"]["structuredContent"]

    def stop(self) -> int:
        # Unbuffered (bufsize=0): closing writes nothing, so it cannot fail on a dead server.
        cast(BinaryIO, self.process.stdin).close()
        code = self.process.wait(timeout=REPLY_TIMEOUT)
        cast(BinaryIO, self.process.stdout).close()
        return code


class HttpCaller:
    """Tool calls to a stateless `serve --http` as alpha, over raw HTTP."""

    def __init__(self, server: HttpServer, bearer: str) -> None:
        self.server = server
        self.bearer = bearer

    def call(self, name: str, arguments: dict[str, object]) -> object:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        request = urllib.request.Request(  # noqa: S310 - the loopback server
            self.server.url,
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "Authorization": f"Bearer {self.bearer}",
                "Mcp-Protocol-Version": PROTOCOL,
            },
        )
        with urllib.request.urlopen(request, timeout=REPLY_TIMEOUT) as response:  # noqa: S310
            text = response.read().decode()
        # A JSON body, or one server-sent event holding it.
        payload = text if text.startswith("{") else text.split("data: ", 1)[1].split("\n")[0]
        return json.loads(payload)["result"]["structuredContent"]
