"""`make load`: the phases, in order, within one time budget; the table and the JSON report.

    PYTHONPATH=. .venv/bin/python -m load [--soak-seconds 600] [--store sqlite]

Setup: a records file of TENANTS x TICKETS_PER_TENANT generated tickets, imported into a
throwaway PostgreSQL (or an SQLite file with --store sqlite), and two
`serve http --stateless` replicas on it. Then, one module per phase: a warm-up and 8, 32
and 64 concurrent clients (load/scale.py); the loss of one replica (load/replica_loss.py);
a database restart (PostgreSQL only, load/db_restart.py); the soak with each replica's
RSS sampled (load/soak.py); the churn feed (load/churn.py); the loss of a primary on a
primary and standby of their own (PostgreSQL only, load/failover.py); then the bad day of
one replica (PostgreSQL only, load/bad_day/). Each phase's calls are checked after it
ends, outside its timing (load/stage.py runs a phase).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from load import bad_day, churn, db_restart, failover, replica_loss, scale, soak
from load.bad_day import report as bad_day_report
from load.cluster import Cluster
from load.records import TENANTS, TICKETS_PER_TENANT, write_records_file
from load.replica import Replica
from load.report import PhaseResult, phase_json, problems, render_table, write_report
from load.stage import DATABASE, OWNER, READER, Stage
from load.supervise import Supervisor, say
from testkit.tokens import Issuer

REPORT_PATH = Path("build/load-report.json")
# Setup (records, import, replicas) and the checks after each phase, on a busy 2-core machine.
SETUP_ALLOWANCE_SECONDS = 180.0
CHECK_ALLOWANCE_SECONDS = 10.0


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
        say(f"stopped: {report['interrupted']}; every process and the cluster stopped")
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
    phases = scale.seconds(options.clients, options.phase_seconds)
    phases += [replica_loss.SECONDS, db_restart.SECONDS, options.soak_seconds, churn.CHURN_SECONDS]
    total = SETUP_ALLOWANCE_SECONDS + sum(phases) + CHECK_ALLOWANCE_SECONDS * len(phases)
    if options.store == "postgres":  # each on services of its own, within its own budget
        total += failover.budget_seconds(options.failover_seconds) + bad_day.BUDGET_SECONDS
    return float(total)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="make load", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=soak.DEFAULT_SECONDS,
        help=f"length of the soak at {soak.CLIENTS} clients (default {soak.DEFAULT_SECONDS:.0f})",
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=scale.DEFAULT_PHASE_SECONDS,
        help=f"length of each load phase (default {scale.DEFAULT_PHASE_SECONDS:.0f})",
    )
    parser.add_argument(
        "--clients",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=scale.CLIENT_COUNTS,
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
    parser.add_argument(
        "--failover-seconds",
        type=float,
        default=failover.DEFAULT_SECONDS,
        help=f"length of the failover phase (default {failover.DEFAULT_SECONDS:.0f})",
    )
    parser.add_argument("--seed", type=int, default=14, help="the workload's random seed")
    parser.add_argument(
        "--budget-seconds", type=float, help="hard limit for the whole run (default: computed)"
    )
    parser.add_argument("--report", type=Path, default=REPORT_PATH, help="the JSON report")
    return parser


class Run:
    """The run: its setup, then every phase module in order on the stage."""

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
        self.stage = Stage(
            supervisor,
            Issuer(),
            seed=options.seed,
            tenants=options.tenants,
            per_tenant=options.tickets_per_tenant,
        )
        self.stage.phases = phases

    def all(self) -> None:
        """Set up, then run every phase in order."""
        self.setup()
        stage, options = self.stage, self.options
        scale.run(stage, options.clients, options.phase_seconds)
        replica_loss.run(stage)
        if stage.cluster is not None:
            db_restart.run(stage, stage.cluster)
        soak.run(stage, options.soak_seconds)
        churn.run(stage)
        if stage.cluster is not None:  # on services of their own, one after the other
            self.failover()
            self.bad_day(stage.cluster)

    def setup(self) -> None:
        """Write the records, import them, start the replicas."""
        stage, options = self.stage, self.options
        folder = self.supervisor.folder
        stage.issuer.write_jwks(stage.jwks)
        started = time.monotonic()
        records = folder / "records.json"
        count = write_records_file(records, options.tenants, options.tickets_per_tenant)
        generated = time.monotonic()
        say(f"{count} tickets generated in {generated - started:.1f} s; importing")
        if options.store == "postgres":
            cluster = stage.cluster = Cluster(self.supervisor)
            cluster.create()
            cluster.start()
            cluster.create_database(OWNER, READER, DATABASE)
            target = ["--postgres", cluster.dsn(OWNER, DATABASE), "--grant-to", READER]
            store_args = ["--postgres", cluster.dsn(READER, DATABASE)]
        else:
            database = folder / "tickets.sqlite"
            target = ["--db", str(database)]
            store_args = ["--db", str(database)]
        stage.writer_args = target[:2]
        imported = time.monotonic()
        stage.import_file(records, target, "import.log")
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
        say(f"imported in {done - imported:.1f} s; starting 2 replicas")
        stage.replicas = [Replica(n, self.supervisor, stage.jwks, store_args) for n in (0, 1)]
        for replica in stage.replicas:
            replica.start()
        for replica in stage.replicas:
            replica.wait_ready()
        say("replicas ready: " + ", ".join(replica.url for replica in stage.replicas))

    def failover(self) -> None:
        """Run the failover phase (load/failover.py) on a primary and a standby of its own."""
        failover.run(self.stage, self.options.failover_seconds)

    def bad_day(self, cluster: Cluster) -> None:
        """Run the bad-day phase (load/bad_day/) on a database of its own in the cluster."""
        bad_day.run(self.stage, cluster, self.report.setdefault("bad_day", {}))
