"""Big organisations: one tenant of 10^6 and one of 10^7 tickets beside 999 small ones (issue 31).

For each size, on SQLite and on PostgreSQL (a throwaway cluster, testkit/postgres.py; the
reader role under the forced policy):

1. a records file: the big tenant's titles from testkit/titles.py (a word in a quarter of
   them, one in a hundredth, three rare ones, four open tickets among the closed), then
   999 tenants of 1,000 tickets;
2. `ticket-tools import` of it twice, as subprocesses: the build with the title index and
   the same build without it (no tenant indexed, INDEX_MIN_TICKETS past every tenant's
   size); each one's time and peak resident memory, and the store's size (the SQLite
   file; PostgreSQL's six tables with their indexes and TOAST);
3. the calls through `run_tool` (what `serve` runs) on the indexed store, in paired
   rounds: each round times the plain first page and every other call back to back, so a
   burst of load slows both; per call, p50 and p99 and their ratio to the plain page's;
4. the feed: BIG_FEED_CHANGES changes (90% upserts of a new title, 10% deletes) to the big
   tenant, and FEED_CHANGES over the small tenants (bench_feed's kind of feed), applied by
   the store's writer in batches of 1,000, into each build: changes per second.

Targets (issue 31) at 10^7 on both stores: every call's p50 <= 5x and p99 <= 10x the plain
page's; import <= 2x and size <= 3x the build without the index. Each is printed met or
NOT met. Every file and database is deleted after its size (10^7 needs about 14 GB free).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_big_tenant.py
    BENCH_BIG_TENANT_SIZES=20000 BENCH_BIG_TENANT_SMALL=20 PYTHONPATH=. \\
        .venv/bin/python benchmarks/bench_big_tenant.py          # quick
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from testkit import titles
from ticket_tools import TicketStore, run_tool
from ticket_tools.declarations.widths import make_registry
from ticket_tools.stores import index_writes
from ticket_tools.stores.feed import Change
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.writer import SQLiteWriter

SIZES = tuple(
    int(n) for n in os.environ.get("BENCH_BIG_TENANT_SIZES", "1000000,10000000").split(",")
)
SMALL_TENANTS = int(os.environ.get("BENCH_BIG_TENANT_SMALL", "999"))
PER_SMALL = 1_000
ROUNDS = int(os.environ.get("BENCH_BIG_TENANT_ROUNDS", "300"))
# Changes fed to the small tenants (bench_feed's kind of feed) and to the big one: every
# upsert a new title, so each rewrites its grams' containers (fewer: the same rate, sooner).
FEED_CHANGES = 20_000
BIG_FEED_CHANGES = 5_000
BATCH = 1_000
TARGET_P50, TARGET_P99 = 5.0, 10.0
TARGET_IMPORT, TARGET_SIZE = 2.0, 3.0
OWNER, READER = "ticket_owner", "ticket_reader"
BIG = "big"
# Run the command line in a child, with no tenant indexed ("plain") or as shipped; then
# write its own peak resident memory (VmHWM, kB) to the file named first. Not wait4's
# ru_maxrss: a child spawned by vfork counts the parent's pages until its exec.
_DRIVER = (
    "import sys\n"
    "from ticket_tools.stores import index_writes\n"
    "if sys.argv[2] == 'plain': index_writes.INDEX_MIN_TICKETS = 2**62\n"
    "from ticket_tools.cli import main\n"
    "try:\n"
    "    status = main(sys.argv[3:])\n"
    "finally:\n"
    "    with open('/proc/self/status') as own, open(sys.argv[1], 'w') as out:\n"
    "        out.write(next(l for l in own if l.startswith('VmHWM:')).split()[1])\n"
    "sys.exit(status)\n"
)
ROWS: list[str] = []
VERDICTS: list[str] = []


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _row(line: str) -> None:
    ROWS.append(f"{line} (load {_load()})")
    print(f"  {ROWS[-1]}", flush=True)


def _verdict(what: str, measured: float, target: float) -> None:
    met = "met" if measured <= target else "NOT met"
    VERDICTS.append(f"{what}: {measured:.2f}x, target <= {target:g}x: {met}")


def _small(number: int) -> str:
    return f"s{number:03d}"


def _width(size: int) -> int:
    return max(4, len(str(size - 1)))


def _write_records(path: Path, size: int) -> int:
    """Write the big tenant then the small ones, in key order, a record at a time."""
    width = _width(size)
    with path.open("w", encoding="utf-8") as out:
        out.write("{")
        first = True
        tenants = [(BIG, size, "big tenant")] + [
            (_small(n), PER_SMALL, f"small {n}") for n in range(SMALL_TENANTS)
        ]
        for tenant, count, seed in tenants:
            for ticket_id, title, status in titles.tickets(count, width=width, seed=seed):
                record = json.dumps(
                    {"id": ticket_id, "title": title, "status": status}, ensure_ascii=False
                )
                out.write(f'{"" if first else ","}\n"{tenant}:{ticket_id}": {record}')
                first = False
        out.write("}\n")
    return path.stat().st_size


def _import(build: str, argv: list[str]) -> tuple[float, int]:
    """Run `ticket-tools import ...` as `build` ("index" or "plain"); return seconds, peak MiB."""
    with tempfile.NamedTemporaryFile("r", prefix="bench-big-rss-") as peak:
        started = time.perf_counter()
        status = subprocess.call(  # noqa: S603 - our own fixed arguments
            [sys.executable, "-c", _DRIVER, peak.name, build, "import", *argv],
            stdout=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"import ({build}) failed: exit {status}")
        return seconds, int(peak.read()) // 1024  # VmHWM is in kB


def _calls(size: int) -> dict[str, dict[str, object]]:
    width = _width(size)
    return {
        "plain first page": {"limit": 5},
        "a word in 25%": {"query": titles.COMMON},
        "a word in 1%": {"query": titles.ONE_IN_A_HUNDRED},
        "a word in 3 titles": {"query": titles.RARE},
        "a word in none": {"query": titles.ABSENT},
        "a rare 2-character string": {"query": titles.RARE_SHORT},
        "a rare non-ASCII word": {"query": titles.RARE_NON_ASCII.capitalize()},
        "the rare status": {"status": "open"},
        "the rare status and a common word": {"status": "open", "query": titles.COMMON},
        "a deep cursor": {"cursor": f"TKT-{size // 2:0{width}d}"},
    }


def _quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _measure(kind: str, size: int, store: TicketStore) -> None:
    """Paired rounds of every call; print each call's p50, p99 and ratios to the plain page."""
    registry = make_registry(IdFormat(_width(size)))
    context = {"tenant": BIG, "can_read_tickets": True}
    calls = _calls(size)
    for args in calls.values():  # every statement prepared, every page cached, once
        for _ in range(6):
            result = run_tool("search_tickets", args, context, store, registry=registry).result
            if result.get("ok") is not True:
                raise RuntimeError(f"{kind}: {args} answered {result}")
    times: dict[str, list[float]] = {name: [] for name in calls}
    # This thread's CPU time too: an SQLite call is all CPU in this process, so its wall
    # time less its CPU time is the time the machine gave another process (shared cores).
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, args in calls.items():
            started, used = time.perf_counter(), time.thread_time()
            run_tool("search_tickets", args, context, store, registry=registry)
            times[name].append(time.perf_counter() - started)
            cpu[name].append(time.thread_time() - used)
    plain = times["plain first page"]
    base50, base99 = _quantile(plain, 0.5), _quantile(plain, 0.99)
    cpu99 = _quantile(cpu["plain first page"], 0.99)
    for name, samples in times.items():
        p50, p99 = _quantile(samples, 0.5), _quantile(samples, 0.99)
        own = _quantile(cpu[name], 0.99)
        on_cpu = f"; CPU p99 {own * 1000:.3f} ms ({own / cpu99:.1f}x)" if kind == "sqlite" else ""
        _row(
            f"{kind} {size:,}: {name}: p50 {p50 * 1000:.3f} ms ({p50 / base50:.1f}x), "
            f"p99 {p99 * 1000:.3f} ms ({p99 / base99:.1f}x){on_cpu}"
        )
        if name != "plain first page" and size == max(SIZES):
            _verdict(f"{kind} {size:,} {name} p50", p50 / base50, TARGET_P50)
            _verdict(f"{kind} {size:,} {name} p99", p99 / base99, TARGET_P99)


