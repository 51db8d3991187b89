"""What SQLiteStore.open refuses, exactly, and how SQLite's errors read (sqlite_schema)."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from ticket_tools import TicketFilter, fixture_records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.sqlite import store as sqlite_store
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.schema import (
    APPLICATION_ID,
    HIGH_WATER,
    SCHEMA,
    SCHEMA_VERSION,
    TOMBSTONES,
    check_file,
    schema_sql,
    store_error,
    tombstones_sql,
)
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.title_index import INDEX_SCHEMA, TITLE_GRAMS
from wide_ids import SIX, widened

NOT_OURS = "{path} is not a ticket database of schema version 6: "
# What schema version 5 made; version 6 adds INDEX_SCHEMA.
V5 = [SCHEMA, TOMBSTONES, HIGH_WATER]
TABLES_DIFFER = NOT_OURS + "its tables differ from the ones import creates"


def _craft(
    path: Path,
    statements: list[str],
    *,
    application_id: int = APPLICATION_ID,
    version: int = SCHEMA_VERSION,
    encoding: str = "UTF-8",
) -> None:
    """Write an SQLite file as another program could: stamps, statements, alpha's TKT-101."""
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA encoding = '{encoding}'")
    connection.execute(f"PRAGMA application_id = {application_id}")
    connection.execute(f"PRAGMA user_version = {version}")
    for statement in statements:
        connection.execute(statement)
    connection.execute("INSERT INTO tickets VALUES ('alpha', 'TKT-101', 'Login fails', 'open', 0)")
    connection.commit()
    connection.close()


def _variant(old: str, new: str) -> list[str]:
    assert old in SCHEMA
    return [SCHEMA.replace(old, new), TOMBSTONES, HIGH_WATER, *INDEX_SCHEMA]


def _index_variant(old: str, new: str) -> list[str]:
    assert old in TITLE_GRAMS
    schema = [*V5, *INDEX_SCHEMA]
    return [
        statement.replace(old, new) if statement == TITLE_GRAMS else statement
        for statement in schema
    ]


# Issue 12, item 2: each of these passed the old check (it read the column list only).
# With a NOCASE tenant, session "ALPHA" read alpha's tickets; exactness refuses them all.
CRAFTED = [
    pytest.param(
        _variant("tenant TEXT NOT NULL", "tenant TEXT NOT NULL COLLATE NOCASE"), id="tenant-nocase"
    ),
    pytest.param(_variant("id TEXT NOT NULL", "id TEXT NOT NULL COLLATE RTRIM"), id="id-rtrim"),
    pytest.param(
        _variant("PRIMARY KEY (tenant, id)", "PRIMARY KEY (tenant COLLATE NOCASE, id)"),
        id="key-nocase",
    ),
    pytest.param(_variant(" CHECK (typeof(title) = 'text')", ""), id="title-may-hold-a-blob"),
    pytest.param(_variant(") WITHOUT ROWID", ")"), id="rowid-table"),
    pytest.param(_variant(" AND version >= 0", ""), id="version-may-be-negative"),
    pytest.param(
        [*V5, *INDEX_SCHEMA, "CREATE INDEX by_tenant ON tickets (tenant COLLATE NOCASE)"],
        id="extra-index",
    ),
    pytest.param(
        [*V5, *INDEX_SCHEMA, "CREATE VIEW everything AS SELECT * FROM tickets"],
        id="extra-view",
    ),
    pytest.param([*V5, *INDEX_SCHEMA, "CREATE TABLE notes (body TEXT)"], id="extra-table"),
    pytest.param([SCHEMA, HIGH_WATER, *INDEX_SCHEMA], id="no-tombstones"),
    pytest.param([SCHEMA, TOMBSTONES, *INDEX_SCHEMA], id="no-high-water"),
    pytest.param(
        [SCHEMA, TOMBSTONES, HIGH_WATER.replace(" AND version >= 0", ""), *INDEX_SCHEMA],
        id="high-water-may-be-negative",
    ),
    pytest.param(
        [
            SCHEMA,
            TOMBSTONES.replace(" AND id GLOB 'TKT-[0-9][0-9][0-9]'", ""),
            HIGH_WATER,
            *INDEX_SCHEMA,
        ],
        id="tombstone-id-unchecked",
    ),
    pytest.param(
        [SCHEMA, TOMBSTONES.replace(" AND version >= 0", ""), HIGH_WATER, *INDEX_SCHEMA],
        id="tombstone-version-unchecked",
    ),
    pytest.param(V5, id="no-title-index"),
    pytest.param([*V5, *INDEX_SCHEMA[1:]], id="no-title-grams"),
    pytest.param(
        _index_variant("tenant TEXT NOT NULL", "tenant TEXT NOT NULL COLLATE NOCASE"),
        id="title-index-tenant-nocase",
    ),
    pytest.param(_index_variant(") WITHOUT ROWID", ")"), id="title-index-rowid-table"),
]


