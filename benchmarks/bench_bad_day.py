"""One `serve http --stateless` replica on PostgreSQL on a bad day: a noisy neighbour, a stall.

A throwaway cluster (testkit/postgres.py) holds tenant Q (1,000 tickets) and tenant H
(HEAVY_TICKETS tickets). Plain HTTP/1.1 clients on kept-alive connections (the SDK client
costs more CPU than the server), each with its own token, all in this process:

1. noisy neighbour: Q's 4 clients call `get_ticket` for PHASE_SECONDS alone, then again
   while H's 4 clients run no-match searches (each reads all of H's rows); the figure is
   Q's p50 and p99 with H / alone, from one run (rate limits off, so the workers' share
   per tenant is what is measured; with them on, H is also refused past 100 calls/s);
2. stall: the table is locked for STALL_SECONDS while a client calls `tools/list` and
   another `get_ticket`: the p99 of the calls that need no store, the time a store call
   takes to fail, how soon `/readyz` turns 503 and back to 200 after the lock;
3. SIGTERM during the stall, one call waiting on the lock: the time until the process exits.

    .venv/bin/python benchmarks/bench_bad_day.py

Figures go to stdout; docs/scale.md quotes one run.
"""

from __future__ import annotations

import http.client
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from testkit.postgres import ThrowawayCluster, find_binaries
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.stores.postgres.importer import import_records

HEAVY_TICKETS = 200_000
LIGHT_TICKETS = 1_000
CLIENTS = 4
PHASE_SECONDS = 8.0
STALL_SECONDS = 8.0
OWNER, READER = "ticket_owner", "ticket_reader"


def _records() -> dict[str, dict[str, str]]:
    records = {}
    for n in range(LIGHT_TICKETS):
        ticket_id = f"TKT-{n:03d}"
        status = "open" if n % 2 else "closed"
        records[f"q:{ticket_id}"] = {"id": ticket_id, "title": f"login {n}", "status": status}
    return records


# A records file holds at most 1,000 tickets a tenant (TKT-000..999): H's rows are
# inserted by the owner, under H's policy, with longer ids.
_HEAVY_SQL = """
INSERT INTO tickets (tenant, id, title, status, title_lower)
SELECT 'h', 'TKT-' || lpad(n::text, 6, '0'), 'Login issue ' || n, 'open', 'login issue ' || n
FROM generate_series(1, %s) AS n
"""


class Client:
    """One kept-alive HTTP/1.1 connection sending JSON-RPC posts with one token."""

    def __init__(self, url: str, token: str) -> None:
        parts = url.removeprefix("http://").split("/", 1)
        host, port = parts[0].rsplit(":", 1)
        self._connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self._path = "/" + parts[1]
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }

    def post(self, message: dict[str, object]) -> tuple[int, bytes, float]:
        """Send one request; return its status, body and seconds taken."""
        started = time.perf_counter()
        self._connection.request("POST", self._path, json.dumps(message), self._headers)
        response = self._connection.getresponse()
        body = response.read()
        return response.status, body, time.perf_counter() - started


def _call(name: str, args: dict[str, object]) -> dict[str, object]:
    params = {"name": name, "arguments": args}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


LIST: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
GET = _call("get_ticket", {"ticket_id": "TKT-104"})
HEAVY = _call("search_tickets", {"query": "no such words", "limit": 10})


def _loop(client: Client, message: dict[str, object], stop: threading.Event) -> list[float]:
    times = []
    while not stop.is_set():
        status, _, seconds = client.post(message)
        if status == 200:
            times.append(seconds)
    return times


def _run_clients(jobs: list[tuple[Client, dict[str, object]]], seconds: float) -> list[list[float]]:
    stop = threading.Event()
    results: list[list[float]] = [[] for _ in jobs]

    def run(slot: int) -> None:
        results[slot] = _loop(jobs[slot][0], jobs[slot][1], stop)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(jobs))]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return results


def _pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _ready(base: str) -> int:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("GET", "/readyz")
    return connection.getresponse().status


def _wait(check: Callable[[], bool]) -> float:
    started = time.perf_counter()
    while not check():
        time.sleep(0.01)
    return time.perf_counter() - started


def main() -> int:
    """Run the three phases and print their figures."""
    binaries = find_binaries()
    if binaries is None:
        print("PostgreSQL server binaries are not installed", file=sys.stderr)
        return 1
    cluster = ThrowawayCluster(binaries)
    folder = Path(tempfile.mkdtemp(prefix="bad-day-"))
    idp = Issuer("idp")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()))
    try:
        cluster.start()
        with psycopg.connect(cluster.dsn(), autocommit=True) as connection:
            connection.execute(f"CREATE ROLE {OWNER} LOGIN")
            connection.execute(f"CREATE ROLE {READER} LOGIN")
            connection.execute(f"CREATE DATABASE tickets OWNER {OWNER}")
        with psycopg.connect(cluster.dsn(OWNER, "tickets")) as connection:
            import_records(connection, _records(), grant_to=READER)
            connection.execute("SELECT set_config('app.tenant', 'h', false)")
            connection.execute(_HEAVY_SQL, (HEAVY_TICKETS,))
            connection.commit()
            connection.execute("ANALYZE tickets")
        reader, superuser = cluster.dsn(READER, "tickets"), cluster.dsn(dbname="tickets")
        _noisy_neighbour(folder, idp, reader)
        _stall(folder, idp, reader, superuser)
    finally:
        cluster.destroy()
    return 0


