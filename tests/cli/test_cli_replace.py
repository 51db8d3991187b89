"""`ticket-tools import RECORDS --replace`: a full refresh of a served database, one line out."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import fixture_records
from ticket_tools.cli import main
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.schema import describe
from ticket_tools.stores.sqlite.importer import write_database
from wide_ids import SIX, widened

Captured = pytest.CaptureFixture[str]
NEW = {"alpha:TKT-300": {"id": "TKT-300", "title": "new", "status": "open", "note": "x"}}
NEW_PAGE = {
    "ok": True,
    "tickets": [{"id": "TKT-300", "title": "new", "status": "open"}],
    "next_cursor": None,
}


@pytest.fixture
def new_records(tmp_path: Path) -> Path:
    path = tmp_path / "new.json"
    path.write_text(json.dumps(NEW), encoding="utf-8")
    return path


def _search(capsys: Captured, *store: str) -> object:
    assert main(["call", "search_tickets", "{}", "--tenant", "alpha", *store]) == 0
    return json.loads(capsys.readouterr().out)


def test_replace_an_sqlite_database(tmp_path: Path, new_records: Path, capsys: Captured) -> None:
    db = tmp_path / "tickets.sqlite"
    write_database(db, fixture_records())
    assert main(["import", str(new_records), "--replace", "--db", str(db)]) == 0
    assert capsys.readouterr() == (f"replaced the tickets of {db} with 1\n", "")
    assert _search(capsys, "--db", str(db)) == NEW_PAGE


def test_replace_a_postgres_database(
    postgres_database: PostgresDatabase, scratch: str, new_records: Path, capsys: Captured
) -> None:
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    assert main(["import", str(new_records), "--replace", "--postgres", owner]) == 0
    assert capsys.readouterr() == (f"replaced the tickets of {describe(owner)} with 1\n", "")
    reader = postgres_database.cluster.dsn(READER, scratch)
    assert _search(capsys, "--postgres", reader) == NEW_PAGE


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--replace", "--db", "missing.sqlite"], "no database at missing.sqlite", id="no-db"
        ),
        pytest.param(
            ["--replace", "--postgres", "host=/nowhere", "--grant-to", "r"],
            "--grant-to applies to a new table; --replace keeps the table's grants",
            id="grant-to",
        ),
    ],
)
def test_what_replace_refuses(  # noqa: PLR0917
    tmp_path: Path,
    new_records: Path,
    capsys: Captured,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(new_records), *argv]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {message}\n")


def test_a_malformed_records_file_replaces_nothing(tmp_path: Path, capsys: Captured) -> None:
    db = tmp_path / "tickets.sqlite"
    write_database(db, fixture_records())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"alpha:TKT-1": {"id": "TKT-1", "title": "t", "status": "o"}}))
    assert main(["import", str(bad), "--replace", "--db", str(db)]) == 2
    assert capsys.readouterr().err == (
        f"ticket-tools: {bad}: record 1 (in file order): "
        "the id is not TKT- followed by exactly three digits\n"
    )
    assert _search(capsys, "--db", str(db))["tickets"][0]["id"] == "TKT-101"  # type: ignore[index]


def test_replace_with_id_digits(
    postgres_database: PostgresDatabase, scratch: str, tmp_path: Path, capsys: Captured
) -> None:
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps(widened(SIX, NEW)), encoding="utf-8")
    db = tmp_path / "six.sqlite"
    write_database(db, widened(SIX), id_format=SIX)
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, widened(SIX), grant_to=READER, id_format=SIX)
    reader = postgres_database.cluster.dsn(READER, scratch)
    for store, source in ((["--db", str(db)], str(db)), (["--postgres", owner], describe(owner))):
        # The store is refused at another width, before its file is read under the lock.
        assert main(["import", str(wide), "--replace", *store]) == 2
        assert capsys.readouterr().err == (
            f"ticket-tools: {source} holds ticket IDs of 6 digits, not 3: use --id-digits 6\n"
        )
        assert main(["import", str(new_records_of(tmp_path)), "--replace", *store]) == 2
        assert capsys.readouterr().err == (
            f"ticket-tools: {source} holds ticket IDs of 6 digits, not 3: use --id-digits 6\n"
        )
        # The records are checked at the width named.
        assert (
            main(["import", str(new_records_of(tmp_path)), "--replace", *store, "--id-digits", "6"])
            == 2
        )
        assert capsys.readouterr().err == (
            f"ticket-tools: {new_records_of(tmp_path)}: record 1 (in file order): "
            "the id is not TKT- followed by exactly six digits\n"
        )
        assert main(["import", str(wide), "--replace", *store, "--id-digits", "6"]) == 0
        assert capsys.readouterr() == (f"replaced the tickets of {source} with 1\n", "")
    for store in (["--db", str(db)], ["--postgres", reader]):
        assert _search(capsys, *store, "--id-digits", "6") == {
            "ok": True,
            "tickets": [{"id": "TKT-000300", "title": "new", "status": "open"}],
            "next_cursor": None,
        }


def new_records_of(tmp_path: Path) -> Path:
    path = tmp_path / "narrow.json"
    path.write_text(json.dumps(NEW), encoding="utf-8")
    return path