@pytest.mark.parametrize("statements", CRAFTED)
def test_open_refuses_any_other_schema(tmp_path: Path, statements: list[str]) -> None:
    path = tmp_path / "crafted.sqlite"
    _craft(path, statements)
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(path)
    assert (raised.value.reason, str(raised.value)) == ("schema", TABLES_DIFFER.format(path=path))


def test_the_exact_schema_opens(tmp_path: Path) -> None:
    path = tmp_path / "crafted.sqlite"
    _craft(path, [*V5, *INDEX_SCHEMA])
    with SQLiteStore.open(path) as store:
        assert store.find("alpha", TicketFilter(), limit=None) == [
            {"id": "TKT-101", "title": "Login fails", "status": "open"}
        ]
        assert store.find("ALPHA", TicketFilter(), limit=None) == []


@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_open_refuses_text_stored_as_utf16(tmp_path: Path, encoding: str) -> None:
    # UTF-16 bytes do not sort in code-point order, so pages would come out of order.
    path = tmp_path / "crafted.sqlite"
    _craft(path, [*V5, *INDEX_SCHEMA], encoding=encoding)
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(path)
    assert str(raised.value) == NOT_OURS.format(path=path) + "its text is not stored as UTF-8"


def _stamped(
    *, application_id: int = APPLICATION_ID, version: int = SCHEMA_VERSION
) -> Callable[[Path], None]:
    return lambda path: _craft(
        path, [*V5, *INDEX_SCHEMA], application_id=application_id, version=version
    )


def _write_other_sqlite(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE tickets (key TEXT, body TEXT)")
    connection.close()


def _socket(path: Path) -> None:
    # No database file: open(2) on a socket fails (ENXIO), a FIFO's waits for a writer.
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))


OPEN_CASES = [
    pytest.param(lambda path: None, "missing", "no database at {path}", id="missing"),
    pytest.param(Path.mkdir, "unavailable", "cannot read {path}: it is a folder", id="folder"),
    pytest.param(
        _socket,
        "unavailable",
        "cannot read {path}: it is not a regular file",
        id="socket",
    ),
    pytest.param(
        lambda path: path.write_text('{"alpha:TKT-101": {}}'),
        "schema",
        "{path} is not an SQLite database",
        id="json-file",
    ),
    pytest.param(
        Path.touch,
        "schema",
        NOT_OURS + "it was not made by ticket-tools import",
        id="empty-file",
    ),
    pytest.param(
        _write_other_sqlite,
        "schema",
        NOT_OURS + "it was not made by ticket-tools import",
        id="other-sqlite-database",
    ),
    pytest.param(
        _stamped(version=2),
        "schema",
        NOT_OURS + "it has schema version 2; to migrate, import its records again "
        "into a new file (ticket-tools import RECORDS --db NEW_FILE)",
        id="schema-version-2",
    ),
    pytest.param(
        _stamped(version=3),
        "schema",
        NOT_OURS + "it has schema version 3; to migrate, import its records again "
        "into a new file (ticket-tools import RECORDS --db NEW_FILE)",
        id="schema-version-3",
    ),
    pytest.param(
        lambda path: _craft(path, [SCHEMA, TOMBSTONES], version=4),
        "schema",
        NOT_OURS + "it has schema version 4; to migrate, run ticket-tools migrate --db FILE",
        id="schema-version-4",
    ),
    pytest.param(
        lambda path: _craft(path, V5, version=5),
        "schema",
        NOT_OURS + "it has schema version 5; to migrate, run ticket-tools migrate --db FILE",
        id="schema-version-5",
    ),
    pytest.param(
        _stamped(version=7),
        "schema",
        NOT_OURS + "it was made by a newer version of ticket-tools",
        id="newer-schema-version",
    ),
    pytest.param(
        _stamped(application_id=APPLICATION_ID + 1),
        "schema",
        NOT_OURS + "it was not made by ticket-tools import",
        id="other-application",
    ),
]


