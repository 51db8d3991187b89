"""`import --replace`: a full refresh swapped in atomically while a reader searches in a loop."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, cast

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from store_cases import EVERY
from ticket_tools import Records, TicketFilter, TicketStore, execute_tool, fixture_records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Change, Counts
from ticket_tools.stores.postgres import importer as postgres_importer
from ticket_tools.stores.postgres.importer import import_records, replace_dsn, replace_records
from ticket_tools.stores.postgres.schema import WRITER_LOCK, describe
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter
from ticket_tools.stores.records import RecordsError, StoredRow, record_rows
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.writer import SQLiteWriter

ALPHA = {"tenant": "alpha", "can_read_tickets": True}
OLD: Records = fixture_records()
NEW: Records = {
    f"alpha:TKT-{n}": {"id": f"TKT-{n}", "title": f"new {n}", "status": "open"}
    for n in range(300, 312)
}
SWAPS = 6


def _page(records: Records | TicketStore) -> object:
    return execute_tool("search_tickets", {"limit": 10}, ALPHA, records)


def _search_during(store: TicketStore, swap: Callable[[Records], object]) -> list[object]:
    """Search in a loop on a thread while `swap` replaces OLD and NEW in turn; return answers."""
    answers: list[object] = []
    done = threading.Event()

    def search() -> None:
        while not done.is_set():
            try:
                answers.append(execute_tool("search_tickets", {"limit": 10}, ALPHA, store))
            except Exception as error:
                answers.append(repr(error))

    reader = threading.Thread(target=search)
    reader.start()
    try:
        for number in range(SWAPS):
            swap(NEW if number % 2 == 0 else OLD)
    finally:
        done.set()
        reader.join()
    return answers


def _only_whole_pages(answers: list[object]) -> None:
    whole = [_page(OLD), _page(NEW)]
    assert [answer for answer in answers if answer not in whole] == []
    assert len(answers) > 0


def test_sqlite_replace_is_atomic_for_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "tickets.sqlite"
    write_database(path, OLD)
    with SQLiteStore.open(path) as store, SQLiteWriter.open(path) as writer:
        writer.apply([Change("delete", "alpha", "TKT-300", 9)])  # a tombstone to clear
        answers = _search_during(store, lambda records: writer.replace(record_rows(records)))
        _only_whole_pages(answers)
        # Six swaps: OLD again, every ticket at version 0, no tombstone left.
        assert _page(store) == _page(OLD)
        assert writer.apply([Change("upsert", "alpha", "TKT-300", 1, "t", "open")]) == Counts(
            1, 0, 0
        )


def test_sqlite_replace_reads_its_rows_under_the_write_lock(tmp_path: Path) -> None:
    """A change cannot be committed between the read of the new set and its swap."""
    path = tmp_path / "tickets.sqlite"
    write_database(path, OLD)
    refused: list[str] = []

    def load() -> list[StoredRow]:
        with SQLiteWriter.open(path, timeout=0) as other, pytest.raises(StoreFailure) as raised:
            other.apply([Change("upsert", "alpha", "TKT-301", 4, "fed", "closed")])
        refused.append(raised.value.reason)
        return record_rows(NEW)

    with SQLiteWriter.open(path) as writer:
        assert writer.replace(load) == 12
    assert refused == ["locked"]
    with SQLiteStore.open(path) as store:
        assert _page(store) == _page(NEW)


def test_sqlite_replace_rolls_back_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "tickets.sqlite"
    write_database(path, OLD)
    rows = record_rows(NEW)
    rows.append(rows[0])  # the same key twice: the primary key refuses it
    with SQLiteWriter.open(path) as writer, pytest.raises(RecordsError) as raised:
        writer.replace(rows)
    assert str(raised.value) == "record 13 (in file order): the key was given before"
    with SQLiteStore.open(path) as store:
        assert _page(store) == _page(OLD)


def test_sqlite_replace_on_a_full_disk_keeps_the_old_set(tmp_path: Path) -> None:
    path = tmp_path / "tickets.sqlite"
    write_database(path, OLD)
    big = {
        f"alpha:TKT-{n}": {"id": f"TKT-{n}", "title": "x" * 3000, "status": "open"}
        for n in range(100, 200)
    }
    rows = record_rows(big)
    with SQLiteWriter.open(path) as writer:
        writer._connection.execute("PRAGMA max_page_count = 3")  # the file is 3 pages now
        with pytest.raises(StoreFailure) as raised:
            writer.replace(rows)
    assert str(raised.value) == f"cannot write {path}: database or disk is full (SQLITE_FULL)"
    with SQLiteStore.open(path) as store:
        assert _page(store) == _page(OLD)


@pytest.fixture
def pg(postgres_database: PostgresDatabase, scratch: str) -> dict[str, str]:
    cluster = postgres_database.cluster
    owner = cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, OLD, grant_to=READER)
    return {
        "owner": owner,
        "reader": cluster.dsn(READER, scratch),
        "super": cluster.dsn("postgres", scratch),
    }


@pytest.fixture
def writer_role(pg: dict[str, str]) -> Iterator[str]:
    with psycopg.connect(pg["super"], autocommit=True) as connection:
        connection.execute("CREATE ROLE ticket_swap_writer LOGIN")
        connection.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON tickets, tombstones, title_grams, "
            "gram_counts, tenant_sizes TO ticket_swap_writer"
        )
        connection.execute("GRANT SELECT ON high_water TO ticket_swap_writer")
    yield pg["owner"].replace(f"user={OWNER}", "user=ticket_swap_writer")
    with psycopg.connect(pg["super"], autocommit=True) as connection:
        connection.execute(
            "REVOKE ALL ON tickets, tombstones, high_water, title_grams, gram_counts, "
            "tenant_sizes FROM ticket_swap_writer"
        )
        connection.execute("DROP ROLE ticket_swap_writer")


def test_postgres_replace_is_atomic_for_a_reader(pg: dict[str, str], writer_role: str) -> None:
    with PostgresWriter.open(pg["owner"]) as writer:
        writer.apply([Change("delete", "alpha", "TKT-300", 9)])
    progress: list[int] = []
    with PostgresStore.open(pg["reader"]) as store:
        answers = _search_during(
            store,
            lambda records: replace_dsn(pg["owner"], records, on_progress=progress.append),
        )
        _only_whole_pages(answers)
        assert _page(store) == _page(OLD)
    assert progress[-1] == 10
    # The grants, the policy and the schema came along; the tombstones went.
    with PostgresWriter.open(writer_role) as writer:
        assert writer.apply([Change("upsert", "alpha", "TKT-300", 1, "t", "open")]) == Counts(
            1, 0, 0
        )
    with psycopg.connect(pg["super"]) as connection:
        tables = connection.execute(
            "SELECT relname FROM pg_class WHERE relname ~ '^(tickets|title_grams|gram_counts"
            "|tenant_sizes)' ORDER BY relname"
        ).fetchall()
    assert tables == [
        ("gram_counts",),
        ("gram_counts_pkey",),
        ("tenant_sizes",),
        ("tenant_sizes_pkey",),
        ("tickets",),
        ("tickets_pkey",),
        ("title_grams",),
        ("title_grams_pkey",),
    ]


def test_postgres_replace_keeps_a_change_applied_during_its_copy(pg: dict[str, str]) -> None:
    """A batch of `apply` started during the copy waits for the swap, then lands on the new set."""
    held: list[object] = []
    landed: list[Counts] = []

    writer = PostgresWriter.open(pg["owner"])
    feeder = threading.Thread(
        target=lambda: landed.append(
            writer.apply([Change("upsert", "alpha", "TKT-301", 4, "fed", "closed")])
        )
    )

    def during_copy(done: int) -> None:
        with psycopg.connect(pg["super"]) as connection:
            held.append(
                connection.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK,)).fetchone()
            )
        feeder.start()

    with writer:
        assert replace_dsn(pg["owner"], NEW, on_progress=during_copy) == 12
        feeder.join()
    assert (held, landed) == ([(False,)], [Counts(1, 0, 0)])
    with PostgresStore.open(pg["reader"]) as store:
        assert store.get("alpha", "TKT-301") == {
            "id": "TKT-301",
            "title": "fed",
            "status": "closed",
        }


def test_postgres_replace_reads_its_records_under_the_writers_lock(pg: dict[str, str]) -> None:
    held: list[object] = []

    def load() -> Records:
        with psycopg.connect(pg["super"]) as connection:
            held.append(
                connection.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK,)).fetchone()
            )
        return NEW

    assert replace_dsn(pg["owner"], load) == 12
    assert held == [(False,)]
    with PostgresStore.open(pg["reader"]) as store:
        assert _page(store) == _page(NEW)


def test_postgres_replace_gives_up_when_the_locks_never_come(pg: dict[str, str]) -> None:
    with psycopg.connect(pg["reader"]) as holder:
        holder.execute("SELECT set_config('app.tenant', 'alpha', true)")
        holder.execute("SELECT count(*) FROM tickets").fetchone()  # ACCESS SHARE, held
        with psycopg.connect(pg["owner"]) as connection, pytest.raises(StoreFailure) as raised:
            replace_records(connection, NEW, attempts=2)
    assert (raised.value.reason, str(raised.value)) == (
        "locked",
        f"{describe(pg['owner'])}: the swap never got the tables' locks; "
        "nothing was replaced, try again",
    )
    with PostgresStore.open(pg["reader"]) as store:
        assert _page(store) == _page(OLD)
    # The next attempt drops the unused new table and builds it again.
    assert replace_dsn(pg["owner"], NEW) == 12
    with PostgresStore.open(pg["reader"]) as store:
        assert _page(store) == _page(NEW)


def test_postgres_replace_of_a_database_it_cannot_reach(
    postgres_database: PostgresDatabase,
) -> None:
    dsn = postgres_database.cluster.dsn(OWNER, "no_such_database")
    with pytest.raises(StoreFailure) as raised:
        replace_dsn(dsn, NEW)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot replace the tickets of {describe(dsn)}: no connection (the server is down "
        "or unreachable, or it refused the database, role or password)",
    )


def test_postgres_replace_of_a_database_without_tables(
    postgres_database: PostgresDatabase, scratch: str
) -> None:
    dsn = postgres_database.cluster.dsn(OWNER, scratch)
    with pytest.raises(StoreFailure) as raised:
        replace_dsn(dsn, NEW)
    assert raised.value.reason == "schema"


def test_a_privilege_outside_the_known_set_is_not_copied(
    pg: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_importer, "_PRIVILEGES", ("INSERT",))
    replace_dsn(pg["owner"], NEW)
    with PostgresStore.open(pg["reader"]) as store, pytest.raises(StoreFailure) as raised:
        store.find("alpha", TicketFilter(), limit=1)  # the reader's SELECT was not copied
    assert raised.value.reason == "unavailable"


# Large enough that the refresh holds the writers' lock while the feed trickles in.
BIG_TENANTS = 100  # of 1,000 tickets each: 100,000
FEED_CHANGES = 400
FEED_KEYS = 300  # a quarter of them changed twice
GATE_SECONDS = 60.0


def _big_records(path: Path) -> Records:
    records: Records = {
        f"t{tenant}:TKT-{n:03d}": {"id": f"TKT-{n:03d}", "title": f"snap {n}", "status": "open"}
        for tenant in range(BIG_TENANTS)
        for n in range(1000)
    }
    path.write_text(json.dumps(records), encoding="utf-8")
    return records


def _feed_lines() -> list[dict[str, object]]:
    """Changes to keys the snapshot holds, each key's versions rising, deletes among them."""
    lines: list[dict[str, object]] = []
    for number in range(FEED_CHANGES):
        ticket_id = f"TKT-{number % FEED_KEYS:03d}"
        change: dict[str, object] = {
            "op": "delete" if number % 7 == 0 else "upsert",
            "key": f"t0:{ticket_id}",
            "version": number // FEED_KEYS + 1,
        }
        if change["op"] == "upsert":
            change["ticket"] = {"id": ticket_id, "title": f"fed {number}", "status": "closed"}
        lines.append(change)
    return lines


