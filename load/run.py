"""`make load`: the phases, in order, within one time budget; the table and the JSON report.

    PYTHONPATH=. .venv/bin/python -m load [--soak-seconds 600] [--store sqlite]

Setup: a records file of TENANTS x TICKETS_PER_TENANT generated tickets, imported into a
throwaway PostgreSQL (or an SQLite file with --store sqlite), and two
`serve http --stateless` replicas on it. Then: a warm-up; 8, 32 and 64 concurrent
clients; the loss of one replica; a database restart (PostgreSQL only); the soak with each
replica's RSS sampled; then the bad day of one replica (PostgreSQL only, load/bad_day.py).
Each phase's calls are checked after it ends, outside its timing.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from load import bad_day, bad_day_report
from load.churn import CHURN_CLIENTS, CHURN_SECONDS, ChurnFeed
from load.churn import check_phase as check_churn_phase
from load.client import Client, run_client
from load.cluster import Cluster
from load.records import TENANTS, TICKETS_PER_TENANT, tenant_name, write_records_file
from load.replica import Replica
from load.report import (
    PhaseResult,
    Usage,
    check_phase,
    first_pages_ms,
    phase_json,
    problems,
    render_table,
    rss_growth,
    write_report,
)
from load.supervise import Supervisor, machine_cpu
from load.workload import ClientPlan
from testkit.tokens import Issuer

REPORT_PATH = Path("build/load-report.json")
CLIENT_COUNTS = (1, 8, 32, 64)  # 1: the latency floor; 8, 32, 64: the loads
FAULT_CLIENTS = 32
SOAK_CLIENTS = 32
DEFAULT_PHASE_SECONDS = 20.0
DEFAULT_SOAK_SECONDS = 120.0
WARMUP_SECONDS = 5.0
WARMUP_CLIENTS = 8
FAULT_PHASE_SECONDS = 30.0
KILL_AT_SECONDS = 10.0
DB_STOP_AT_SECONDS = 8.0
DB_DOWN_SECONDS = 4.0
RSS_EVERY_SECONDS = 5.0
SOAK_BASELINE_SECONDS = 60.0  # "growth from minute 1 to the end"
# Setup (records, import, replicas) and the checks after each phase, on a busy 2-core machine.
SETUP_ALLOWANCE_SECONDS = 180.0
CHECK_ALLOWANCE_SECONDS = 10.0
TOKEN_SECONDS = 3 * 3600  # longer than any run's budget
NO_SCOPE_EVERY = 16  # client 15, 31, ... of a phase holds a token without the read scope
OWNER, READER, DATABASE = "tickets_owner", "tickets_reader", "tickets"


def main(argv: Sequence[str] | None = None) -> int:
    """Run every phase within the budget; print the table; write the report; 0 if all held."""
    options = _parser().parse_args(argv)
    budget = options.budget_seconds or default_budget(options)
    started = time.monotonic()
    report: dict[str, Any] = {
        "command": "make load " + " ".join(sys.argv[1:] if argv is None else argv),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "loadavg_at_start": os.getloadavg()},
        "budget_seconds": budget,
        "interrupted": None,
    }
    phases: list[PhaseResult] = []
    supervisor = Supervisor(budget)
    try:
        with supervisor:
            Run(options, supervisor, report, phases).all()
    except BaseException as error:
        if supervisor.stop_reason is not None:
            # A signal or the budget (raised here, or wrapped by an event loop it hit).
            report["interrupted"] = supervisor.stop_reason
        elif isinstance(error, Exception):  # the run's own failure: still report, exit 1
            traceback.print_exc()
            report["interrupted"] = f"failed: {type(error).__name__}: {error}"
        else:
            raise
        _say(f"stopped: {report['interrupted']}; every process and the cluster stopped")
    leftovers = supervisor.leftovers()
    found = problems(phases, leftovers)
    if report["interrupted"]:
        found.append(f"interrupted: {report['interrupted']}")
    report |= {
        "elapsed_seconds": round(time.monotonic() - started, 1),
        "phases": [phase_json(phase) for phase in phases],
        "leftover_pids": leftovers,
        "problems": found,
    }
    found += bad_day_report.problems(report.get("bad_day"))
    print(render_table(phases))
    if report.get("bad_day"):
        print("\n" + bad_day_report.render(report["bad_day"]))
    print("problems: " + ("; ".join(found) if found else "none"))
    write_report(options.report, report)
    print(f"report: {options.report}")
    return 1 if found else 0


def default_budget(options: argparse.Namespace) -> float:
    """Return the whole run's time budget: setup, every phase, and the checks after each."""
    phases = [WARMUP_SECONDS, FAULT_PHASE_SECONDS, FAULT_PHASE_SECONDS, options.soak_seconds]
    phases.append(CHURN_SECONDS)
    phases += [options.phase_seconds] * len(options.clients)
    total = SETUP_ALLOWANCE_SECONDS + sum(phases) + CHECK_ALLOWANCE_SECONDS * len(phases)
    return float(total + (bad_day.BUDGET_SECONDS if options.store == "postgres" else 0))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="make load", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=DEFAULT_SOAK_SECONDS,
        help=f"length of the soak at {SOAK_CLIENTS} clients (default {DEFAULT_SOAK_SECONDS:.0f})",
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=DEFAULT_PHASE_SECONDS,
        help=f"length of each load phase (default {DEFAULT_PHASE_SECONDS:.0f})",
    )
    parser.add_argument(
        "--clients",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=CLIENT_COUNTS,
        help="the load phases' client counts, comma-separated (default 1,8,32,64)",
    )
    parser.add_argument("--tenants", type=int, default=TENANTS, help="tenants in the store")
    parser.add_argument(
        "--tickets-per-tenant", type=int, default=TICKETS_PER_TENANT, help="at most 1000"
    )
    parser.add_argument(
        "--store",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="what the replicas read: one PostgreSQL (default) or one SQLite file",
    )
    parser.add_argument("--seed", type=int, default=14, help="the workload's random seed")
    parser.add_argument(
        "--budget-seconds", type=float, help="hard limit for the whole run (default: computed)"
    )
    parser.add_argument("--report", type=Path, default=REPORT_PATH, help="the JSON report")
    return parser


