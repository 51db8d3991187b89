"""SQLiteWriter: batches of feed changes, the version rule, tombstones, all or nothing."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from feed_changes import check_the_version_rule, delete, up
from ticket_tools import TicketFilter, fixture_records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Change, Counts
from ticket_tools.stores.sqlite import writer as sqlite_writer
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.schema import check_file
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.writer import VERSION_KEYS, SQLiteWriter

Dump = tuple[list[tuple[object, ...]], list[tuple[object, ...]]]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def dump(path: Path) -> Dump:
    """Return every ticket row and every tombstone, versions included, in key order."""
    connection = sqlite3.connect(path)
    try:
        tickets = connection.execute("SELECT * FROM tickets ORDER BY tenant, id").fetchall()
        tombstones = connection.execute("SELECT * FROM tombstones ORDER BY tenant, id").fetchall()
    finally:
        connection.close()
    return tickets, tombstones


def test_an_imported_database_is_in_wal_mode(database: Path) -> None:
    connection = sqlite3.connect(database)
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()


def test_the_version_rule_on_sqlite(database: Path) -> None:
    with SQLiteWriter.open(database) as writer, SQLiteStore.open(database) as store:
        check_the_version_rule(writer, store)
    tickets, tombstones = dump(database)
    assert tickets[:2] == [
        ("alpha", "TKT-101", "Login works again", "open", 5),
        ("alpha", "TKT-102", "back", "open", 9),
    ]
    assert tombstones == []


def test_a_delete_of_an_unknown_key_leaves_a_tombstone(database: Path) -> None:
    with SQLiteWriter.open(database) as writer:
        assert writer.apply([delete("TKT-999", 4, "gamma")]) == Counts(0, 1, 0)
        assert writer.apply([up("TKT-999", 3, tenant="gamma")]) == Counts(0, 0, 1)
        assert writer.apply([delete("TKT-999", 6, "gamma")]) == Counts(0, 1, 0)
    assert dump(database)[1] == [("gamma", "TKT-999", 6)]


def test_tombstones_never_reach_a_reader(database: Path) -> None:
    with SQLiteWriter.open(database) as writer:
        writer.apply([delete(f"TKT-{n}", 1) for n in (101, 102, 104, 107, 110, 112, 115)])
    with SQLiteStore.open(database) as store:
        assert store.find("alpha", TicketFilter(), limit=None) == []
        assert store.get("alpha", "TKT-101") is None
        assert store.find("beta", TicketFilter(), limit=1) == [
            {"id": "TKT-103", "title": "Refund not received", "status": "open"}
        ]


def test_replaying_a_batch_changes_nothing(database: Path) -> None:
    batch = [up("TKT-101", 4), delete("TKT-102", 2), up("TKT-120", 1, "new"), up("TKT-101", 3)]
    with SQLiteWriter.open(database) as writer:
        assert writer.apply(batch) == Counts(2, 1, 1)
        after = dump(database)
        assert writer.apply(batch) == Counts(0, 0, 4)
    assert dump(database) == after


def test_a_batch_wider_than_one_version_lookup_sees_every_stored_version(database: Path) -> None:
    # Stored versions are read VERSION_KEYS keys a statement: a batch of 2.5 times that
    # many keys, tickets and tombstones at every position, needs three statements.
    count = VERSION_KEYS * 5 // 2
    keys = [(f"w{n % 3}", f"TKT-{n // 3:03d}") for n in range(count)]
    assert len(set(keys)) == count
    with SQLiteWriter.open(database) as writer:
        first = [up(t, 2, tenant=w) if n % 2 else delete(t, 2, w) for n, (w, t) in enumerate(keys)]
        assert writer.apply(first) == Counts(count // 2, count - count // 2, 0)
        # Every key is stored at 2 (a ticket or a tombstone): all of 1 is stale, all of 3 wins.
        assert writer.apply([up(t, 1, tenant=w) for w, t in keys]) == Counts(0, 0, count)
        assert writer.apply([delete(t, 3, w) for w, t in reversed(keys)]) == Counts(0, count, 0)
    tickets, tombstones = dump(database)
    assert not [row for row in tickets if str(row[0]).startswith("w")]
    assert tombstones == sorted((w, t, 3) for w, t in keys)


@pytest.mark.parametrize(
    ("variables", "statements"),
    [
        pytest.param(None, 3, id="VERSION_KEYS-a-statement"),
        pytest.param(999, 6, id="sqlite-before-3.32-499-a-statement"),
    ],
)
def test_version_lookups_fit_the_librarys_variable_limit(
    database: Path, variables: int | None, statements: int
) -> None:
    count = VERSION_KEYS * 5 // 2
    keys = [(f"w{n % 3}", f"TKT-{n // 3:03d}") for n in range(count)]
    with SQLiteWriter.open(database) as writer:
        connection = writer._connection
        if variables is not None:
            connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variables)
        lookups: list[str] = []
        connection.set_trace_callback(
            lambda sql: lookups.append(sql) if sql.startswith("WITH keys") else None
        )
        assert writer.apply([up(t, 2, tenant=w) for w, t in keys]) == Counts(count, 0, 0)
        assert writer.apply([up(t, 2, tenant=w) for w, t in keys]) == Counts(0, 0, count)
    assert len(lookups) == 2 * statements


def test_only_the_rows_that_are_there_are_dropped(database: Path) -> None:
    # alpha's TKT-101 is a ticket; TKT-102 is buried below; TKT-120 is neither.
    with SQLiteWriter.open(database) as writer:
        assert writer.apply([delete("TKT-102", 1)]) == Counts(0, 1, 0)
        drops: list[str] = []
        writer._connection.set_trace_callback(
            lambda sql: drops.append(sql) if sql.startswith("DELETE") else None
        )
        batch = [up("TKT-102", 2), delete("TKT-101", 2), up("TKT-120", 1), delete("TKT-121", 1)]
        assert writer.apply(batch) == Counts(2, 2, 0)
    assert drops == [
        "DELETE FROM tombstones WHERE tenant = 'alpha' AND id = 'TKT-102'",
        "DELETE FROM tickets WHERE tenant = 'alpha' AND id = 'TKT-101'",
    ]
    tickets, tombstones = dump(database)
    assert [row for row in tickets if row[:2] in (("alpha", "TKT-102"), ("alpha", "TKT-120"))] == [
        ("alpha", "TKT-102", "t", "open", 2),
        ("alpha", "TKT-120", "t", "open", 1),
    ]
    assert tombstones == [("alpha", "TKT-101", 2), ("alpha", "TKT-121", 1)]


def test_a_failing_batch_writes_nothing(database: Path) -> None:
    before = dump(database)
    # A value the schema's CHECK refuses, after a valid change in the same batch.
    broken = Change("upsert", "alpha", "TKT-121", 1, b"not text", "open")  # type: ignore[arg-type]
    with SQLiteWriter.open(database) as writer:
        with pytest.raises(StoreFailure) as raised:
            writer.apply([up("TKT-120", 1), broken])
        assert (raised.value.reason, str(raised.value)) == (
            "unavailable",
            f"cannot write {database}: SQLITE_CONSTRAINT_CHECK",
        )
        assert dump(database) == before
        # The writer is usable afterwards.
        assert writer.apply([up("TKT-120", 1)]) == Counts(1, 0, 0)


def test_an_interrupted_batch_is_rolled_back(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = dump(database)
    write = SQLiteWriter._write

    def write_then_interrupt(self: SQLiteWriter, *arguments: object) -> None:
        write(self, *arguments)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteWriter, "_write", write_then_interrupt)
    with SQLiteWriter.open(database) as writer, pytest.raises(KeyboardInterrupt):
        writer.apply([up("TKT-101", 1), delete("TKT-102", 1)])
    assert dump(database) == before


def test_a_full_disk_fails_the_batch_whole(database: Path) -> None:
    before = dump(database)
    with SQLiteWriter.open(database) as writer:
        writer._connection.execute("PRAGMA max_page_count = 3")  # the file is 3 pages now
        big = [up(f"TKT-{n}", 1, "x" * 3000) for n in range(200, 300)]
        with pytest.raises(StoreFailure) as raised:
            writer.apply(big)
    assert str(raised.value) == f"cannot write {database}: database or disk is full (SQLITE_FULL)"
    assert dump(database) == before


def test_a_second_writer_waits_then_fails_as_locked(database: Path) -> None:
    with SQLiteWriter.open(database) as first, SQLiteWriter.open(database, timeout=0) as second:
        first._connection.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreFailure) as raised:
            second.apply([up("TKT-101", 1)])
        first._connection.execute("ROLLBACK")
        assert raised.value.reason == "locked"
        assert second.apply([up("TKT-101", 1)]) == Counts(1, 0, 0)


def test_a_batch_that_finds_the_lock_taken_says_so_then_waits_for_it(database: Path) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # what an import --replace holds until its commit
    announced: list[str] = []

    def on_wait() -> None:
        announced.append("waiting")
        holder.execute("COMMIT")  # the lock is let go while the batch waits for it

    with SQLiteWriter.open(database, timeout=30, on_wait=on_wait) as writer:
        assert writer.apply([up("TKT-101", 1)]) == Counts(1, 0, 0)
        assert announced == ["waiting"]
        assert writer.apply([up("TKT-102", 1)]) == Counts(1, 0, 0)  # the lock was free
        assert announced == ["waiting"]
    holder.close()


def test_a_batch_that_waits_past_its_timeout_fails_as_locked(database: Path) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    announced: list[str] = []
    writer = SQLiteWriter.open(database, timeout=0.1, on_wait=lambda: announced.append("w"))
    with writer, pytest.raises(StoreFailure) as raised:
        writer.apply([up("TKT-101", 1)])
    holder.close()
    assert (raised.value.reason, announced) == ("locked", ["w"])


class _FailingBegin:
    """A connection whose BEGIN IMMEDIATE fails for another reason than a taken lock."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> sqlite3.Cursor:
        if sql == "BEGIN IMMEDIATE":
            raise sqlite3.OperationalError("disk I/O error")
        return self._connection.execute(sql, cast(Sequence[Any], parameters))

    def __getattr__(self, name: str) -> object:
        return getattr(self._connection, name)