def _rare_without(kind: str, size: int, store: TicketStore) -> None:
    """Time a rare word on the build without the index, a few times: what it costs there."""
    registry = make_registry(IdFormat(_width(size)))
    context = {"tenant": BIG, "can_read_tickets": True}
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        run_tool("search_tickets", {"query": titles.RARE}, context, store, registry=registry)
        samples.append(time.perf_counter() - started)
    _row(f"{kind} {size:,} without the index: a word in 3 titles: {min(samples) * 1000:.1f} ms")


def _feed(size: int, tenants: list[tuple[str, int]], count: int) -> list[list[Change]]:
    """`count` changes over `tenants` ((tenant, tickets)), in batches of BATCH."""
    rng = random.Random(f"feed {size} {tenants[0][0]}")  # noqa: S311 - a workload
    width = _width(size)
    fresh = titles.tickets(count, width=width, seed="feed titles")
    changes = []
    for number, (_, title, status) in enumerate(fresh):
        tenant, held = rng.choice(tenants)
        ticket_id = f"TKT-{rng.randrange(held):0{width}d}"
        if rng.random() < 0.1:
            changes.append(Change("delete", tenant, ticket_id, number + 1))
        else:
            changes.append(Change("upsert", tenant, ticket_id, number + 1, title, status))
    return [changes[start : start + BATCH] for start in range(0, len(changes), BATCH)]