def _say(message: str) -> None:
    print(f"load: {message}", file=sys.stderr, flush=True)


class Run:
    """The run's services and phases."""

    def __init__(
        self,
        options: argparse.Namespace,
        supervisor: Supervisor,
        report: dict[str, Any],
        phases: list[PhaseResult],
    ) -> None:
        self.options = options
        self.supervisor = supervisor
        self.report = report
        self.phases = phases
        self.issuer = Issuer()
        self.cluster: Cluster | None = None
        self.replicas: list[Replica] = []
        self.writer_args: list[str] = []
        """The store option `ticket-tools apply` writes through (as the owner)."""

    def all(self) -> None:
        """Set up, then run every phase in order."""
        self.setup()
        clients = self.options.clients
        self.phase("warm-up", WARMUP_CLIENTS, WARMUP_SECONDS, keep=False)
        for count in clients:
            self.phase(f"load-{count}", count, self.options.phase_seconds)
        self.phase("replica-loss", FAULT_CLIENTS, FAULT_PHASE_SECONDS, fault=self.lose_replica)
        self.restart_replica(1)
        if self.cluster is not None:
            self.phase("db-restart", FAULT_CLIENTS, FAULT_PHASE_SECONDS, fault=self.restart_db)
        self.phase("soak", SOAK_CLIENTS, self.options.soak_seconds, fault=self.soak_figures)
        # After the others: it changes the store (load/churn.py), which they check as imported.
        churn = ChurnFeed(self.writer_args, self.options.tickets_per_tenant, str(self.options.seed))
        self.phase("churn", CHURN_CLIENTS, CHURN_SECONDS, fault=churn, check=check_churn_phase)
        if self.cluster is not None:  # on a database of its own, one replica at a time
            self.bad_day(self.cluster)

    def setup(self) -> None:
        """Write the records, import them, start the replicas."""
        folder = self.supervisor.folder
        options = self.options
        jwks = folder / "jwks.json"
        self.issuer.write_jwks(jwks)
        started = time.monotonic()
        records = folder / "records.json"
        count = write_records_file(records, options.tenants, options.tickets_per_tenant)
        generated = time.monotonic()
        _say(f"{count} tickets generated in {generated - started:.1f} s; importing")
        if options.store == "postgres":
            cluster = self.cluster = Cluster(self.supervisor)
            cluster.create()
            cluster.start()
            for statement in (
                f"CREATE ROLE {OWNER} LOGIN",
                f"CREATE ROLE {READER} LOGIN",
                f"CREATE DATABASE {DATABASE} OWNER {OWNER}",
            ):
                cluster.sql(statement)
            target = ["--postgres", cluster.dsn(OWNER, DATABASE), "--grant-to", READER]
            store_args = ["--postgres", cluster.dsn(READER, DATABASE)]
        else:
            database = folder / "tickets.sqlite"
            target = ["--db", str(database)]
            store_args = ["--db", str(database)]
        self.writer_args = target[:2]
        imported = time.monotonic()
        self._import(records, target)
        records.unlink()
        done = time.monotonic()
        self.report["store"] = {
            "kind": options.store,
            "tenants": options.tenants,
            "tickets_per_tenant": options.tickets_per_tenant,
            "tickets": count,
            "generate_seconds": round(generated - started, 1),
            "import_seconds": round(done - imported, 1),
        }
        _say(f"imported in {done - imported:.1f} s; starting 2 replicas")
        self.replicas = [Replica(n, self.supervisor, jwks, store_args) for n in (0, 1)]
        for replica in self.replicas:
            replica.start()
        for replica in self.replicas:
            replica.wait_ready()
        _say("replicas ready: " + ", ".join(replica.url for replica in self.replicas))

    def _import(self, records: Path, target: list[str]) -> None:
        args = [sys.executable, "-m", "ticket_tools.cli", "import", str(records), *target]
        log = self.supervisor.folder / "import.log"
        process = self.supervisor.start(args, log=log)
        try:
            status = process.wait(timeout=max(1.0, self.supervisor.remaining()))
        except subprocess.TimeoutExpired:
            status = None
        if status != 0:
            raise RuntimeError(f"the import failed ({status}):\n{log.read_text()[-2000:]}")

    def bad_day(self, cluster: Cluster) -> None:
        """Run the bad-day phase (load/bad_day.py) on a database of its own in the cluster."""
        _say(f"bad day: one replica at a time, for at most {bad_day.BUDGET_SECONDS:.0f} s")
        figures = self.report["bad_day"] = {"loadavg_at_start": os.getloadavg()}
        jwks = self.supervisor.folder / "jwks.json"
        bad_day.BadDay(self.supervisor, cluster, self.issuer, jwks).run(figures)
        figures["loadavg_at_end"] = os.getloadavg()

    def restart_replica(self, number: int) -> None:
        """Start a killed replica again (on a new port) before the next phase."""
        replica = self.replicas[number]
        replica.start()
        replica.wait_ready()
        _say(f"replica {number} back on {replica.url}")

    def phase(
        self,
        name: str,
        count: int,
        seconds: float,
        *,
        fault: Callable[[Phase], Coroutine[Any, Any, None]] | None = None,
        keep: bool = True,
        check: Callable[[str, list[Client], float, int], PhaseResult] = check_phase,
    ) -> None:
        """Run one phase, check it, and keep its result."""
        _say(f"{name}: {count} clients for {seconds:.0f} s")
        phase = Phase(self, name, self._clients(name, count), seconds)
        before = self._usage()
        anyio.run(phase.drive, fault)
        self.supervisor.check()
        after = self._usage()
        result = check(name, phase.clients, phase.elapsed, self.options.tickets_per_tenant)
        result.usage = Usage(*(round(b - a, 2) for a, b in zip(before, after, strict=True)))
        result.fault = phase.figures
        if self.cluster is not None and self.cluster.pid is not None:
            # How many connections the replicas' pools hold open at the end of the phase.
            result.fault["reader_connections"] = int(
                self.cluster.sql(
                    f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{READER}'"  # noqa: S608
                )
            )
        result.rss_kib = phase.rss
        _say(
            f"{name}: {result.calls} calls, {result.calls_per_second:.0f}/s, "
            f"wrong {result.wrong}, cross-tenant {result.cross_tenant}, errors {result.errors}"
        )
        if keep:
            self.phases.append(result)

    def _clients(self, name: str, count: int) -> list[Client]:
        rng = random.Random(f"{self.options.seed}:{name}")  # noqa: S311 - a workload, not a secret
        population = range(self.options.tenants)
        # Distinct tenants while there are enough; a small test store repeats some.
        if count <= len(population):
            tenants = rng.sample(population, count)
        else:
            tenants = rng.choices(population, k=count)
        clients = []
        for number, tenant_index in enumerate(tenants):
            can_read = number % NO_SCOPE_EVERY != NO_SCOPE_EVERY - 1
            token = self.issuer.token(
                tenant_name(tenant_index),
                f"agent-{name}-{number}",
                can_read=can_read,
                seconds=TOKEN_SECONDS,
            )
            plan = ClientPlan(rng.randrange(2**32), tenant_index)
            clients.append(Client(number, tenant_index, can_read, token, plan, replica=number % 2))
        return clients

    def _usage(self) -> tuple[float, float, float, float, float]:
        busy, total = machine_cpu()
        return (
            sum(replica.cpu_seconds() for replica in self.replicas),
            0.0 if self.cluster is None else self.cluster.cpu_seconds(),
            time.process_time(),
            busy,
            total,
        )

    async def lose_replica(self, phase: Phase) -> None:
        """Kill replica 1 mid-phase; its clients move to replica 0 with their cursors."""
        await phase.sleep_until(KILL_AT_SECONDS)
        killed_at = time.monotonic()
        self.replicas[1].kill()
        phase.figures["killed_at_s"] = round(killed_at - phase.started, 1)
        await phase.ended.wait()
        moved = [client for client in phase.clients if client.switches]
        first, slowest = first_pages_ms(moved, killed_at, any_answer=True)
        phase.figures |= {
            "clients_moved": len(moved),
            "failed_calls": sum(
                1 for client in moved for record in client.records if record.seen.failure
            ),
            "first_answer_after_kill_ms": first,
            "all_moved_answered_after_ms": slowest,
        }

    async def restart_db(self, phase: Phase) -> None:
        """Stop PostgreSQL mid-phase, keep it down, start it; time the way back."""
        cluster = self.cluster
        if cluster is None:  # pragma: no cover - only scheduled with a cluster
            return
        await phase.sleep_until(DB_STOP_AT_SECONDS)
        stopping = time.monotonic()
        await anyio.to_thread.run_sync(cluster.stop)
        await anyio.sleep(DB_DOWN_SECONDS)
        await anyio.to_thread.run_sync(cluster.start)
        back = time.monotonic()
        await phase.ended.wait()
        # Clients without the read scope never get a page: they cannot show a recovery.
        first, slowest = first_pages_ms([c for c in phase.clients if c.can_read], back)
        phase.figures |= {
            "stop_at_s": round(stopping - phase.started, 1),
            "down_s": round(back - stopping, 1),
            "first_page_after_back_ms": first,
            "all_clients_served_after_ms": slowest,
            "replicas_alive_after": all(replica.running() for replica in self.replicas),
        }

    async def soak_figures(self, phase: Phase) -> None:
        """After the soak, each replica's RSS growth from minute 1 (or halfway) to the end."""
        await phase.ended.wait()
        long_enough = phase.seconds >= 2 * SOAK_BASELINE_SECONDS
        baseline = SOAK_BASELINE_SECONDS if long_enough else phase.seconds / 2
        phase.figures["rss"] = rss_growth(phase.rss, baseline)


