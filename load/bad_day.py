"""The bad-day phase of `make load`: one replica's noisy neighbour, stalls, floods and SIGTERM.

Issue 19's point 11, measured on the run's PostgreSQL (a database of its own, `bad_day`,
holding tenant Q's 1,000 tickets and tenant H's HEAVY_TICKETS) with plain HTTP/1.1
clients on kept-alive connections (the SDK client costs more CPU than the server), each
with its own token:

1. noisy neighbour: Q's 4 clients call `get_ticket` alone, then while H's 4 clients run
   no-match searches (each reads all of H's rows); Q's p50 and p99 with H / alone;
2. slow bodies: the same, while SLOW_BODIES connections send their headers, then trickle
   a body (a byte every SLOW_BODY_BYTE_SECONDS): Q's p50 with them / alone, and whether
   the server cut them off within the window;
3. a stall, twice: the table locked, then PostgreSQL stopped, for STALL_SECONDS, while one
   client loops over the calls that need no store (`tools/list`, an unknown tool, invalid
   arguments) and two call `get_ticket`: the p99 of the first against the same calls with
   the store idle just before and against the machine's own scheduling delay then (how late
   a process that only sleeps wakes up), how long a store call takes to fail, and how soon
   `/readyz` turns 503 and back to 200;
4. sessions and bursts, on a replica with sessions and the default rate limits: one token
   opens sessions as fast as it can (until refused, and on), then one token sends calls as
   fast as it can, while tenant Q's two paced clients call and a newcomer of Q opens a new
   session every NEWCOMER_EVERY_SECONDS: Q's p50 meanwhile / alone, and every refusal;
5. SIGTERM with a call waiting on a locked table, SIGTERM_ROUNDS times: the time to exit,
   the exit status, and what the waiting call was answered.

With BAD_DAY_PROFILE=FOLDER (and py-spy installed), the replica is sampled during each
stall into FOLDER/stall-lock.txt and stall-stop.txt (py-spy's raw collapsed stacks, by
thread). Timings are figures, with their targets beside; only wrong answers (a refusal of Q, a
store call answered anything but its ticket or `unavailable`, a probe that never flips, a
non-zero exit) are problems of the run. `benchmarks/bench_bad_day.py` runs this phase
alone on a cluster of its own (`run_alone`); the targets, the table and the problems are
`load/bad_day_report.py`.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psycopg

from load.bad_day_report import Figures, problems, render
from load.cluster import Cluster
from load.stats import percentile
from load.supervise import SIGNALS, Supervisor, cpu_seconds, machine_cpu, rss_kib
from testkit.server import NO_RATE_LIMITS, serve_http_command, wait_for_address
from testkit.tokens import Issuer
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.tickets import IdFormat

HEAVY_TICKETS = 200_000
ID_DIGITS = 6
LIGHT_TICKETS = 1_000
CLIENTS = 4
WARMUP_SECONDS = 1.0
PHASE_SECONDS = 8.0
STALL_SECONDS = 8.0
IDLE_BASELINE_SECONDS = 4.0
SESSION_PHASE_SECONDS = 6.0
PACED_CALLS_PER_SECOND = 10.0  # Q's own pace: within its subject's default 20/s
NEWCOMER_EVERY_SECONDS = 0.25
SLOW_BODIES = 16
SLOW_BODY_BYTES = 4 * 1024 * 1024  # the SDK's body limit: the largest body it reads whole
SLOW_BODY_BYTE_SECONDS = 0.5
SIGTERM_ROUNDS = 3
SIGTERM_STORE_TIMEOUT = "30"  # past the grace: the waiting call is cut off by the drain
READY_POLL_SECONDS = 0.02
LAG_SLEEP_SECONDS = 0.005
RECOVERY_WAIT_SECONDS = 30.0
CLIENT_TIMEOUT_SECONDS = 60.0
# What the whole phase may take: its windows, six server starts and the database set-up.
BUDGET_SECONDS = 300.0
OWNER, READER, DATABASE = "bad_day_owner", "bad_day_reader", "bad_day"
PROTOCOL_VERSION = "2025-06-18"
# A folder: each stall's replica is sampled with py-spy (when installed) into FOLDER/stall-*.txt.
PROFILE_VARIABLE = "BAD_DAY_PROFILE"

T = TypeVar("T")

# Six-digit ids (`--id-digits 6`): H's rows are inserted by the owner in SQL, under H's
# policy (a records file of 200,000 would take longer to write than to insert).
_HEAVY_SQL = """
INSERT INTO tickets (tenant, id, title, status, title_lower, version)
SELECT 'h', 'TKT-' || lpad(n::text, 6, '0'), 'Login issue ' || n, 'open', 'login issue ' || n, 0
FROM generate_series(1, %s) AS n
"""


def _call(name: str, args: object) -> dict[str, object]:
    params = {"name": name, "arguments": args}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


LIST: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
GET = _call("get_ticket", {"ticket_id": "TKT-000104"})
HEAVY = _call("search_tickets", {"query": "no such words", "limit": 10})
UNKNOWN = _call("delete_ticket", {"ticket_id": "TKT-000104"})
INVALID = _call("get_ticket", {"ticket_id": 104})
NO_STORE = (("tools/list", LIST), ("unknown tool", UNKNOWN), ("invalid arguments", INVALID))
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


def _records() -> dict[str, dict[str, str]]:
    records = {}
    for n in range(LIGHT_TICKETS):
        ticket_id = f"TKT-{n:0{ID_DIGITS}d}"
        status = "open" if n % 2 else "closed"
        records[f"q:{ticket_id}"] = {"id": ticket_id, "title": f"login {n}", "status": status}
    return records


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

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def answer_code(status: int, body: bytes) -> str:
    """Name what a JSON-RPC answer was: ok, a tool failure's code, a protocol error, a status.

    200 {"result": {"structuredContent": {"ok": false, "code": "unavailable"}}} -> "unavailable";
    200 {"error": {"code": -32602}} -> "-32602"; a 429 -> "http 429".
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


