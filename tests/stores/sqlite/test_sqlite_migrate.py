"""`migrate_database`: a schema version 4 or 5 file gets the title index, in place, or nothing."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from ticket_tools import TicketFilter
from ticket_tools.stores import index_writes
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.migrate import migrate_database
from ticket_tools.stores.sqlite.schema import HIGH_WATER, SCHEMA, TOMBSTONES, schema_sql
from ticket_tools.stores.sqlite.store import SQLiteStore

RECORDS = {
    "alpha:TKT-101": {"id": "TKT-101", "title": "Kerberos login fails", "status": "open"},
    "alpha:TKT-102": {"id": "TKT-102", "title": "Printer jammed", "status": "closed"},
    "beta:TKT-101": {"id": "TKT-101", "title": "Kerberos ticket expired", "status": "open"},
}
ROWS = [
    ("alpha", "TKT-101", "Kerberos login fails", "open", 3),
    ("alpha", "TKT-102", "Printer jammed", "closed", 0),
    ("beta", "TKT-101", "Kerberos ticket expired", "open", 0),
]


@pytest.fixture(autouse=True)
def every_tenant_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)


def _old(path: Path, version: int, statements: list[str]) -> None:
    """Write a file as ticket-tools of schema `version` made it, with ROWS and a tombstone."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA application_id = 1414222897")
    connection.execute(f"PRAGMA user_version = {version}")
    for statement in statements:
        connection.execute(statement)
    connection.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?, ?)", ROWS)
    connection.execute("INSERT INTO tombstones VALUES ('alpha', 'TKT-103', 8)")
    connection.execute("PRAGMA journal_mode = WAL")
    connection.commit()
    connection.close()


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as connection:
        tables = [
            "tickets",
            "tombstones",
            "high_water",
            "title_grams",
            "gram_counts",
            "tenant_sizes",
        ]
        return {t: sorted(connection.execute(f"SELECT * FROM {t}")) for t in tables}  # noqa: S608


@pytest.mark.parametrize(
    ("version", "statements"),
    [
        pytest.param(4, [SCHEMA, TOMBSTONES], id="from-4"),
        pytest.param(5, [SCHEMA, TOMBSTONES, HIGH_WATER], id="from-5"),
    ],
)
def test_the_migration_keeps_the_rows_and_builds_the_index_an_import_would(
    tmp_path: Path, version: int, statements: list[str]
) -> None:
    path = tmp_path / "old.sqlite"
    _old(path, version, statements)
    progress: list[tuple[int, int]] = []
    assert migrate_database(path, on_progress=lambda *told: progress.append(told)) == 3
    assert progress == [(2, 3), (3, 3)]
    migrated = _dump(path)
    fresh = tmp_path / "fresh.sqlite"
    write_database(fresh, RECORDS)
    assert {
        t: rows for t, rows in migrated.items() if t.startswith(("title", "gram", "tenant"))
    } == {t: rows for t, rows in _dump(fresh).items() if t.startswith(("title", "gram", "tenant"))}
    assert (migrated["tickets"], migrated["tombstones"], migrated["high_water"]) == (
        ROWS,
        [("alpha", "TKT-103", 8)],
        [],
    )
    with SQLiteStore.open(path) as store:
        assert store.find("alpha", TicketFilter(text="kerberos"), limit=None) == [
            {"id": "TKT-101", "title": "Kerberos login fails", "status": "open"}
        ]
    # Once migrated, again is nothing.
    assert migrate_database(path) is None
    assert _dump(path) == migrated


def test_an_interrupted_migration_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _old(path, 5, [SCHEMA, TOMBSTONES, HIGH_WATER])
    before = _dump_old(path)

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate_database(path, on_progress=interrupt)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (5,)
        names = connection.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    assert names == [("high_water",), ("tickets",), ("tombstones",)]
    assert _dump_old(path) == before == ROWS


def _dump_old(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT * FROM tickets ORDER BY 1, 2").fetchall()


@pytest.mark.parametrize(
    ("make", "reason", "message"),
    [
        pytest.param(lambda path: None, "missing", "no database at {path}", id="missing"),
        pytest.param(Path.mkdir, "unavailable", "cannot write {path}: it is a folder", id="folder"),
        pytest.param(
            _socket,
            "unavailable",
            "cannot write {path}: it is not a regular file",
            id="a-socket",
        ),
        pytest.param(
            lambda path: path.write_text("{}"),
            "schema",
            "{path} is not an SQLite database",
            id="not-sqlite",
        ),
        pytest.param(
            lambda path: _old(path, 5, [SCHEMA, TOMBSTONES]),
            "schema",
            "{path} is not a ticket database of schema version 5: "
            "its tables differ from the ones import creates",
            id="a-version-5-file-without-high-water",
        ),
        pytest.param(
            lambda path: _old(path, 3, [SCHEMA, TOMBSTONES]),
            "schema",
            "{path} is not a ticket database of schema version 6: it has schema version 3; "
            "to migrate, import its records again into a new file "
            "(ticket-tools import RECORDS --db NEW_FILE)",
            id="version-3",
        ),
    ],
)
def test_what_the_migration_refuses(
    tmp_path: Path, make: object, reason: str, message: str
) -> None:
    path = tmp_path / "tickets.sqlite"
    make(path)  # type: ignore[operator]
    with pytest.raises(StoreFailure) as raised:
        migrate_database(path)
    assert (raised.value.reason, str(raised.value)) == (reason, message.format(path=path))


def test_a_file_replaced_after_the_check_is_sqlite_s_own_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A socket put where the checked file was: SQLite's own words, still one StoreFailure.
    path = tmp_path / "tickets.sqlite"
    _socket(path)
    monkeypatch.setattr("ticket_tools.stores.sqlite.migrate.check_file", lambda path, action: None)
    with pytest.raises(StoreFailure) as raised:
        migrate_database(path)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot write {path}: unable to open database file (SQLITE_CANTOPEN)",
    )


def test_a_file_of_another_width_is_refused_with_both_widths(tmp_path: Path) -> None:
    path = tmp_path / "six.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA application_id = 1414222897")
    connection.execute("PRAGMA user_version = 5")
    for statement in (
        schema_sql(IdFormat(6)),
        TOMBSTONES.replace("[0-9]" * 3, "[0-9]" * 6),
        HIGH_WATER,
    ):
        connection.execute(statement)
    connection.commit()
    connection.close()
    with pytest.raises(StoreFailure) as raised:
        migrate_database(path)
    assert str(raised.value) == f"{path} holds ticket IDs of 6 digits, not 3: use --id-digits 6"
    assert migrate_database(path, id_format=IdFormat(6)) == 0