@contextlib.contextmanager
def _no_tenant_indexed(build: str) -> Iterator[None]:
    """For the build without the index: no tenant grows into one while the feed runs."""
    saved = index_writes.INDEX_MIN_TICKETS
    if build == "plain":
        index_writes.INDEX_MIN_TICKETS = 2**62
    try:
        yield
    finally:
        index_writes.INDEX_MIN_TICKETS = saved


def _apply(kind: str, size: int, build: str, apply: Callable[[list[Change]], object]) -> None:
    for name, tenants, count in (
        ("the big tenant", [(BIG, size)], BIG_FEED_CHANGES),
        ("the small tenants", [(_small(n), PER_SMALL) for n in range(SMALL_TENANTS)], FEED_CHANGES),
    ):
        batches = _feed(size, tenants, count)
        with _no_tenant_indexed(build):
            started = time.perf_counter()
            for batch in batches:
                apply(batch)
            seconds = time.perf_counter() - started
        label = "with the index" if build == "index" else "without the index"
        _row(f"{kind} {size:,}: feed to {name}, {label}: {count / seconds:,.0f} changes/s")


@contextlib.contextmanager
def _postgres() -> Iterator[Callable[[str], tuple[str, str]] | None]:
    """Yield a function making a database (owner DSN, reader DSN), or None without a server."""
    import psycopg  # noqa: PLC0415 - optional here

    from testkit.postgres import ThrowawayCluster, find_binaries  # noqa: PLC0415

    binaries = find_binaries()
    if binaries is None:
        print("postgres: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        yield None
        return
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
            superuser.execute(f"CREATE ROLE {OWNER} LOGIN")
            superuser.execute(f"CREATE ROLE {READER} LOGIN")

        def database(name: str) -> tuple[str, str]:
            with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
                superuser.execute(f"DROP DATABASE IF EXISTS {name}")
                superuser.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
            return cluster.dsn(OWNER, name), cluster.dsn(READER, name)

        yield database
    finally:
        cluster.destroy()


def _pg_size(owner: str) -> int:
    import psycopg  # noqa: PLC0415 - optional here

    tables = ("tickets", "tombstones", "high_water", "title_grams", "gram_counts", "tenant_sizes")
    with psycopg.connect(owner) as connection:
        total = connection.execute(
            "SELECT sum(pg_total_relation_size(t::regclass)) FROM unnest(%s::text[]) AS t",
            (list(tables),),
        ).fetchone()
    return int(total[0]) if total is not None else 0


def _ratios(kind: str, size: int, built: dict[str, tuple[float, int, int]]) -> None:
    (index_s, index_rss, index_bytes), (plain_s, plain_rss, plain_bytes) = (
        built["index"],
        built["plain"],
    )
    _row(
        f"{kind} {size:,}: import {index_s:.1f} s with the index, {plain_s:.1f} s without "
        f"({index_s / plain_s:.2f}x); peak RSS {index_rss} / {plain_rss} MiB; size "
        f"{index_bytes / 2**20:,.0f} / {plain_bytes / 2**20:,.0f} MiB "
        f"({index_bytes / plain_bytes:.2f}x)"
    )
    if size == max(SIZES):
        _verdict(f"{kind} {size:,} import time", index_s / plain_s, TARGET_IMPORT)
        _verdict(f"{kind} {size:,} size", index_bytes / plain_bytes, TARGET_SIZE)


def _sqlite(folder: Path, records: Path, size: int) -> None:
    digits = str(_width(size))
    built: dict[str, tuple[float, int, int]] = {}
    paths = {build: folder / f"{build}-{size}.sqlite" for build in ("index", "plain")}
    for build, path in paths.items():
        seconds, peak = _import(build, [str(records), "--db", str(path), "--id-digits", digits])
        built[build] = (seconds, peak, path.stat().st_size)
    _ratios("sqlite", size, built)
    width = IdFormat(_width(size))
    with SQLiteStore.open(paths["index"], id_format=width) as store:
        _measure("sqlite", size, store)
    with SQLiteStore.open(paths["plain"], id_format=width) as store:
        _rare_without("sqlite", size, store)
    for build, path in paths.items():
        with SQLiteWriter.open(path, id_format=width) as writer:
            _apply("sqlite", size, build, writer.apply)
        path.unlink()


def _postgres_size(records: Path, size: int, database: Callable[[str], tuple[str, str]]) -> None:
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415
    from ticket_tools.stores.postgres.writer import PostgresWriter  # noqa: PLC0415

    digits = str(_width(size))
    width = IdFormat(_width(size))
    built: dict[str, tuple[float, int, int]] = {}
    dsns = {}
    for build in ("index", "plain"):
        owner, reader = database(f"big_{build}")
        argv = [str(records), "--postgres", owner, "--grant-to", READER, "--id-digits", digits]
        seconds, peak = _import(build, argv)
        built[build] = (seconds, peak, _pg_size(owner))
        dsns[build] = (owner, reader)
    _ratios("postgres", size, built)
    with PostgresStore.open(dsns["index"][1], id_format=width) as store:
        _measure("postgres", size, store)
    with PostgresStore.open(dsns["plain"][1], id_format=width, timeout=120) as store:
        _rare_without("postgres", size, store)
    for build, (owner, _) in dsns.items():
        with PostgresWriter.open(owner, id_format=width, timeout=600) as writer:
            _apply("postgres", size, build, writer.apply)


def main() -> None:
    """Each size in turn: the records file, both stores' builds, calls and feeds; then clean up."""
    print(f"disk before: {shutil.disk_usage(tempfile.gettempdir()).free / 2**30:.0f} GiB free")
    with tempfile.TemporaryDirectory(prefix="bench-big-") as name, _postgres() as database:
        folder = Path(name)
        for size in SIZES:
            records = folder / f"records-{size}.json"
            started = time.perf_counter()
            written = _write_records(records, size)
            seconds = time.perf_counter() - started
            print(
                f"{size:,} tickets in one tenant beside {SMALL_TENANTS} of {PER_SMALL}: records "
                f"file of {written / 2**20:,.0f} MiB written in {seconds:.0f} s",
                flush=True,
            )
            _sqlite(folder, records, size)
            if database is not None:
                _postgres_size(records, size, database)
            records.unlink()
    print("\nbig tenants, each figure beside its load average")
    for row in ROWS:
        print(f"- {row}")
    print(f"\ntargets at {max(SIZES):,}:")
    for verdict in VERDICTS:
        print(f"- {verdict}")


if __name__ == "__main__":
    main()
