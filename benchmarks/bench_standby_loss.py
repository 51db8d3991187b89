"""A replica's reads when its standby is lost: stopped, or frozen (SIGSTOP, as a partition).

A primary and one hot standby (testkit's `replicated`); a PostgresStore on the multi-host
DSN `serve http` would take (`prefer-standby`, `load_balance_hosts=random`), behind
`StoreCalls` with serve's defaults (2 s deadline, 4 workers, 2 calls per tenant), and
CLIENTS tasks calling `get` over as many tenants without pause. With the standby's
replay paused, the primary is given a newer title, so every answer says which host gave
it. Each round: the standby stopped or frozen; timed from then to the first answer from
the primary, counting the calls that failed (all must be "unavailable"), the wrong
answers (must be 0) and the store threads (at most the workers and the probe's).
"""

from __future__ import annotations

import statistics
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import anyio

from testkit.postgres import ReplicatedClusters, ThrowawayCluster, create_tickets, replicated
from ticket_tools.serve.workers import StoreCalls, StoreUnavailable, WorkerLimits
from ticket_tools.stores.postgres.store import PostgresStore

ROUNDS = 5
CLIENTS = 8
OWNER = "ticket_owner"
READER = "ticket_reader"
TENANTS = [f"t{n}" for n in range(CLIENTS)]
GIVE_UP_SECONDS = 30.0


def _setup(primary: ThrowawayCluster) -> None:
    records = {
        f"{tenant}:TKT-101": {"id": "TKT-101", "tenant": tenant, "title": "v0", "status": "open"}
        for tenant in TENANTS
    }
    create_tickets(primary, records, owner=OWNER, reader=READER)


class _Round:
    def __init__(self) -> None:
        self.start = 0.0
        self.failures: list[str] = []
        self.wrong = 0
        self.moved_at: float | None = None
        self.threads = 0


async def _client(
    calls: StoreCalls, store: PostgresStore, tenant: str, titles: tuple[str, str], result: _Round
) -> None:
    old, new = titles
    start = result.start
    while result.moved_at is None and time.monotonic() - start < GIVE_UP_SECONDS:
        try:
            ticket = await calls.run(tenant, lambda: store.get(tenant, "TKT-101"))
        except StoreUnavailable as error:
            result.failures.append(error.reason)
            continue
        finally:
            result.threads = max(result.threads, _store_threads())
        title = None if ticket is None else ticket["title"]
        if title == new:
            result.moved_at = result.moved_at or time.monotonic() - start
        elif title != old:
            result.wrong += 1


async def _warm(calls: StoreCalls, store: PostgresStore, tenant: str, title: str) -> None:
    ticket = await calls.run(tenant, lambda: store.get(tenant, "TKT-101"))
    if ticket is None or ticket["title"] != title:
        raise RuntimeError("the standby did not answer before the loss")


def _store_threads() -> int:
    return sum(thread.name == "ticket-tools-store" for thread in threading.enumerate())


def _one_round(clusters: ReplicatedClusters, dsn: str, version: int, how: str) -> _Round:
    standby = clusters.standbys[0]
    if not standby.running():
        standby.start()
    clusters.wait_replayed()
    store = PostgresStore.open(dsn, timeout=2.0, max_connections=4)
    calls = StoreCalls(WorkerLimits())
    titles = (f"v{version - 1}", f"v{version}")
    try:
        standby.sql("SELECT pg_wal_replay_pause()")
        clusters.primary.sql(f"UPDATE tickets SET title = 'v{version}'", dbname="tickets")  # noqa: S608 - our own number
        result = _Round()

        async def run() -> None:
            async with anyio.create_task_group() as group:
                for tenant in TENANTS:  # warm: every client reads the standby's answer once
                    group.start_soon(_warm, calls, store, tenant, titles[0])
            async with anyio.create_task_group() as group:
                lost: AbstractContextManager[None] = nullcontext()
                if how == "frozen":
                    lost = standby.frozen()
                    lost.__enter__()
                else:
                    standby.stop()
                result.start = time.monotonic()
                try:
                    for tenant in TENANTS:
                        group.start_soon(_client, calls, store, tenant, titles, result)
                    while (
                        result.moved_at is None
                        and time.monotonic() - result.start < GIVE_UP_SECONDS
                    ):
                        await anyio.sleep(0.01)
                finally:
                    lost.__exit__(None, None, None)

        anyio.run(run)
        if standby.running():
            standby.sql("SELECT pg_wal_replay_resume()")
        else:
            standby.start()
            standby.sql("SELECT pg_wal_replay_resume()")
        return result
    finally:
        calls.close()
        store.close()


def _summary(how: str, rounds: list[_Round]) -> str:
    seconds = [r.moved_at for r in rounds if r.moved_at is not None]
    failures = [len(r.failures) for r in rounds]
    reasons = sorted({reason for r in rounds for reason in r.failures})
    median = statistics.median(seconds) if seconds else float("nan")
    return (
        f"{how:>7} | {median:10.2f} | {max(seconds, default=float('nan')):7.2f} | "
        f"{len(seconds)}/{len(rounds)} | {min(failures):>3}..{max(failures):<3} | "
        f"{','.join(reasons) or '-':>22} | {sum(r.wrong for r in rounds):>5} | "
        f"{max(r.threads for r in rounds):>7}"
    )


def main() -> None:
    """Print the seconds from a standby's loss to the first answer from the primary."""
    with replicated(1, _setup) as clusters:
        standby = clusters.standbys[0]
        dsn = (
            f"host={standby.root},{clusters.primary.root} dbname=tickets user={READER} "
            "target_session_attrs=prefer-standby load_balance_hosts=random"
        )
        version = 0
        lines = []
        for how in ("stopped", "frozen"):
            rounds = []
            for _ in range(ROUNDS):
                version += 1
                rounds.append(_one_round(clusters, dsn, version, how))
            lines.append(_summary(how, rounds))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"standby lost under {CLIENTS} clients, serve's defaults (2 s deadline, 4 workers), "
        f"{ROUNDS} rounds each; load average {load}"
    )
    print(
        "   lost | s to moved | max s   | moved | failed   |   failure reasons      | wrong "
        "| threads"
    )
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
