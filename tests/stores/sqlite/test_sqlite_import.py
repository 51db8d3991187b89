"""write_database: what an import keeps, refuses and leaves behind (sqlite_import)."""

from __future__ import annotations

import os
import re
import resource
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from store_cases import EVERY
from ticket_tools import DictStore, TicketFilter, fixture_records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.records import RecordsError
from ticket_tools.stores.sqlite import importer as sqlite_import
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore
from wide_ids import SIX, numbered_records, widened


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def test_import_keeps_only_the_public_fields(database: Path) -> None:
    connection = sqlite3.connect(database)
    rows = connection.execute("SELECT * FROM tickets").fetchall()
    connection.close()
    assert rows == [
        ("alpha", "TKT-101", "Login fails after password reset", "open", 0),
        ("alpha", "TKT-102", "CSV export times out", "closed", 0),
        ("alpha", "TKT-104", "Settings crash", "open", 0),
        ("alpha", "TKT-107", "Login page slow on mobile", "open", 0),
        ("alpha", "TKT-110", "Invoice PDF missing logo", "closed", 0),
        ("alpha", "TKT-112", "Settings page shows wrong time zone", "open", 0),
        ("alpha", "TKT-115", "Password reset email delayed", "closed", 0),
        ("beta", "TKT-103", "Refund not received", "open", 0),
        ("beta", "TKT-104", "Private billing issue", "closed", 0),
        ("beta", "TKT-108", "Login fails after SSO change", "open", 0),
    ]
    # Internal notes are dropped, not hidden: they are nowhere in the file.
    assert [note in database.read_bytes() for note in (b"Escalated", b"Security", b"approved")] == [
        False,
        False,
        False,
    ]


def test_import_round_trip_matches_the_dict_store(database: Path) -> None:
    records = fixture_records()
    dict_store = DictStore(records)
    with SQLiteStore.open(database) as store:
        for key in records:
            tenant, ticket_id = key.split(":")
            assert store.get(tenant, ticket_id) == dict_store.get(tenant, ticket_id)
        for tenant in ("alpha", "beta", "gamma"):
            assert store.find(tenant, TicketFilter(), limit=None) == (
                dict_store.find(tenant, TicketFilter(), limit=EVERY)
            )


@pytest.mark.parametrize(
    ("digits", "records", "message"),
    [
        pytest.param(
            3,
            {"alpha:TKT-101": {"id": "TKT-102", "title": "t", "status": "open"}},
            'record 1 (in file order): the key is not "tenant:" followed by the ticket\'s own id',
            id="key-id-differs",
        ),
        pytest.param(
            3,
            {"alpha:TKT-1000": {"id": "TKT-1000", "title": "t", "status": "open"}},
            "record 1 (in file order): the id is not TKT- followed by exactly three digits",
            id="id-too-wide-to-page",
        ),
        pytest.param(
            6,
            {"alpha:TKT-104": {"id": "TKT-104", "title": "t", "status": "open"}},
            "record 1 (in file order): the id is not TKT- followed by exactly six digits",
            id="six-digits-given-three",
        ),
    ],
)
def test_import_refuses_malformed_records(
    tmp_path: Path, digits: int, records: dict[str, dict[str, str]], message: str
) -> None:
    # The rules themselves are tested in test_records; here, that nothing is written.
    with pytest.raises(RecordsError) as raised:
        write_database(tmp_path / "tickets.sqlite", records, id_format=IdFormat(digits))
    assert str(raised.value) == message
    assert list(tmp_path.iterdir()) == []  # no database and no temporary folder


def test_import_never_overwrites(database: Path) -> None:
    before = database.read_bytes()
    with pytest.raises(FileExistsError) as raised:
        write_database(database, {})
    assert str(raised.value) == f"{database} already exists"
    assert database.read_bytes() == before


def test_import_never_overwrites_a_file_created_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "tickets.sqlite"
    with pytest.raises(FileExistsError):
        write_database(path, fixture_records(), on_progress=lambda done: path.touch())
    assert [(child.name, child.read_bytes()) for child in tmp_path.iterdir()] == [
        ("tickets.sqlite", b"")
    ]


def test_import_reports_progress_per_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_import, "IMPORT_BATCH", 4)
    seen: list[int] = []
    count = write_database(tmp_path / "tickets.sqlite", fixture_records(), on_progress=seen.append)
    assert (count, seen) == (10, [4, 8, 10])