def _server(folder: Path, reader: str, *extra: str) -> HttpServer:
    unlimited = ("--tenant-rate", "0", "--subject-rate", "0")
    return HttpServer(folder, str(folder.parent / "jwks.json"), "--stateless", "--postgres",
                      reader, *unlimited, *extra)  # fmt: skip


def _noisy_neighbour(folder: Path, idp: Issuer, reader: str) -> None:
    server = _server(folder / "noisy", reader)
    try:
        q = [Client(server.url, idp.sign(claims("q", f"q{n}"))) for n in range(CLIENTS)]
        h = [Client(server.url, idp.sign(claims("h", f"h{n}"))) for n in range(CLIENTS)]
        _run_clients([(c, GET) for c in q], 1.0)  # warm up
        alone = [t for ts in _run_clients([(c, GET) for c in q], PHASE_SECONDS) for t in ts]
        both = _run_clients([(c, GET) for c in q] + [(c, HEAVY) for c in h], PHASE_SECONDS)
        with_h = [t for ts in both[:CLIENTS] for t in ts]
        heavy = [t for ts in both[CLIENTS:] for t in ts]
        print("noisy neighbour (Q: get_ticket x4, H: no-match search x4)")
        for label, times in (("Q alone", alone), ("Q with H", with_h), ("H", heavy)):
            rate = len(times) / PHASE_SECONDS
            print(f"  {label:9} {rate:7.0f} calls/s  p50 {_pct(times, 0.5):7.1f} ms  "
                  f"p99 {_pct(times, 0.99):7.1f} ms")  # fmt: skip
        print(f"  ratio with H / alone: p50 {_pct(with_h, 0.5) / _pct(alone, 0.5):.2f}x, "
              f"p99 {_pct(with_h, 0.99) / _pct(alone, 0.99):.2f}x")  # fmt: skip
    finally:
        server.stop()


def _stall(folder: Path, idp: Issuer, reader: str, superuser: str) -> None:
    server = _server(folder / "stall", reader)
    base = server.url.removesuffix("/mcp")
    token = idp.sign(claims("q", "stall"))
    try:
        _wait(lambda: _ready(base) == 200)
        lister, getter = Client(server.url, token), Client(server.url, token)
        with psycopg.connect(superuser) as lock:
            lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
            locked_at = time.perf_counter()
            failed: list[float] = []
            stop = threading.Event()

            def get_loop() -> None:
                while not stop.is_set():
                    _, body, seconds = getter.post(GET)
                    if b'"unavailable"' in body:
                        failed.append(seconds)

            flipped: list[float] = []

            def watch_ready() -> None:
                _wait(lambda: _ready(base) == 503)
                flipped.append(time.perf_counter() - locked_at)

            threads = [threading.Thread(target=get_loop), threading.Thread(target=watch_ready)]
            for thread in threads:
                thread.start()
            listed = _loop_for(lister, LIST, STALL_SECONDS)
            stop.set()
            threads[0].join()
            lock.rollback()
            threads[1].join()
        unlocked = time.perf_counter()
        _wait(lambda: _ready(base) == 200)
        ready_again = time.perf_counter() - unlocked
        print(f"stall (table locked {STALL_SECONDS:.0f} s, default 2 s deadline)")
        print(f"  tools/list during the lock: {len(listed)} calls, p50 {_pct(listed, 0.5):.1f} ms, "
              f"p99 {_pct(listed, 0.99):.1f} ms, max {max(listed) * 1000:.1f} ms")  # fmt: skip
        print(f"  get_ticket failed as unavailable after {statistics.median(failed):.2f} s "
              f"(median of {len(failed)}, max {max(failed):.2f} s)")  # fmt: skip
        print(f"  /readyz 503 {flipped[0]:.2f} s after the lock; "
              f"200 again {ready_again:.2f} s after it went")  # fmt: skip
    finally:
        server.stop()
    _sigterm_during_a_stall(folder, idp, reader, superuser)


def _loop_for(client: Client, message: dict[str, object], seconds: float) -> list[float]:
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    timer.start()
    return _loop(client, message, stop)


def _sigterm_during_a_stall(folder: Path, idp: Issuer, reader: str, superuser: str) -> None:
    server = _server(folder / "sigterm", reader, "--store-timeout", "30")
    base = server.url.removesuffix("/mcp")
    client = Client(server.url, idp.sign(claims("q", "drain")))
    try:
        _wait(lambda: _ready(base) == 200)
        with psycopg.connect(superuser) as lock:
            lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
            waiting = threading.Thread(target=client.post, args=(GET,))
            waiting.start()
            time.sleep(0.5)
            started = time.perf_counter()
            server.process.send_signal(signal.SIGTERM)
            status = server.process.wait(timeout=60)
            exited = time.perf_counter() - started
            waiting.join()
            lock.rollback()
        print(f"SIGTERM during the stall (grace 3 s, one call waiting): exit {status} "
              f"after {exited:.2f} s")  # fmt: skip
    finally:
        if server.process.poll() is None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