class Phase:
    """One phase's clients, running together until its deadline, with its RSS samples."""

    def __init__(self, run: Run, name: str, clients: list[Client], seconds: float) -> None:
        self.run = run
        self.name = name
        self.clients = clients
        self.seconds = seconds
        self.started = 0.0
        self.elapsed = 0.0
        self.figures: dict[str, Any] = {}
        self.rss: list[tuple[float, int, int]] = []
        self.ended = anyio.Event()

    async def drive(self, fault: Callable[[Phase], Coroutine[Any, Any, None]] | None) -> None:
        """Run every client until the deadline, with the fault and the RSS sampler beside.

        A signal or the budget cancels the whole phase; `Run.phase` then raises.
        """
        self.ended = anyio.Event()
        self.started = time.monotonic()
        until = self.started + self.seconds
        urls = [replica.url for replica in self.run.replicas]
        loop = asyncio.get_running_loop()
        supervisor = self.run.supervisor
        async with anyio.create_task_group() as group:
            supervisor.interrupt_with(lambda: loop.call_soon_threadsafe(group.cancel_scope.cancel))
            try:
                group.start_soon(self._sample_rss, until)
                if fault is not None:
                    group.start_soon(fault, self)
                async with anyio.create_task_group() as clients:
                    for client in self.clients:
                        clients.start_soon(run_client, client, urls, until)
                self.elapsed = time.monotonic() - self.started
                self.ended.set()
            finally:
                supervisor.interrupt_with(None)

    async def sleep_until(self, seconds_in: float) -> None:
        """Sleep until `seconds_in` seconds after the phase started."""
        await anyio.sleep(max(0.0, self.started + seconds_in - time.monotonic()))

    async def _sample_rss(self, until: float) -> None:
        while time.monotonic() < until:
            self._sample()
            await anyio.sleep(min(RSS_EVERY_SECONDS, max(0.0, until - time.monotonic())))
        self._sample()

    def _sample(self) -> None:
        for replica in self.run.replicas:
            kib = replica.rss_kib() if replica.running() else None
            if kib is not None:
                self.rss.append((round(time.monotonic() - self.started, 1), replica.number, kib))