def ms(times: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank q-th percentile of `times` (seconds) in milliseconds."""
    value = percentile(sorted(times), q)
    return None if value is None else round(value * 1000, 1)


def ratio(after: float | None, before: float | None) -> float | None:
    """Return after / before, or None when either is missing."""
    if after is None or not before:
        return None
    return round(after / before, 2)


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


@contextmanager
def elsewhere(
    jobs: Sequence[Callable[[threading.Event], object]], collect: Callable[[], T]
) -> Iterator[list[T]]:
    """Run the jobs on threads of a forked process until the block ends; yield [collect()].

    Another tenant's flood runs in a process of its own: beside the victim's clients, its
    threads would make them wait for this process's GIL (5 ms a switch), a delay that is
    the load generator's, not the server's.
    """
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)

    def child() -> None:
        for number in SIGNALS:  # the supervisor's handlers are the parent's
            signal.signal(number, signal.SIG_DFL)
        with running(jobs):
            stop.wait()
        sender.send(collect())

    process = context.Process(target=child, daemon=True)
    process.start()
    got: list[T] = []
    try:
        yield got
    finally:
        stop.set()
        if receiver.poll(CLIENT_TIMEOUT_SECONDS):
            got.append(receiver.recv())
        process.join(timeout=CLIENT_TIMEOUT_SECONDS)
        if process.is_alive():
            process.kill()
        if not got:
            raise RuntimeError("the load process beside the victim sent no figures")


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


class Server:
    """One `serve http` process of this phase, started and stopped through the supervisor."""

    def __init__(self, supervisor: Supervisor, jwks: Path, name: str, *args: str) -> None:
        self.log = supervisor.folder / f"bad-day-{name}.log"
        self._supervisor = supervisor
        command = serve_http_command(
            jwks, "--audit-log", str(self.log.with_suffix(".audit")), *args
        )
        self.process = supervisor.start(command, log=self.log)
        self.url = wait_for_address(self.log, self.process)
        self.base = self.url.removesuffix("/mcp")
        if wait_for(lambda: get(self.base, "/readyz") == 200, RECOVERY_WAIT_SECONDS) is None:
            raise RuntimeError(f"the {name} replica never became ready")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL)."""
        self._supervisor.stop(self.process)


class BadDay:
    """The phase's database, replicas and figures (see the module docstring)."""

    def __init__(
        self, supervisor: Supervisor, cluster: Cluster, issuer: Issuer, jwks: Path
    ) -> None:
        self.supervisor = supervisor
        self.cluster = cluster
        self.issuer = issuer
        self.jwks = jwks
        self.figures: Figures = {}
        self.reader = ""
        self.superuser = ""

    def run(self, figures: Figures | None = None) -> Figures:
        """Run every part in order, filling `figures` as it goes; return them."""
        if figures is not None:
            self.figures = figures
        self.setup()
        say = self.say
        server = self.server("stateless", "--stateless", *NO_RATE_LIMITS)
        try:
            say("noisy neighbour")
            self.noisy_neighbour(server)
            say("slow bodies")
            self.slow_bodies(server)
            say("table locked")
            self.stall(server, "lock")
            say("database stopped")
            self.stall(server, "stop")
        finally:
            server.stop()
        say("sessions and bursts")
        self.sessions()
        say("SIGTERM during a stall")
        self.sigterm()
        return self.figures

    def say(self, message: str) -> None:
        """Print a progress line on stderr."""
        print(f"load: bad day: {message}", file=sys.stderr, flush=True)

    def token(self, tenant: str, subject: str) -> str:
        """Return a valid token for `tenant` with the read scope."""
        return self.issuer.token(tenant, subject, seconds=3 * 3600)

    def server(self, name: str, *args: str) -> Server:
        """Start a replica on the phase's database."""
        store = ("--postgres", self.reader, "--id-digits", str(ID_DIGITS))
        return Server(self.supervisor, self.jwks, name, *store, *args)

    def setup(self) -> None:
        """Create the phase's roles and database: Q's 1,000 tickets and H's HEAVY_TICKETS."""
        cluster = self.cluster
        for statement in (
            f"CREATE ROLE {OWNER} LOGIN",
            f"CREATE ROLE {READER} LOGIN",
            f"CREATE DATABASE {DATABASE} OWNER {OWNER}",
        ):
            cluster.sql(statement)
        started = time.monotonic()
        with psycopg.connect(cluster.dsn(OWNER, DATABASE)) as connection:
            import_records(connection, _records(), grant_to=READER, id_format=IdFormat(ID_DIGITS))
            connection.execute("SELECT set_config('app.tenant', 'h', false)")
            connection.execute(_HEAVY_SQL, (HEAVY_TICKETS,))
            connection.commit()
            connection.execute("ANALYZE tickets")
        self.reader = cluster.dsn(READER, DATABASE)
        self.superuser = cluster.dsn("postgres", DATABASE)
        self.figures["setup_seconds"] = round(time.monotonic() - started, 1)

    # --- 1 and 2: a noisy neighbour, slow bodies ------------------------------------------

    def _q_loops(self, server: Server, name: str) -> list[Loop]:
        tokens = [self.token("q", f"{name}-{n}") for n in range(CLIENTS)]
        return [Loop(Client(server.url, token), GET) for token in tokens]

    def noisy_neighbour(self, server: Server) -> None:
        """Q's p50 and p99 with H's no-match searches beside, against Q alone."""
        run_loops(self._q_loops(server, "warm"), WARMUP_SECONDS)
        alone = self._q_loops(server, "alone")
        with lagging() as lag_alone, self.cores_busy(server) as cores_alone:
            run_loops(alone, PHASE_SECONDS)
        with_h = self._q_loops(server, "with-h")
        heavy = [Loop(Client(server.url, self.token("h", f"h-{n}")), HEAVY) for n in range(CLIENTS)]
        searching = elsewhere([loop.run for loop in heavy], lambda: _results(heavy))
        with searching as h, lagging() as lag_with_h, self.cores_busy(server) as cores_with_h:
            run_loops(with_h, PHASE_SECONDS)
        h_times, h_codes = h[0]
        q_alone = [t for loop in alone for t in loop.times]
        q_with = [t for loop in with_h for t in loop.times]
        self.figures["noisy_neighbour"] = {
            "q_alone": _summary(q_alone, PHASE_SECONDS),
            "q_with_h": _summary(q_with, PHASE_SECONDS),
            "h": _summary(h_times, PHASE_SECONDS),
            "p50_ratio": ratio(ms(q_with, 50), ms(q_alone, 50)),
            "p99_ratio": ratio(ms(q_with, 99), ms(q_alone, 99)),
            "machine_lag_ms": {"alone": lag_alone[0], "with_h": lag_with_h[0]},
            "cores_busy": {"alone": cores_alone, "with_h": cores_with_h},
            "q_codes": _codes(alone + with_h),
            "h_codes": h_codes,
        }

    @contextmanager
    def cores_busy(self, server: Server) -> Iterator[Figures]:
        """Measure where the machine's CPU goes meanwhile, in cores busy: PostgreSQL (the
        cluster and every backend), the replica, and the whole machine (the load generator
        and anything else on it included), filled in when the block ends."""
        cores: Figures = {}
        started = time.monotonic()
        postgres, replica = self.cluster.cpu_seconds(), cpu_seconds(server.process.pid)
        busy, _ = machine_cpu()
        yield cores
        seconds = time.monotonic() - started
        cores["postgres"] = round((self.cluster.cpu_seconds() - postgres) / seconds, 2)
        cores["replica"] = round((cpu_seconds(server.process.pid) - replica) / seconds, 2)
        cores["machine"] = round((machine_cpu()[0] - busy) / seconds, 2)
        cores["of"] = os.cpu_count()

    def slow_bodies(self, server: Server) -> None:
        """Q's p50 while SLOW_BODIES connections trickle a body, and when they were cut off."""
        alone = self._q_loops(server, "slow-alone")
        run_loops(alone, SESSION_PHASE_SECONDS)
        host, port = server.base.removeprefix("http://").rsplit(":", 1)
        token = self.token("q", "slow")
        cut: list[float | None] = [None] * SLOW_BODIES

        def trickler(slot: int) -> Callable[[threading.Event], None]:
            def trickle(stop: threading.Event) -> None:
                cut[slot] = _trickle_body(host, int(port), token, stop)

            return trickle

        beside = self._q_loops(server, "slow-beside")
        tricklers = [trickler(slot) for slot in range(SLOW_BODIES)]
        with elsewhere(tricklers, lambda: list(cut)) as cut_at:
            run_loops(beside, SESSION_PHASE_SECONDS)
        cut = cut_at[0]
        q_alone = [t for loop in alone for t in loop.times]
        q_beside = [t for loop in beside for t in loop.times]
        closed = sorted(seconds for seconds in cut if seconds is not None)
        self.figures["slow_bodies"] = {
            "connections": SLOW_BODIES,
            "byte_every_s": SLOW_BODY_BYTE_SECONDS,
            "window_s": SESSION_PHASE_SECONDS,
            "q_alone": _summary(q_alone, SESSION_PHASE_SECONDS),
            "q_beside": _summary(q_beside, SESSION_PHASE_SECONDS),
            "p50_ratio": ratio(ms(q_beside, 50), ms(q_alone, 50)),
            "cut_off": len(closed),
            "cut_off_after_s": None if not closed else round(statistics.median(closed), 2),
            "q_codes": _codes(alone + beside),
        }

    # --- 3: the table locked, the database stopped -----------------------------------------

    def stall(self, server: Server, kind: str) -> None:
        """Calls that need no store, store calls and /readyz while the store stalls."""
        token = self.token("q", f"stall-{kind}")
        idle = [Loop(Client(server.url, token), message) for _, message in NO_STORE]
        _round_robin(idle, IDLE_BASELINE_SECONDS)
        no_store = [Loop(Client(server.url, token), message) for _, message in NO_STORE]
        getters = [Loop(Client(server.url, token), GET) for _ in range(2)]
        flips: list[float] = []
        with running([loop.run for loop in getters]):
            time.sleep(0.5)  # both getters answered from the store, before the stall
            profiler = self._profile(server, f"stall-{kind}")
            with self._stalled(kind) as began:

                def watch() -> None:
                    if _until_status(server.base, 503, STALL_SECONDS) is not None:
                        flips.append(time.perf_counter() - began[0])

                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                with lagging() as lagged:
                    _round_robin(no_store, STALL_SECONDS - (time.perf_counter() - began[0]))
                watcher.join()
                stall_ended = time.perf_counter()
            back = _until_status(server.base, 200, RECOVERY_WAIT_SECONDS)
            if profiler is not None:
                profiler.wait(timeout=CLIENT_TIMEOUT_SECONDS)
        during = [
            (sent, seconds, code)
            for loop in getters
            for sent, seconds, code in loop.answers
            if sent >= began[0] and sent + seconds <= stall_ended
        ]
        failed = [seconds for _, seconds, code in during if code == "unavailable"]
        idle_times = [t for loop in idle for t in loop.times]
        stalled_times = [t for loop in no_store for t in loop.times]
        figures: Figures = {
            "seconds": round(stall_ended - began[0], 1),
            "no_store_idle": _summary(idle_times, IDLE_BASELINE_SECONDS),
            "no_store_stalled": _summary(stalled_times, STALL_SECONDS),
            "machine_lag_ms": lagged[0],
            "no_store_by_call": {
                label: _summary(loop.times, STALL_SECONDS)
                for (label, _), loop in zip(NO_STORE, no_store, strict=True)
            },
            "no_store_codes": _codes(idle + no_store),
            "store_calls_failed": len(failed),
            "store_fail_median_s": None if not failed else round(statistics.median(failed), 2),
            "store_fail_max_s": None if not failed else round(max(failed), 2),
            "store_codes": dict(sorted(Counter(code for _, _, code in during).items())),
            "getter_codes": _codes(getters),
            "readyz_503_after_s": None if not flips else round(flips[0], 2),
            "readyz_200_after_s": None if back is None else round(back, 2),
        }
        self.figures[f"stall_{kind}"] = figures

    def _profile(self, server: Server, name: str) -> subprocess.Popen[bytes] | None:
        """With PROFILE_VARIABLE set, sample the replica with py-spy for the stall's length."""
        folder = os.environ.get(PROFILE_VARIABLE)
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not folder or not Path(spy).is_file():
            return None
        Path(folder).mkdir(parents=True, exist_ok=True)
        output = Path(folder).resolve() / f"{name}.txt"
        command = [spy, "record", "--pid", str(server.process.pid), "--duration"]
        command += [str(int(STALL_SECONDS)), "--rate", "200", "--format", "raw", "--threads"]
        command += ["--nonblocking", "--output", str(output)]
        self.say(f"profiling the replica into {output}")
        return self.supervisor.start(command, log=self.supervisor.folder / f"{name}.py-spy.log")

    @contextmanager
    def _stalled(self, kind: str) -> Iterator[list[float]]:
        """Lock the table or stop the cluster; yield [when it began]; undo it at the end."""
        if kind == "lock":
            with psycopg.connect(self.superuser) as lock:
                lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
                try:
                    yield [time.perf_counter()]
                finally:
                    lock.rollback()
            return
        self.cluster.stop()
        try:
            yield [time.perf_counter()]
        finally:
            self.cluster.start()

    # --- 4: one token's session flood and burst --------------------------------------------

    def sessions(self) -> None:
        """Q's p50 and new sessions while one token floods sessions, then bursts calls."""
        server = self.server("sessions")  # sessions on, the default rate limits
        try:
            rss_before = rss_kib(server.process.pid)
            alone = self._paced(server, "alone")
            with lagging() as lag_alone:
                run_loops(alone, SESSION_PHASE_SECONDS)
            flood = _Flood(server.url, self.token("f", "flood"))
            beside_flood = self._paced(server, "flood")
            newcomers = _Newcomers(server.url, self.token, "newcomer")
            jobs = [loop.run for loop in beside_flood] + [newcomers.run]
            flooding = elsewhere([flood.run] * CLIENTS, flood.figures)
            with flooding as flooded, running(jobs), lagging() as lag_flood:
                time.sleep(SESSION_PHASE_SECONDS)
            opened, refused, first_refusal = flooded[0]
            rss_after = rss_kib(server.process.pid)
            burst_session = _open_session(Client(server.url, self.token("b", "burst")))
            burst = [
                Loop(_session_client(server.url, self.token("b", "burst"), burst_session), GET)
                for _ in range(CLIENTS)
            ]
            beside_burst = self._paced(server, "burst")
            burst_newcomers = _Newcomers(server.url, self.token, "burst-newcomer")
            jobs = [loop.run for loop in beside_burst] + [burst_newcomers.run]
            bursting = elsewhere([loop.run for loop in burst], lambda: _results(burst))
            with bursting as burst_results, running(jobs), lagging() as lag_burst:
                time.sleep(SESSION_PHASE_SECONDS)
            _, burst_codes = burst_results[0]
        finally:
            server.stop()
        q_alone = [t for loop in alone for t in loop.times]
        q_flood = [t for loop in beside_flood for t in loop.times]
        q_burst = [t for loop in beside_burst for t in loop.times]
        self.figures["sessions"] = {
            "q_alone": _summary(q_alone, SESSION_PHASE_SECONDS),
            "q_during_flood": _summary(q_flood, SESSION_PHASE_SECONDS),
            "q_during_burst": _summary(q_burst, SESSION_PHASE_SECONDS),
            "flood_p50_ratio": ratio(ms(q_flood, 50), ms(q_alone, 50)),
            "burst_p50_ratio": ratio(ms(q_burst, 50), ms(q_alone, 50)),
            "machine_lag_ms": {"alone": lag_alone[0], "flood": lag_flood[0], "burst": lag_burst[0]},
            "flood_opened": opened,
            "flood_refused": refused,
            "flood_first_refusal_s": first_refusal,
            "newcomer_sessions": newcomers.opened + burst_newcomers.opened,
            "newcomer_failures": dict(sorted((newcomers.failed + burst_newcomers.failed).items())),
            "burst_codes": burst_codes,
            "burst_answered_per_s": round(
                sum(n for code, n in burst_codes.items() if not code.startswith("http "))
                / SESSION_PHASE_SECONDS,
                1,
            ),
            "q_codes": _codes(alone + beside_flood + beside_burst),
            "rss_mib_before_after_flood": [
                None if kib is None else round(kib / 1024, 1) for kib in (rss_before, rss_after)
            ],
        }

    def _paced(self, server: Server, name: str) -> list[Loop]:
        loops = []
        for n in range(2):
            client = Client(server.url, self.token("q", f"paced-{name}-{n}"))
            session = _open_session(client)
            loops.append(Loop(_with_session(client, session), GET, pace=PACED_CALLS_PER_SECOND))
        return loops

    # --- 5: SIGTERM during a stall ----------------------------------------------------------

    def sigterm(self) -> None:
        """SIGTERM with one call waiting on a locked table: exit time and status, the answer."""
        rounds = [self._sigterm_round(number) for number in range(SIGTERM_ROUNDS)]
        exits = [float(r["exit_s"]) for r in rounds]
        self.figures["sigterm"] = {
            "rounds": rounds,
            "exit_median_s": statistics.median(exits),
            "exit_max_s": max(exits),
        }

    def _sigterm_round(self, number: int) -> Figures:
        server = self.server(
            f"sigterm-{number}", "--stateless", "--store-timeout", SIGTERM_STORE_TIMEOUT
        )
        client = Client(server.url, self.token("q", f"drain-{number}"))
        one: list[tuple[int, bytes]] = []

        def wait_on_the_lock() -> None:
            status, body, _, _ = client.post(GET)
            one.append((status, body))

        try:
            with psycopg.connect(self.superuser) as lock:
                lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
                thread = threading.Thread(target=wait_on_the_lock, daemon=True)
                thread.start()
                time.sleep(0.5)  # the call waits on the lock
                started = time.perf_counter()
                server.process.send_signal(signal.SIGTERM)
                status = server.process.wait(timeout=CLIENT_TIMEOUT_SECONDS)
                exited = time.perf_counter() - started
                thread.join(timeout=CLIENT_TIMEOUT_SECONDS)
                lock.rollback()
        finally:
            server.stop()
        answer = answer_code(*one[0]) if one else "no answer"
        return {"exit_s": round(exited, 2), "status": status, "answer": answer}


def _summary(times: Sequence[float], seconds: float) -> Figures:
    return {
        "calls": len(times),
        "calls_per_s": round(len(times) / seconds, 1),
        "p50_ms": ms(times, 50),
        "p99_ms": ms(times, 99),
        "max_ms": None if not times else round(max(times) * 1000, 1),
    }


def lagging() -> contextlib.AbstractContextManager[list[Figures]]:
    """Measure the machine's scheduling delay (`_Lag`) in a process of its own meanwhile."""
    lag = _Lag()
    return elsewhere([lag.run], lag.figures)


class _Lag:
    """How late a process that only sleeps LAG_SLEEP_SECONDS at a time wakes: the machine's
    scheduling delay, the floor under any latency measured beside it."""

    def __init__(self) -> None:
        self.late: list[float] = []

    def run(self, stop: threading.Event) -> None:
        """Sleep and measure the oversleep until stopped."""
        while not stop.is_set():
            started = time.perf_counter()
            time.sleep(LAG_SLEEP_SECONDS)
            self.late.append(time.perf_counter() - started - LAG_SLEEP_SECONDS)

    def figures(self) -> Figures:
        """Return the oversleep's p50, p99 and max in milliseconds."""
        late = self.late
        return {"p50": ms(late, 50), "p99": ms(late, 99), "max": ms(late, 100)}


def _results(loops: Sequence[Loop]) -> tuple[list[float], dict[str, int]]:
    """Return the loops' answer times and codes together (what a forked process sends back)."""
    return [t for loop in loops for t in loop.times], _codes(loops)


def _codes(loops: Sequence[Loop]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for loop in loops:
        total += loop.codes
    return dict(sorted(total.items()))


def _round_robin(loops: Sequence[Loop], seconds: float) -> None:
    """One client's calls, each loop's message in turn, for `seconds` (a closed loop)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        for loop in loops:
            status, body, taken, _ = loop.client.post(loop.message)
            code = answer_code(status, body)
            loop.codes[code] += 1
            if status == 200:
                loop.times.append(taken)


def _until_status(base: str, status: int, timeout: float) -> float | None:
    return wait_for(lambda: get(base, "/readyz") == status, timeout)


def _trickle_body(host: str, port: int, token: str, stop: threading.Event) -> float | None:
    """Send a POST's headers, then its body a byte at a time; return when the server cut it."""
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=CLIENT_TIMEOUT_SECONDS) as connection:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {SLOW_BODY_BYTES}\r\n\r\n"
        )
        try:
            connection.sendall(head.encode())
            connection.setblocking(False)
            while not stop.wait(SLOW_BODY_BYTE_SECONDS):
                try:
                    if connection.recv(65536) == b"":
                        return time.perf_counter() - started  # closed by the server
                except BlockingIOError:
                    pass
                connection.send(b" ")
        except OSError:
            return time.perf_counter() - started
    return None


