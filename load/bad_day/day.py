"""The bad-day phase of `make load`: one replica's noisy neighbour, stalls, floods and SIGTERM.

Issue 19's point 11, measured on the run's PostgreSQL (a database of its own, `bad_day`,
holding tenant Q's 1,000 tickets and tenant H's HEAVY_TICKETS) with plain HTTP/1.1
clients on kept-alive connections (the SDK client costs more CPU than the server), each
with its own token:

1. noisy neighbour: Q's 4 clients call `get_ticket` alone, then while H's 4 clients
   search, two for words no title has and two for a word in three of H's 200,000 titles
   (testkit/titles.py; both answered through H's title index, where each once read all of
   H's rows); Q's p50 and p99 with H / alone;
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
`load/bad_day/report.py`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from load.bad_day.report import Figures
from load.bad_day.rpc import LIST, call, get, wait_for
from load.cluster import Cluster
from load.supervise import Supervisor, say
from testkit import titles
from testkit.server import serve_http_command, wait_for_address
from testkit.tokens import Issuer
from ticket_tools.serve.bodies import MAX_BODY_BYTES
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.records import StoredRow

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
SLOW_BODY_BYTES = MAX_BODY_BYTES  # the largest body the server reads (past it: 413 at once)
SLOW_BODY_BYTE_SECONDS = 0.5
SIGTERM_ROUNDS = 3
SIGTERM_STORE_TIMEOUT = "30"  # past the grace: the waiting call is cut off by the drain
RECOVERY_WAIT_SECONDS = 30.0
# What the whole phase may take: its windows, six server starts and the database set-up.
BUDGET_SECONDS = 300.0
OWNER, READER, DATABASE = "bad_day_owner", "bad_day_reader", "bad_day"
# A folder: each stall's replica is sampled with py-spy (when installed) into FOLDER/stall-*.txt.
PROFILE_VARIABLE = "BAD_DAY_PROFILE"

GET = call("get_ticket", {"ticket_id": "TKT-000104"})
HEAVY = call("search_tickets", {"query": "no such words", "limit": 10})
RARE = call("search_tickets", {"query": titles.RARE, "limit": 10})
UNKNOWN = call("delete_ticket", {"ticket_id": "TKT-000104"})
INVALID = call("get_ticket", {"ticket_id": 104})
NO_STORE = (("tools/list", LIST), ("unknown tool", UNKNOWN), ("invalid arguments", INVALID))


def _rows() -> Iterator[StoredRow]:
    """H's HEAVY_TICKETS (testkit/titles.py's, with their planted words), then Q's, by key."""
    for ticket_id, title, status in titles.tickets(HEAVY_TICKETS, width=ID_DIGITS, seed="h"):
        yield StoredRow("h", ticket_id, title, status)
    for n in range(LIGHT_TICKETS):
        ticket_id = f"TKT-{n:0{ID_DIGITS}d}"
        status = "open" if n % 2 else "closed"
        yield StoredRow("q", ticket_id, f"login {n}", status)


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


class Day:
    """The phase's database, replicas and figures, shared by its parts."""

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

    def say(self, message: str) -> None:
        """Print a progress line on stderr."""
        say(f"bad day: {message}")

    def token(self, tenant: str, subject: str) -> str:
        """Return a valid token for `tenant` with the read scope."""
        return self.issuer.token(tenant, subject, seconds=3 * 3600)

    def server(self, name: str, *args: str) -> Server:
        """Start a replica on the phase's database."""
        store = ("--postgres", self.reader, "--id-digits", str(ID_DIGITS))
        return Server(self.supervisor, self.jwks, name, *store, *args)

    def setup(self) -> None:
        """Create the phase's roles and database: Q's 1,000 tickets and H's HEAVY_TICKETS.

        Imported as `import` does (a stream of rows, no file): H gets its title index.
        """
        cluster = self.cluster
        cluster.create_database(OWNER, READER, DATABASE)
        started = time.monotonic()
        with psycopg.connect(cluster.dsn(OWNER, DATABASE)) as connection:
            import_records(connection, _rows(), grant_to=READER, id_format=IdFormat(ID_DIGITS))
        self.reader = cluster.dsn(READER, DATABASE)
        self.superuser = cluster.dsn("postgres", DATABASE)
        self.figures["setup_seconds"] = round(time.monotonic() - started, 1)