def test_from_records_with_a_file_path(tmp_path: Path) -> None:
    with SQLiteStore.from_records(fixture_records(), tmp_path / "t.sqlite") as store:
        assert store.get("beta", "TKT-104") == {
            "id": "TKT-104",
            "title": "Private billing issue",
            "status": "closed",
        }


def test_a_six_digit_import_opens_with_six_digits_and_matches_the_dict_store(
    tmp_path: Path,
) -> None:
    records = numbered_records(SIX, 30, "alpha") | widened(SIX)
    path = tmp_path / "six.sqlite"
    assert write_database(path, records, id_format=SIX) == 40
    dict_store = DictStore(records)
    with SQLiteStore.open(path, id_format=SIX) as store:
        for tenant in ("alpha", "beta"):
            assert store.find(tenant, TicketFilter(), limit=None) == (
                dict_store.find(tenant, TicketFilter(), limit=EVERY)
            )
        assert store.find("alpha", TicketFilter(after="TKT-000028"), limit=3) == [
            {"id": "TKT-000029", "title": "Ticket 29", "status": "closed"},
            {"id": "TKT-000101", "title": "Login fails after password reset", "status": "open"},
            {"id": "TKT-000102", "title": "CSV export times out", "status": "closed"},
        ]


def test_from_records_with_a_file_path_and_a_width(tmp_path: Path) -> None:
    with SQLiteStore.from_records(widened(SIX), tmp_path / "t.sqlite", id_format=SIX) as store:
        assert store.get("beta", "TKT-000104") == {
            "id": "TKT-000104",
            "title": "Private billing issue",
            "status": "closed",
        }


def test_import_builds_in_a_hidden_folder_beside_the_target(tmp_path: Path) -> None:
    # Beside it, so that the final link stays on one filesystem; hidden, and named after it.
    path = tmp_path / "tickets.sqlite"
    seen: list[list[str]] = []
    write_database(
        path,
        fixture_records(),
        on_progress=lambda done: seen.append(
            sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
        ),
    )
    assert len(seen) == 1
    folder, file = seen[0]
    assert re.fullmatch(r"\.tickets\.sqlite\.[a-z0-9_]+\.tmp", folder)
    assert file == f"{folder}/tickets.sqlite"
    assert [child.name for child in tmp_path.iterdir()] == ["tickets.sqlite"]


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    mask: int = request.param
    previous = os.umask(mask)
    yield mask
    os.umask(previous)


# Issue 12, item 5: the database was 0600 whatever the umask (mkstemp's mode, then a link).
@pytest.mark.parametrize(
    ("umask", "mode"),
    [
        pytest.param(0o022, 0o644, id="umask-022"),
        pytest.param(0o002, 0o664, id="umask-002"),
        pytest.param(0o077, 0o600, id="umask-077"),
        pytest.param(0o000, 0o666, id="umask-000"),
    ],
    indirect=["umask"],
)
def test_the_database_mode_follows_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    write_database(tmp_path / "tickets.sqlite", fixture_records())
    assert oct((tmp_path / "tickets.sqlite").stat().st_mode & 0o777) == oct(mode)


def many_records(tenants: int) -> dict[str, dict[str, str]]:
    """1,000 tickets per tenant (the most the id format allows), 200-character titles."""
    return {
        f"t{n}:TKT-{m:03d}": {"id": f"TKT-{m:03d}", "title": "x" * 200, "status": "open"}
        for n in range(tenants)
        for m in range(1000)
    }


@pytest.fixture
def file_size_limit() -> Iterator[int]:
    """Lower this process's file size limit, as `ulimit -f` would, for one test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = 200_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_write_sqlite_cannot_finish_is_a_store_error(
    tmp_path: Path, file_size_limit: int
) -> None:
    # Issue 12, item 4: this was an sqlite3.OperationalError (a traceback from the CLI).
    path = tmp_path / "tickets.sqlite"
    with pytest.raises(StoreFailure) as raised:
        write_database(path, many_records(5))
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot write {path}: disk I/O error (SQLITE_IOERR_WRITE)",
    )
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_leaves_nothing_behind(tmp_path: Path) -> None:
    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_database(tmp_path / "tickets.sqlite", fixture_records(), on_progress=interrupt)
    assert list(tmp_path.iterdir()) == []