def _with_session(client: Client, session: str) -> Client:
    client.headers["Mcp-Session-Id"] = session
    client.headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    return client


def _session_client(url: str, token: str, session: str) -> Client:
    return _with_session(Client(url, token), session)


def _open_session(client: Client) -> str:
    """Initialize a session on `client`'s connection; return its id (RuntimeError if refused)."""
    status, _, _, headers = client.post(INITIALIZE)
    session = headers.get("mcp-session-id")
    if status != 200 or session is None:
        raise RuntimeError(f"a session could not be opened: HTTP {status}")
    client.headers["Mcp-Session-Id"] = session
    client.headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    client.post(INITIALIZED)
    return session


class _Flood:
    """One token opening sessions (initialize only) as fast as it can, on each thread's link."""

    def __init__(self, url: str, token: str) -> None:
        self._url = url
        self._token = token
        self._lock = threading.Lock()
        self.opened = 0
        self.refused: Counter[str] = Counter()
        self._started = time.perf_counter()
        self._first_refusal: float | None = None

    def run(self, stop: threading.Event) -> None:
        """Open sessions until stopped; count what was opened and what refused, and why."""
        client = Client(self._url, self._token)
        while not stop.is_set():
            status, body, _, _ = client.post(INITIALIZE)
            with self._lock:
                if status == 200:
                    self.opened += 1
                    continue
                if self._first_refusal is None:
                    self._first_refusal = time.perf_counter() - self._started
                self.refused[_refusal(status, body)] += 1

    def figures(self) -> tuple[int, dict[str, int], float | None]:
        """Return the sessions opened, the refusals by kind, and the seconds to the first one."""
        first = None if self._first_refusal is None else round(self._first_refusal, 2)
        return self.opened, dict(sorted(self.refused.items())), first