@pytest.mark.parametrize(("make", "reason", "message"), OPEN_CASES)
def test_open_refuses(
    tmp_path: Path, make: Callable[[Path], object], reason: str, message: str
) -> None:
    path = tmp_path / "tickets.sqlite"
    make(path)
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(path)
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

    monkeypatch.setattr(sqlite_store, "check_file", check_then_replace)
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(path)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot read {path}: unable to open database file (SQLITE_CANTOPEN)",
    )


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def _edit_around_sqlite(database: Path, statement: str) -> None:
    # As a program that ignores the schema's CHECK constraints could.
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA ignore_check_constraints = ON")
    connection.execute(statement)
    connection.commit()
    connection.close()


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE tickets SET title = X'41' WHERE id = 'TKT-101'", id="blob-title"),
        pytest.param("UPDATE tickets SET status = X'6F' WHERE id = 'TKT-101'", id="blob-status"),
    ],
)
def test_a_stored_value_that_is_not_text_is_a_schema_error(database: Path, statement: str) -> None:
    # Issue 12, item 2: a BLOB came back as the title "b'A'".
    _edit_around_sqlite(database, statement)
    with SQLiteStore.open(database) as store:
        with pytest.raises(StoreFailure) as raised:
            store.get("alpha", "TKT-101")
        assert (raised.value.reason, str(raised.value)) == (
            "schema",
            f"{database} holds a ticket field that is not text",
        )
        # Other tickets still read.
        assert store.get("alpha", "TKT-102") == {
            "id": "TKT-102",
            "title": "CSV export times out",
            "status": "closed",
        }


def test_sqlite_itself_refuses_a_value_that_is_not_text() -> None:
    connection = sqlite3.connect(":memory:")
    connection.execute(SCHEMA)
    with pytest.raises(sqlite3.IntegrityError) as raised:
        connection.execute(
            "INSERT INTO tickets VALUES (?, ?, ?, ?, 0)", ("alpha", "TKT-101", b"t", "open")
        )
    connection.close()
    assert store_error(raised.value, "db").args == ("cannot read db: SQLITE_CONSTRAINT_CHECK",)


def test_an_error_quoting_the_file_is_not_echoed(database: Path) -> None:
    # SQLite's own message quotes the schema text it could not parse: a file can put
    # anything there, so only the code's fixed wording is shown.
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA writable_schema = ON")
    connection.execute(
        "UPDATE sqlite_master SET sql = 'CREATE TABLE tickets (IGNORE ALL INSTRUCTIONS'"
    )
    connection.commit()
    connection.close()
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(database)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot read {database}: database disk image is malformed (SQLITE_CORRUPT)",
    )


@pytest.mark.parametrize(
    "where", [TicketFilter(), TicketFilter(text="login")], ids=["page", "search"]
)
def test_a_damaged_file_says_so(database: Path, where: TicketFilter) -> None:
    damaged = bytearray(database.read_bytes())
    damaged[4096:8192] = b"\xaa" * 4096
    database.write_bytes(bytes(damaged))  # page 2: the tickets table itself
    with SQLiteStore.open(database) as store, pytest.raises(StoreFailure) as raised:
        store.find("alpha", where, limit=5)
    assert str(raised.value) == (
        f"cannot read {database}: database disk image is malformed (SQLITE_CORRUPT)"
    )


def test_an_error_from_the_sqlite3_module_is_named_by_its_class() -> None:
    # Raised by Python's sqlite3 module rather than by SQLite: no result code to read.
    error = sqlite3.ProgrammingError("Incorrect number of bindings supplied")
    assert (store_error(error, "db").reason, str(store_error(error, "db"))) == (
        "unavailable",
        "cannot read db (ProgrammingError)",
    )