def test_a_begin_that_fails_otherwise_is_not_announced_as_a_wait(database: Path) -> None:
    connection = sqlite3.connect(database, isolation_level=None)
    announced: list[str] = []
    failing = cast(sqlite3.Connection, _FailingBegin(connection))
    writer = SQLiteWriter(failing, str(database), on_wait=lambda: announced.append("w"))
    with pytest.raises(StoreFailure) as raised:
        writer.apply([up("TKT-101", 1)])
    connection.close()
    assert (raised.value.reason, str(raised.value), announced) == (
        "unavailable",
        f"cannot write {database} (OperationalError)",
        [],
    )


def test_open_switches_a_rollback_journal_database_to_wal(database: Path) -> None:
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()
    with SQLiteWriter.open(database):
        pass
    connection = sqlite3.connect(database)
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


def _old_schema(path: Path) -> None:
    write_database(path, fixture_records())
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA user_version = 3")
    connection.close()


@pytest.mark.parametrize(
    ("make", "reason", "message"),
    [
        pytest.param(lambda path: None, "missing", "no database at {path}", id="missing"),
        pytest.param(Path.mkdir, "unavailable", "cannot write {path}: it is a folder", id="dir"),
        pytest.param(
            _socket,
            "unavailable",
            "cannot write {path}: it is not a regular file",
            id="socket",
        ),
        pytest.param(
            _old_schema,
            "schema",
            "{path} is not a ticket database of schema version 6: it has schema version 3; "
            "to migrate, import its records again into a new file "
            "(ticket-tools import RECORDS --db NEW_FILE)",
            id="schema-version-3",
        ),
    ],
)
def test_open_refuses(tmp_path: Path, make: object, reason: str, message: str) -> None:
    path = tmp_path / "tickets.sqlite"
    make(path)  # type: ignore[operator]
    with pytest.raises(StoreFailure) as raised:
        SQLiteWriter.open(path)
    assert (raised.value.reason, str(raised.value)) == (reason, message.format(path=path))


def test_a_file_replaced_after_the_check_is_sqlite_s_own_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database replaced by a socket between the check and SQLite's own open.
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())

    def check_then_replace(checked: Path, action: str) -> None:
        check_file(checked, action)
        checked.unlink()
        _socket(checked)

    monkeypatch.setattr(sqlite_writer, "check_file", check_then_replace)
    with pytest.raises(StoreFailure) as raised:
        SQLiteWriter.open(path)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot write {path}: unable to open database file (SQLITE_CANTOPEN)",
    )


def test_open_refuses_a_locked_database(database: Path) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreFailure) as raised:
        SQLiteWriter.open(database, timeout=0)
    holder.execute("ROLLBACK")
    holder.close()
    assert (raised.value.reason, str(raised.value)) == (
        "locked",
        f"{database} is locked by another connection; try again",
    )


def test_a_closed_writer_says_so(database: Path) -> None:
    writer = SQLiteWriter.open(database)
    writer.close()
    with pytest.raises(StoreFailure) as raised:
        writer.apply([up("TKT-101", 1)])
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot write {database}: the writer is closed",
    )
