"""Import streams a records file: rows checked and written as read, all or nothing, keys once."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import Records, TicketFilter, fixture_records
from ticket_tools.cli import main
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.postgres import importer as postgres_importer
from ticket_tools.stores.postgres.importer import copy_line, import_dsn, import_records
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.records import StoredRow
from ticket_tools.stores.records_stream import RecordsReader
from ticket_tools.stores.sqlite import importer as sqlite_import
from ticket_tools.stores.sqlite.importer import insert_batches, write_database
from ticket_tools.stores.sqlite.schema import create_schema
from ticket_tools.stores.sqlite.store import SQLiteStore

Captured = pytest.CaptureFixture[str]
STORES = ("sqlite", "postgres")
KEY_TWICE = "record {n} (in file order): the key was given before"


def _ticket(tenant: str, number: int, version: int | None = None) -> tuple[str, dict[str, object]]:
    ticket: dict[str, object] = {"id": f"TKT-{number}", "title": f"t {number}", "status": "open"}
    if version is not None:
        ticket["version"] = version
    return f"{tenant}:TKT-{number}", ticket


def _pairs_file(path: Path, pairs: list[tuple[str, object]]) -> Path:
    # Written by hand: a dict could not hold a key twice.
    path.write_text("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}")
    return path


def _rows(count: int, taken: list[int], fail_after: int | None = None) -> Iterator[StoredRow]:
    for number in range(count):
        if number == fail_after:
            raise RuntimeError("the source failed")
        taken.append(number)
        yield StoredRow("alpha", f"TKT-{100 + number}", f"t {number}", "open")


@pytest.fixture
def pg_dsn(postgres_database: PostgresDatabase, scratch: str) -> str:
    return postgres_database.cluster.dsn(OWNER, scratch)


def _target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[str]:
    if kind == "sqlite":
        return ["--db", str(tmp_path / "tickets.sqlite")]
    return ["--postgres", request.getfixturevalue("pg_dsn")]


def _held(kind: str, target: list[str]) -> list[str] | None:
    """The alpha ids a target holds, None when there is no database or table."""
    if kind == "sqlite":
        if not Path(target[1]).exists():
            return None
        with SQLiteStore.open(target[1]) as store:
            return [t["id"] for t in store.find("alpha", TicketFilter(), limit=None)]
    with psycopg.connect(target[1]) as connection:
        if connection.execute("SELECT to_regclass('tickets')").fetchone() == (None,):
            return None
        rows = connection.execute("SELECT id FROM tickets WHERE tenant = 'alpha' ORDER BY id")
        return [ticket_id for (ticket_id,) in rows]


# --- All or nothing: a record refused last writes nothing ---


@pytest.mark.parametrize("kind", STORES)
def test_a_bad_last_record_writes_nothing(
    kind: str, tmp_path: Path, capsys: Captured, request: pytest.FixtureRequest
) -> None:
    pairs: list[tuple[str, object]] = [_ticket("alpha", n) for n in range(100, 150)]
    pairs.append(("alpha:TKT-150", {"id": "TKT-151", "title": "t", "status": "open"}))
    records = _pairs_file(tmp_path / "records.json", pairs)
    target = _target(kind, tmp_path, request)
    assert main(["import", str(records), *target]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {records}: record 51 (in file order): "
        'the key is not "tenant:" followed by the ticket\'s own id\n',
    )
    assert _held(kind, target) is None
    assert [path.name for path in tmp_path.iterdir()] == ["records.json"]


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("versions", [False, True], ids=["swap", "merge"])
def test_a_refresh_with_a_bad_last_record_changes_nothing(
    kind: str, versions: bool, tmp_path: Path, capsys: Captured, request: pytest.FixtureRequest
) -> None:
    target = _target(kind, tmp_path, request)
    old = _pairs_file(tmp_path / "old.json", [_ticket("alpha", 101), _ticket("alpha", 102)])
    assert main(["import", str(old), *target]) == 0
    version = 1 if versions else None
    pairs: list[tuple[str, object]] = [_ticket("alpha", n, version) for n in range(200, 230)]
    pairs.append(_ticket("alpha", 230, -1 if versions else None) if versions else ("x", 1))
    new = _pairs_file(tmp_path / "new.json", pairs)
    options = ["--replace", *(["--high-water", "5"] if versions else [])]
    capsys.readouterr()
    assert main(["import", str(new), *options, *target]) == 2
    rule = (
        "the version is not an integer from 0 to 2^63-1"
        if versions
        else "id, title and status must be strings of valid Unicode"
    )
    assert capsys.readouterr() == ("", f"ticket-tools: {new}: record 31 (in file order): {rule}\n")
    assert _held(kind, target) == ["TKT-101", "TKT-102"]


# --- A key given twice ---


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(([101, 102, 103, 101], 4), id="after-rows-in-order"),
        pytest.param(([101, 102, 102, 103], 3), id="next-to-itself"),
        pytest.param(([105, 101, 104, 101, 103], 4), id="among-unsorted-rows"),
        pytest.param(([105, 106, 107, 101, 106], 5), id="unsorted-after-rows-in-order"),
    ],
)
@pytest.mark.parametrize("refresh", [[], ["--replace"], ["--replace", "--high-water", "9"]])
def test_a_key_given_twice_is_refused_with_its_second_position(
    kind: str,
    case: tuple[list[int], int],
    refresh: list[str],
    capsys: Captured,
    request: pytest.FixtureRequest,
) -> None:
    numbers, second = case
    tmp_path: Path = request.getfixturevalue("tmp_path")
    target = _target(kind, tmp_path, request)
    version = 1 if "--high-water" in refresh else None
    if refresh:
        old = _pairs_file(tmp_path / "old.json", [_ticket("alpha", 107, version)])
        assert main(["import", str(old), *(["--high-water", "0"] if version else []), *target]) == 0
    records = _pairs_file(
        tmp_path / "records.json", [_ticket("alpha", n, version) for n in numbers]
    )
    capsys.readouterr()
    assert main(["import", str(records), *refresh, *target]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {records}: {KEY_TWICE.format(n=second)}\n")
    assert _held(kind, target) == (["TKT-107"] if refresh else None)


def test_a_check_the_rows_were_not_checked_by_is_not_taken_for_a_key_twice() -> None:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(connection)
    rows = [StoredRow("a", "TKT-102", "t", "open"), StoredRow("a", "TKT-101", "t", "open", -1)]
    with pytest.raises(sqlite3.IntegrityError) as raised:
        insert_batches(connection, rows, None)
    assert (
        str(raised.value) == "CHECK constraint failed: typeof(version) = 'integer' AND version >= 0"
    )


def test_a_unique_violation_without_a_copy_line_is_a_store_failure(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_importer, "copy_line", lambda context: None)
    rows = iter([StoredRow("a", "TKT-101", "t", "open")] * 2)
    with pytest.raises(StoreFailure) as raised:
        import_dsn(pg_dsn, rows)
    assert raised.value.reason == "unavailable"


@pytest.mark.parametrize(
    ("context", "line"),
    [
        pytest.param("COPY tickets, line 7", 7, id="a-line"),
        pytest.param('COPY tickets_next, line 12: "alpha\tTKT-101"', 12, id="the-next-table"),
        pytest.param("SQL statement", None, id="not-a-copy"),
        pytest.param(None, None, id="no-context"),
    ],
)
def test_copy_line(context: str | None, line: int | None) -> None:
    assert copy_line(context) == line


# --- Lazily: the rows are taken as they are written, never all first ---


def test_sqlite_writes_the_first_batch_before_taking_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_import, "IMPORT_BATCH", 3)
    taken: list[int] = []
    seen: list[tuple[int, int]] = []
    path = tmp_path / "tickets.sqlite"
    count = write_database(
        path, _rows(7, taken), on_progress=lambda n: seen.append((n, len(taken)))
    )
    assert (count, seen) == (7, [(3, 3), (6, 6), (7, 7)])


def test_postgres_copies_the_first_batch_before_taking_more(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_importer, "IMPORT_BATCH", 3)
    taken: list[int] = []
    seen: list[tuple[int, int]] = []
    count = import_dsn(pg_dsn, _rows(7, taken), on_progress=lambda n: seen.append((n, len(taken))))
    assert (count, seen) == (7, [(3, 3), (6, 6), (7, 7)])


def test_sqlite_commits_nothing_when_the_source_fails_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_import, "IMPORT_BATCH", 3)
    taken: list[int] = []
    with pytest.raises(RuntimeError):
        write_database(tmp_path / "tickets.sqlite", _rows(10, taken, fail_after=8))
    assert (taken, list(tmp_path.iterdir())) == (list(range(8)), [])


def test_postgres_commits_nothing_when_the_source_fails_late(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_importer, "IMPORT_BATCH", 3)
    taken: list[int] = []
    with pytest.raises(RuntimeError), psycopg.connect(pg_dsn) as connection:
        import_records(connection, _rows(10, taken, fail_after=8))
    assert (taken, _held("postgres", ["--postgres", pg_dsn])) == (list(range(8)), None)


# --- Rows out of key order ---


@pytest.mark.parametrize("kind", STORES)
def test_a_file_out_of_key_order_imports_in_key_order(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setattr(sqlite_import, "IMPORT_BATCH", 4)
    records: Records = dict(reversed(list(fixture_records().items())))
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    target = _target(kind, tmp_path, request)
    assert (
        main(["import", str(path), *target, *(["--grant-to", READER] * (kind == "postgres"))]) == 0
    )
    expected = [
        {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"},
        {"id": "TKT-102", "title": "CSV export times out", "status": "closed"},
    ]
    if kind == "sqlite":
        with SQLiteStore.open(target[1]) as store:
            found = store.find("alpha", TicketFilter(), limit=2)
    else:
        reader = target[1].replace(f"user={OWNER}", f"user={READER}")
        with PostgresStore.open(reader) as store:
            found = store.find("alpha", TicketFilter(), limit=2)
    assert found == expected


# --- The reader's counts ---


def test_the_reader_counts_records_bytes_and_cleaned_titles() -> None:
    data = json.dumps(
        {
            "alpha:TKT-101": {"id": "TKT-101", "title": "a\u200bb", "status": "open"},
            "alpha:TKT-102": {"id": "TKT-102", "title": "c", "status": "open"},
        }
    ).encode()
    reader = RecordsReader(io.BytesIO(data), chunk_bytes=16)
    rows = reader.rows()
    first = next(rows)
    assert (first, reader.read, reader.cleaned, reader.bytes_read) == (
        StoredRow("alpha", "TKT-101", "ab", "open"),
        1,
        1,
        80,
    )
    assert (list(rows), reader.read, reader.bytes_read) == (
        [StoredRow("alpha", "TKT-102", "c", "open")],
        2,
        len(data),
    )
