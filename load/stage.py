"""What every phase of `make load` runs on: the services, the clients, one phase driven and checked.

`Stage` holds the run's services (the supervisor, the token issuer, the PostgreSQL cluster
and the replicas) and runs a phase: draws its clients, drives them with `Phase` beside the
phase's fault (a coroutine of the phase module: kill a replica, restart the database, ...),
checks every call after the phase ends, outside its timing, and keeps the result. The
phase modules (scale, replica_loss, db_restart, soak, churn, failover, bad_day) import
this one; it imports none of them.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import anyio

from load.client import Client, run_client
from load.cluster import Cluster
from load.records import tenant_name
from load.replica import Replica
from load.report import PhaseResult, Usage, check_phase
from load.supervise import Supervisor, machine_cpu, say
from load.workload import ClientPlan
from testkit.tokens import Issuer

RSS_EVERY_SECONDS = 5.0
TOKEN_SECONDS = 3 * 3600  # longer than any run's budget
NO_SCOPE_EVERY = 16  # client 15, 31, ... of a phase holds a token without the read scope
OWNER, READER, DATABASE = "tickets_owner", "tickets_reader", "tickets"

Fault = Callable[["Phase"], Coroutine[Any, Any, None]]
"""What happens beside a phase's clients (a replica killed, the database restarted, ...)."""
Check = Callable[[str, list[Client], float, int], PhaseResult]
"""Judge a phase's calls: its name, clients, seconds and tickets per tenant."""


class Stage:
    """The run's services, and each phase run on them and kept."""

    def __init__(
        self, supervisor: Supervisor, issuer: Issuer, *, seed: int, tenants: int, per_tenant: int
    ) -> None:
        self.supervisor = supervisor
        self.issuer = issuer
        self.seed = seed
        self.tenants = tenants
        self.per_tenant = per_tenant
        self.cluster: Cluster | None = None
        self.replicas: list[Replica] = []
        self.writer_args: list[str] = []
        """The store option `ticket-tools apply` writes through (as the owner)."""
        self.phases: list[PhaseResult] = []

    @property
    def jwks(self) -> Path:
        """The issuer's public keys, as the replicas read them."""
        return self.supervisor.folder / "jwks.json"

    def phase(
        self,
        name: str,
        count: int,
        seconds: float,
        *,
        fault: Fault | None = None,
        keep: bool = True,
        check: Check = check_phase,
        replicas: Sequence[Replica] | None = None,
        clusters: Sequence[Cluster] | None = None,
        tenants: int | None = None,
    ) -> PhaseResult:
        """Run one phase, check it, and keep its result (unless `keep` is false).

        By default on the run's replicas and cluster, with clients of any of its tenants;
        a phase with services of its own (the failover) names them, and how many tenants
        its store holds.
        """
        replicas = self.replicas if replicas is None else replicas
        if clusters is None:
            clusters = [] if self.cluster is None else [self.cluster]
        say(f"{name}: {count} clients for {seconds:.0f} s")
        clients = self.clients(name, count, self.tenants if tenants is None else tenants)
        phase = Phase(self.supervisor, replicas, name, clients, seconds)
        before = _usage(replicas, clusters)
        anyio.run(phase.drive, fault)
        self.supervisor.check()
        after = _usage(replicas, clusters)
        result = check(name, phase.clients, phase.elapsed, self.per_tenant)
        result.usage = Usage(*(round(b - a, 2) for a, b in zip(before, after, strict=True)))
        result.fault = phase.figures
        live = [cluster for cluster in clusters if cluster.pid is not None]
        if live:
            # How many connections the replicas' pools hold open at the end of the phase.
            query = f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{READER}'"  # noqa: S608
            result.fault["reader_connections"] = sum(int(c.sql(query)) for c in live)
        result.rss_kib = phase.rss
        say(
            f"{name}: {result.calls} calls, {result.calls_per_second:.0f}/s, "
            f"wrong {result.wrong}, cross-tenant {result.cross_tenant}, errors {result.errors}"
        )
        if keep:
            self.phases.append(result)
        return result

    def clients(self, name: str, count: int, tenants: int) -> list[Client]:
        """Return a phase's clients: distinct tenants of the first `tenants` while there are
        enough, each with its own token and seeded plan, alternating between two replicas."""
        rng = random.Random(f"{self.seed}:{name}")  # noqa: S311 - a workload, not a secret
        population = range(tenants)
        # Distinct tenants while there are enough; a small test store repeats some.
        if count <= len(population):
            chosen = rng.sample(population, count)
        else:
            chosen = rng.choices(population, k=count)
        clients = []
        for number, tenant_index in enumerate(chosen):
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

    def restart_replica(self, number: int) -> None:
        """Start a killed replica again (on a new port) before the next phase."""
        replica = self.replicas[number]
        replica.start()
        replica.wait_ready()
        say(f"replica {number} back on {replica.url}")

    def import_file(self, records: Path, target: Sequence[str], log_name: str) -> None:
        """Run `ticket-tools import RECORDS TARGET...`; raise with its log's end if it fails."""
        args = [sys.executable, "-m", "ticket_tools.cli", "import", str(records), *target]
        log = self.supervisor.folder / log_name
        process = self.supervisor.start(args, log=log)
        try:
            status = process.wait(timeout=max(1.0, self.supervisor.remaining()))
        except subprocess.TimeoutExpired:
            status = None
        if status != 0:
            raise RuntimeError(f"the import failed ({status}):\n{log.read_text()[-2000:]}")


def _usage(
    replicas: Sequence[Replica], clusters: Sequence[Cluster]
) -> tuple[float, float, float, float, float]:
    busy, total = machine_cpu()
    return (
        sum(replica.cpu_seconds() for replica in replicas),
        sum(cluster.cpu_seconds() for cluster in clusters),
        time.process_time(),
        busy,
        total,
    )


class Phase:
    """One phase's clients, running together until its deadline, with its RSS samples."""

    def __init__(
        self,
        supervisor: Supervisor,
        replicas: Sequence[Replica],
        name: str,
        clients: list[Client],
        seconds: float,
    ) -> None:
        self.supervisor = supervisor
        self.replicas = replicas
        self.name = name
        self.clients = clients
        self.seconds = seconds
        self.started = 0.0
        self.elapsed = 0.0
        self.figures: dict[str, Any] = {}
        self.rss: list[tuple[float, int, int]] = []
        self.ended = anyio.Event()

    async def drive(self, fault: Fault | None) -> None:
        """Run every client until the deadline, with the fault and the RSS sampler beside.

        A signal or the budget cancels the whole phase; `Stage.phase` then raises.
        """
        self.ended = anyio.Event()
        self.started = time.monotonic()
        until = self.started + self.seconds
        urls = [replica.url for replica in self.replicas]
        loop = asyncio.get_running_loop()
        supervisor = self.supervisor
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
        for replica in self.replicas:
            kib = replica.rss_kib() if replica.running() else None
            if kib is not None:
                self.rss.append((round(time.monotonic() - self.started, 1), replica.number, kib))