def _oracle(snapshot: Records, feed: list[dict[str, object]]) -> list[tuple[str, str, str, str]]:
    """The snapshot at version 0, then per key the highest version of the feed."""
    state = {tuple(key.split(":")): (t["title"], t["status"]) for key, t in snapshot.items()}
    for change in sorted(feed, key=lambda c: cast(int, c["version"])):
        key = tuple(cast(str, change["key"]).split(":"))
        if change["op"] == "delete":
            state.pop(key, None)
        else:
            ticket = cast(dict[str, str], change["ticket"])
            state[key] = (ticket["title"], ticket["status"])
    return sorted((*key, *fields) for key, fields in state.items())  # type: ignore[misc]


def _sqlite_locked(db: Path) -> bool:
    probe = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()
    return False


def _postgres_began(dsn: str) -> bool:
    # The lock, or the copy's table: a refresh that copies without the lock has begun too.
    with psycopg.connect(dsn, autocommit=True) as probe:
        taken = probe.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK,)).fetchone()
        if taken == (True,):
            probe.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))
        copying = probe.execute(
            "SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE c.relname = 'tickets_next')"
        ).fetchone()
    return taken == (False,) or copying == (True,)


def _ticket_tools(*args: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize(
    "store", [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]
)
def test_a_refresh_beside_a_trickling_feed_loses_nothing(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every change fed once the refresh holds the writers' lock is in the end state."""
    snapshot = _big_records(tmp_path / "big.json")
    feed = _feed_lines()
    if store == "sqlite":
        db = tmp_path / "tickets.sqlite"
        write_database(db, OLD)
        target = ["--db", str(db)]
        began: Callable[[], bool] = lambda: _sqlite_locked(db)  # noqa: E731
    else:
        dsns = cast(dict[str, str], request.getfixturevalue("pg"))
        target = ["--postgres", dsns["owner"]]
        began = lambda: _postgres_began(dsns["super"])  # noqa: E731
    # Started first and idle, so that its first line is applied as soon as it is fed.
    apply = _ticket_tools("apply", "-", *target, stdin=subprocess.PIPE)
    refresh = _ticket_tools("import", str(tmp_path / "big.json"), "--replace", *target)
    # The refresh began when it holds the lock; what came before, the snapshot replaces.
    deadline = time.monotonic() + GATE_SECONDS
    while not began() and refresh.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    during = refresh.poll() is None
    stdin = cast(IO[bytes], apply.stdin)
    try:
        for change in feed:
            stdin.write(json.dumps(change).encode() + b"\n")
            stdin.flush()
            time.sleep(0.002)
    finally:
        stdin.close()
    apply.wait(timeout=GATE_SECONDS)
    refreshed = refresh.communicate(timeout=GATE_SECONDS)
    with cast(IO[bytes], apply.stdout) as out, cast(IO[bytes], apply.stderr) as err:
        applied = (out.read(), err.read())
    assert (refresh.returncode, refreshed[1], apply.returncode, applied[1]) == (0, b"", 0, b"")
    if store == "sqlite":
        with sqlite3.connect(db) as connection:
            rows = connection.execute(
                "SELECT tenant, id, title, status FROM tickets ORDER BY tenant, id"
            ).fetchall()
    else:
        with psycopg.connect(dsns["super"]) as connection:
            rows = connection.execute(
                "SELECT tenant, id, title, status FROM tickets ORDER BY tenant, id"
            ).fetchall()
    expected = _oracle(snapshot, feed)
    assert (len(rows), [row for row in rows if row[0] == "t0"]) == (
        len(expected),
        [row for row in expected if row[0] == "t0"],
    )
    assert sorted(rows) == expected
    assert during  # the feed began while the refresh was still running


# A refresh from a versioned snapshot (docs/feed.md, "A refresh from a snapshot with
# versions"): one story, run on both stores.
START: Records = {
    f"alpha:TKT-{n}": {"id": f"TKT-{n}", "title": title, "status": "open"}
    for n, title in ((101, "a"), (102, "b"))
}


def _versioned(**tickets: tuple[str, int]) -> Records:
    return {
        f"alpha:{name.replace('_', '-')}": {
            "id": name.replace("_", "-"),
            "title": title,
            "status": "open",
            "version": version,
        }
        for name, (title, version) in tickets.items()
    }


def _titles(store: TicketStore) -> dict[str, str]:
    return {t["id"]: t["title"] for t in store.find("alpha", TicketFilter(), limit=EVERY)}


def check_a_versioned_refresh(
    writer: SQLiteWriter | PostgresWriter,
    replace: Callable[[Records, int | None], int],
    store: TicketStore,
    floor: Callable[[], list[tuple[int]]],
) -> None:
    """The source: 103 made at v1 and deleted at v2, 101 changed at v3, 104 (never held)
    deleted at v4; the snapshot at v4; then 102 changed at v6, 105 deleted at v7."""

    def up(n: int, v: int, title: str = "t") -> Change:
        return Change("upsert", "alpha", f"TKT-{n}", v, title, "open")

    def delete(n: int, v: int) -> Change:
        return Change("delete", "alpha", f"TKT-{n}", v)

    # The store lags: it has 101's change and two made after the snapshot, not the rest.
    assert writer.apply([up(101, 3, "a3"), up(102, 6, "b6"), delete(105, 7)]) == Counts(2, 1, 0)
    assert replace(_versioned(TKT_101=("a3", 3), TKT_102=("b", 0)), 4) == 2
    # 101 as the snapshot has it; 102's later change and 105's tombstone kept; floor 4.
    assert (_titles(store), floor()) == ({"TKT-101": "a3", "TKT-102": "b6"}, [(4,)])
    # The older feed replayed: every change is stale, 103 stays deleted, 105 too.
    old = [up(103, 1, "c"), delete(103, 2), up(101, 3, "a3"), delete(104, 4), up(105, 5)]
    assert writer.apply(old) == Counts(0, 0, 5)
    assert _titles(store) == {"TKT-101": "a3", "TKT-102": "b6"}
    # Above the floor, a new key and a delete of an unknown key apply.
    assert writer.apply([up(106, 5, "f"), delete(104, 5)]) == Counts(1, 1, 0)
    # An older snapshot (at v1) after it: the floor keeps 103 deleted, newer tickets stay.
    snapshot = _versioned(TKT_101=("a", 0), TKT_102=("b", 0), TKT_103=("c", 1))
    assert replace(snapshot, 1) == 3
    assert (_titles(store), floor()) == (
        {"TKT-101": "a3", "TKT-102": "b6", "TKT-106": "f"},
        [(4,)],
    )
    assert writer.apply([up(103, 1), delete(104, 5), up(105, 7)]) == Counts(0, 0, 3)
    # A snapshot past everything: what it lacks at or below its high-water goes.
    assert replace(_versioned(TKT_102=("b9", 9)), 9) == 1
    assert (_titles(store), floor()) == ({"TKT-102": "b9"}, [(9,)])
    assert writer.apply([up(106, 8), up(105, 9), up(107, 10, "g")]) == Counts(1, 0, 2)
    # A refresh without versions is today's: every ticket at 0, no tombstone, no floor.
    assert replace(START, None) == 2
    assert (_titles(store), floor()) == ({"TKT-101": "a", "TKT-102": "b"}, [])
    assert writer.apply([up(103, 1, "c"), up(101, 0)]) == Counts(1, 0, 1)


def test_a_versioned_refresh_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "tickets.sqlite"
    write_database(path, START)

    def floor() -> list[tuple[int]]:
        with sqlite3.connect(path) as connection:
            return connection.execute("SELECT version FROM high_water").fetchall()

    with SQLiteStore.open(path) as store, SQLiteWriter.open(path) as writer:
        check_a_versioned_refresh(
            writer,
            lambda records, high_water: writer.replace(record_rows(records), high_water=high_water),
            store,
            floor,
        )


def test_a_versioned_refresh_on_postgres(postgres_database: PostgresDatabase, scratch: str) -> None:
    cluster = postgres_database.cluster
    owner = cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, START, grant_to=READER)

    def floor() -> list[tuple[int]]:
        with psycopg.connect(owner) as connection:
            return connection.execute("SELECT version FROM high_water").fetchall()

    with (
        PostgresStore.open(cluster.dsn(READER, scratch)) as store,
        PostgresWriter.open(owner) as writer,
    ):
        check_a_versioned_refresh(
            writer,
            lambda records, high_water: replace_dsn(owner, records, high_water=high_water),
            store,
            floor,
        )
