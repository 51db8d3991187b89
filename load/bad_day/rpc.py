"""Plain HTTP/1.1 JSON-RPC for the bad day: a kept-alive client, a calling loop, probes, sessions.

The SDK client costs more CPU than the server it measures; these post raw JSON-RPC on
one connection each, and name every answer by what it was (`answer_code`).
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from load.bad_day.report import Figures
from load.stats import ms

PROTOCOL_VERSION = "2025-06-18"
READY_POLL_SECONDS = 0.02
CLIENT_TIMEOUT_SECONDS = 60.0


def call(name: str, args: object) -> dict[str, object]:
    """Return a `tools/call` request for tool `name` with `args`."""
    params = {"name": name, "arguments": args}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


LIST: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
INITIALIZE: dict[str, object] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "bad-day", "version": "1"},
    },
}
INITIALIZED: dict[str, object] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


_IDS = itertools.count(1)  # next() on it is atomic under the GIL: one id per request


class Client:
    """One kept-alive HTTP/1.1 connection sending JSON-RPC posts with one token."""

    def __init__(self, url: str, token: str) -> None:
        parts = url.removeprefix("http://").split("/", 1)
        host, port = parts[0].rsplit(":", 1)
        self._connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self._path = "/" + parts[1]
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }

    def post(self, message: dict[str, object]) -> tuple[int, bytes, float, dict[str, str]]:
        """Send one request; return its status, body, seconds taken and headers."""
        if "id" in message:  # requests of one session must not share an id (JSON-RPC)
            message = {**message, "id": next(_IDS)}
        started = time.perf_counter()
        try:
            self._connection.request("POST", self._path, json.dumps(message), self.headers)
            response = self._connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException):
            self._connection.close()  # the next request reconnects
            return 0, b"", time.perf_counter() - started, {}
        headers = {key.lower(): value for key, value in response.getheaders()}
        return response.status, body, time.perf_counter() - started, headers

    def request(self, method: str) -> int:
        """Send a bodiless request (DELETE); return its status (0: no answer)."""
        try:
            self._connection.request(method, self._path, headers=self.headers)
            response = self._connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self._connection.close()
            return 0
        return response.status

    def stream(self) -> tuple[int, http.client.HTTPConnection]:
        """Open the session's GET stream on a connection of its own; return its status and it.

        The stream is not read: close the connection to end it.
        """
        host, port = self._connection.host, self._connection.port
        connection = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT_SECONDS)
        try:
            connection.request(
                "GET", self._path, headers={**self.headers, "Accept": "text/event-stream"}
            )
            return connection.getresponse().status, connection
        except (OSError, http.client.HTTPException):
            return 0, connection

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def answer_code(status: int, body: bytes) -> str:
    """Name what a JSON-RPC answer was: ok, a tool failure's code, a protocol error, a status.

    200 {"result": {"structuredContent": {"ok": false, "code": "unavailable"}}} -> "unavailable";
    200 {"error": {"code": -32602}} -> "-32602"; a 429 -> "http 429"; a tool call over its
    rate -> "rate_limited".
    """
    if status != 200:
        return f"http {status}"
    try:
        message = json.loads(body)
    except ValueError:
        return "not json"
    error = message.get("error")
    if isinstance(error, dict):
        return str(error.get("code"))
    result = message.get("result", {})
    if "tools" in result:
        return "tools"
    structured = result.get("structuredContent") or {}
    return "ok" if structured.get("ok") is True else str(structured.get("code"))


class Loop:
    """A client posting one message again and again until stopped, keeping what came back."""

    def __init__(
        self, client: Client, message: dict[str, object], *, pace: float | None = None
    ) -> None:
        self.client = client
        self.message = message
        self.pace = pace
        self.times: list[float] = []
        self.codes: Counter[str] = Counter()
        self.answers: list[tuple[float, float, str]] = []
        """(sent at, seconds, code) of every call, perf_counter clock."""

    def run(self, stop: threading.Event) -> None:
        """Post until `stop` is set, at most `pace` calls per second when given."""
        while not stop.is_set():
            sent = time.perf_counter()
            status, body, seconds, _ = self.client.post(self.message)
            code = answer_code(status, body)
            self.codes[code] += 1
            self.answers.append((sent, seconds, code))
            if status == 200:
                self.times.append(seconds)
            if self.pace is not None:
                stop.wait(max(0.0, 1 / self.pace - seconds))


@contextmanager
def running(jobs: Sequence[Callable[[threading.Event], object]]) -> Iterator[threading.Event]:
    """Run each job on a thread of its own until the block ends; then stop and join them."""
    stop = threading.Event()
    threads = [threading.Thread(target=job, args=(stop,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    try:
        yield stop
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=CLIENT_TIMEOUT_SECONDS)


def run_loops(loops: Sequence[Loop], seconds: float) -> None:
    """Run the loops together for `seconds`."""
    with running([loop.run for loop in loops]):
        time.sleep(seconds)


def get(base: str, path: str) -> int:
    """GET base+path on a new connection; return the status (0: no answer)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


def wait_for(check: Callable[[], bool], timeout: float) -> float | None:
    """Poll `check` every READY_POLL_SECONDS; return the seconds until it held (None: never)."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > timeout:
            return None
        time.sleep(READY_POLL_SECONDS)
    return time.perf_counter() - started


def results(loops: Sequence[Loop]) -> tuple[list[float], dict[str, int]]:
    """Return the loops' answer times and codes together (what a forked process sends back)."""
    return [t for loop in loops for t in loop.times], codes(loops)


def codes(loops: Sequence[Loop]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for loop in loops:
        total += loop.codes
    return dict(sorted(total.items()))


def round_robin(loops: Sequence[Loop], seconds: float) -> None:
    """One client's calls, each loop's message in turn, for `seconds` (a closed loop)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        for loop in loops:
            status, body, taken, _ = loop.client.post(loop.message)
            code = answer_code(status, body)
            loop.codes[code] += 1
            if status == 200:
                loop.times.append(taken)


def until_status(base: str, status: int, timeout: float) -> float | None:
    return wait_for(lambda: get(base, "/readyz") == status, timeout)


def with_session(client: Client, session: str) -> Client:
    client.headers["Mcp-Session-Id"] = session
    client.headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    return client


def session_client(url: str, token: str, session: str) -> Client:
    return with_session(Client(url, token), session)


def open_session(client: Client) -> str:
    """Initialize a session on `client`'s connection; return its id (RuntimeError if refused)."""
    status, _, _, headers = client.post(INITIALIZE)
    session = headers.get("mcp-session-id")
    if status != 200 or session is None:
        raise RuntimeError(f"a session could not be opened: HTTP {status}")
    client.headers["Mcp-Session-Id"] = session
    client.headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    client.post(INITIALIZED)
    return session


def summary(times: Sequence[float], seconds: float) -> Figures:
    """Return the calls, calls per second, p50, p99 and max (ms) of answer times `times`."""
    return {
        "calls": len(times),
        "calls_per_s": round(len(times) / seconds, 1),
        "p50_ms": ms(times, 50),
        "p99_ms": ms(times, 99),
        "max_ms": None if not times else round(max(times) * 1000, 1),
    }