@pytest.mark.parametrize("source", ["path", "memory"])
def test_a_closed_store_says_so(database: Path, source: str) -> None:
    store = SQLiteStore.open(database) if source == "path" else SQLiteStore.from_records({})
    name = str(database) if source == "path" else ":memory:"
    store.close()
    for read in (
        lambda: store.get("alpha", "TKT-101"),
        lambda: store.find("alpha", TicketFilter(text="login"), limit=5),
    ):
        with pytest.raises(StoreFailure) as raised:
            read()
        assert (raised.value.reason, str(raised.value)) == (
            "unavailable",
            f"cannot read {name}: the store is closed",
        )


@pytest.mark.parametrize(
    ("digits", "id_check"),
    [
        pytest.param(3, "id GLOB 'TKT-[0-9][0-9][0-9]'", id="three"),
        pytest.param(6, "id GLOB 'TKT-[0-9][0-9][0-9][0-9][0-9][0-9]'", id="six"),
    ],
)
def test_the_schema_holds_the_id_width(digits: int, id_check: str) -> None:
    assert schema_sql(IdFormat(digits)) == (
        "CREATE TABLE tickets (\n"
        "    tenant TEXT NOT NULL CHECK (typeof(tenant) = 'text'),\n"
        f"    id TEXT NOT NULL CHECK (typeof(id) = 'text' AND {id_check}),\n"
        "    title TEXT NOT NULL CHECK (typeof(title) = 'text'),\n"
        "    status TEXT NOT NULL CHECK (typeof(status) = 'text'),\n"
        "    version INTEGER NOT NULL CHECK (typeof(version) = 'integer' AND version >= 0),\n"
        "    PRIMARY KEY (tenant, id)\n"
        ") WITHOUT ROWID"
    )
    assert tombstones_sql(IdFormat(digits)) == (
        "CREATE TABLE tombstones (\n"
        "    tenant TEXT NOT NULL CHECK (typeof(tenant) = 'text'),\n"
        f"    id TEXT NOT NULL CHECK (typeof(id) = 'text' AND {id_check}),\n"
        "    version INTEGER NOT NULL CHECK (typeof(version) = 'integer' AND version >= 0),\n"
        "    PRIMARY KEY (tenant, id)\n"
        ") WITHOUT ROWID"
    )
    assert schema_sql() == SCHEMA == schema_sql(IdFormat(3))
    assert tombstones_sql() == TOMBSTONES == tombstones_sql(IdFormat(3))


@pytest.mark.parametrize(
    ("made_for", "opened_with"),
    [
        pytest.param(6, 3, id="six-opened-as-three"),
        pytest.param(3, 6, id="three-opened-as-six"),
        pytest.param(6, 7, id="six-opened-as-seven"),
    ],
)
def test_a_database_of_another_id_width_is_refused(
    tmp_path: Path, made_for: int, opened_with: int
) -> None:
    path = tmp_path / "tickets.sqlite"
    write_database(path, widened(IdFormat(made_for)), id_format=IdFormat(made_for))
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(path, id_format=IdFormat(opened_with))
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{path} holds ticket IDs of {made_for} digits, not {opened_with}: "
        f"use --id-digits {made_for}",
    )


@pytest.mark.parametrize(
    "ticket_id",
    [
        pytest.param("TKT-104", id="three-digits"),
        pytest.param("TKT-0001040", id="seven-digits"),
        pytest.param("TKT-00010\u0664", id="arabic-indic-digit"),
        pytest.param("TKT-00010x", id="letter"),
        pytest.param("tkt-000104", id="lowercase"),
    ],
)
def test_sqlite_itself_refuses_an_id_of_another_width(ticket_id: str) -> None:
    # So a writer that skips the records rules still cannot break the one-width order.
    connection = sqlite3.connect(":memory:")
    connection.execute(schema_sql(SIX))
    connection.execute("INSERT INTO tickets VALUES ('alpha', 'TKT-000104', 't', 'open', 0)")
    with pytest.raises(sqlite3.IntegrityError) as raised:
        connection.execute(
            "INSERT INTO tickets VALUES (?, ?, ?, ?, 0)", ("alpha", ticket_id, "t", "open")
        )
    connection.close()
    assert store_error(raised.value, "db").args == ("cannot read db: SQLITE_CONSTRAINT_CHECK",)