def _refusal(status: int, body: bytes) -> str:
    """Name a refusal: the session cap, a rate limit, or the status."""
    text = body.decode(errors="replace")
    if "sessions" in text:
        return f"http {status} session cap"
    if "too many calls" in text:
        return f"http {status} rate limit"
    return f"http {status}"


class _Newcomers:
    """Q's new users, one new session every NEWCOMER_EVERY_SECONDS, each making one call."""

    def __init__(self, url: str, token: Callable[[str, str], str], name: str) -> None:
        self._url = url
        self._token = token
        self._name = name
        self.opened = 0
        self.failed: Counter[str] = Counter()

    def run(self, stop: threading.Event) -> None:
        """Open a session and call once on it, every NEWCOMER_EVERY_SECONDS, until stopped."""
        number = 0
        while not stop.wait(NEWCOMER_EVERY_SECONDS):
            number += 1
            client = Client(self._url, self._token("q", f"{self._name}-{number}"))
            try:
                _open_session(client)
            except RuntimeError as error:
                self.failed[str(error)] += 1
                continue
            status, body, _, _ = client.post(GET)
            code = answer_code(status, body)
            if code == "ok":
                self.opened += 1
            else:
                self.failed[code] += 1
            client.close()


# --- the phase alone ---------------------------------------------------------------------


def run_alone(report: Path | None = None) -> int:
    """Run the phase on a cluster of its own; print its table; 0 if nothing went wrong."""
    loadavg = Path("/proc/loadavg").read_text().split()[:3]
    figures: Figures = {"loadavg_at_start": loadavg}
    with Supervisor(BUDGET_SECONDS + 120.0, prefix="ticket-bad-day-") as supervisor:
        issuer = Issuer()
        jwks = issuer.write_jwks(supervisor.folder / "jwks.json")
        cluster = Cluster(supervisor)
        cluster.create()
        cluster.start()
        BadDay(supervisor, cluster, issuer, jwks).run(figures)
    figures["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    print(render(figures))
    found = problems(figures)
    print("problems: " + ("; ".join(found) if found else "none"))
    print(
        f"load average at start {' '.join(loadavg)}, at end {' '.join(figures['loadavg_at_end'])}"
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 1 if found else 0
