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
    bad.write_text(json.dumps({"alpha:TKT-1": {"id": "TKT-1", "title": "t", "status": "open"}}))
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


VERSIONED = {
    "alpha:TKT-101": {"id": "TKT-101", "title": "v3", "status": "open", "version": 3},
    "alpha:TKT-300": {"id": "TKT-300", "title": "new", "status": "open", "version": 7},
}
NEEDS_HIGH_WATER = (
    "a refresh from tickets with versions needs the snapshot's high-water version (--high-water N)"
)
NEEDS_VERSIONS = "a high-water version (--high-water) needs tickets with versions"


def _write(path: Path, records: object) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _ids(capsys: Captured, *store: str) -> list[tuple[str, str]]:
    page = _search(capsys, *store)
    return [(t["id"], t["title"]) for t in page["tickets"]]  # type: ignore[index]


def test_a_versioned_refresh_of_an_sqlite_database(tmp_path: Path, capsys: Captured) -> None:
    db = tmp_path / "tickets.sqlite"
    write_database(db, fixture_records())
    snapshot = _write(tmp_path / "snapshot.json", VERSIONED)
    assert main(["import", str(snapshot), "--replace", "--db", str(db), "--high-water", "8"]) == 0
    assert capsys.readouterr() == (f"merged 2 tickets into {db} up to version 8\n", "")
    assert _ids(capsys, "--db", str(db)) == [("TKT-101", "v3"), ("TKT-300", "new")]
    # The floor holds: an older change to a key the snapshot lacks is stale.
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        '{"op": "upsert", "key": "alpha:TKT-102", "version": 8, '
        '"ticket": {"id": "TKT-102", "title": "old", "status": "open"}}\n'
        '{"op": "delete", "key": "alpha:TKT-300", "version": 7}\n'
    )
    assert main(["apply", str(feed), "--db", str(db)]) == 0
    assert capsys.readouterr().out.endswith(": 0 upserted, 0 deleted, 2 stale\n")


def test_a_versioned_refresh_of_a_postgres_database(
    postgres_database: PostgresDatabase, scratch: str, tmp_path: Path, capsys: Captured
) -> None:
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    snapshot = _write(tmp_path / "snapshot.json", VERSIONED)
    argv = ["import", str(snapshot), "--replace", "--postgres", owner]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {snapshot}: {NEEDS_HIGH_WATER}\n")
    assert main([*argv, "--high-water", "8"]) == 0
    assert capsys.readouterr() == (f"merged 2 tickets into {describe(owner)} up to version 8\n", "")
    reader = postgres_database.cluster.dsn(READER, scratch)
    assert _ids(capsys, "--postgres", reader) == [("TKT-101", "v3"), ("TKT-300", "new")]


def test_a_versioned_import_keeps_the_versions_and_the_floor(
    tmp_path: Path, capsys: Captured
) -> None:
    db = tmp_path / "tickets.sqlite"
    snapshot = _write(tmp_path / "snapshot.json", VERSIONED)
    assert main(["import", str(snapshot), "--db", str(db), "--high-water", "9"]) == 0
    assert capsys.readouterr() == (f"imported 2 tickets into {db}\n", "")
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        '{"op": "delete", "key": "alpha:TKT-101", "version": 3}\n'  # stale: the ticket's 3
        '{"op": "delete", "key": "alpha:TKT-102", "version": 9}\n'  # stale: the floor's 9
        '{"op": "delete", "key": "alpha:TKT-300", "version": 8}\n'  # 8 > 7: applied
    )
    assert main(["apply", str(feed), "--db", str(db)]) == 0
    assert capsys.readouterr().out.endswith(": 0 upserted, 1 deleted, 2 stale\n")
    assert _ids(capsys, "--db", str(db)) == [("TKT-101", "v3")]


def test_a_versioned_import_into_postgres_keeps_the_floor(
    postgres_database: PostgresDatabase, scratch: str, tmp_path: Path, capsys: Captured
) -> None:
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    snapshot = _write(tmp_path / "snapshot.json", VERSIONED)
    argv = ["import", str(snapshot), "--postgres", owner, "--grant-to", READER]
    assert main([*argv, "--high-water", "9"]) == 0
    assert capsys.readouterr() == (f"imported 2 tickets into {describe(owner)}\n", "")
    with psycopg.connect(owner) as connection:
        assert connection.execute("SELECT version FROM high_water").fetchall() == [(9,)]
        versions = connection.execute("SELECT id, version FROM tickets ORDER BY id").fetchall()
    assert versions == [("TKT-101", 3), ("TKT-300", 7)]
    # A table that holds a floor is not empty: import only fills an empty one.
    with psycopg.connect(owner) as connection:
        connection.execute("DELETE FROM tickets")
    assert main(argv) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {describe(owner)} already holds tickets; "
        "import only fills an empty table\n",
    )


@pytest.mark.parametrize(
    ("records", "argv", "message"),
    [
        pytest.param(VERSIONED, ["--replace"], NEEDS_HIGH_WATER, id="replace-without-high-water"),
        pytest.param(
            NEW, ["--replace", "--high-water", "5"], NEEDS_VERSIONS, id="replace-no-versions"
        ),
        pytest.param(NEW, ["--high-water", "5"], NEEDS_VERSIONS, id="import-no-versions"),
        pytest.param(
            {"alpha:TKT-102": {"id": "TKT-102", "title": "t", "status": "open"}, **VERSIONED},
            ["--replace", "--high-water", "5"],
            'record 2 (in file order): either every ticket has a "version" or none does',
            id="mixed",
        ),
        pytest.param(
            {"alpha:TKT-101": {"id": "TKT-101", "title": "t", "status": "open", "version": "3"}},
            ["--replace", "--high-water", "5"],
            "record 1 (in file order): the version is not an integer from 0 to 2^63-1",
            id="version-a-string",
        ),
    ],
)
def test_what_a_versioned_import_refuses(
    tmp_path: Path, capsys: Captured, records: object, argv: list[str], message: str
) -> None:
    db = tmp_path / "tickets.sqlite"
    write_database(db, fixture_records())
    path = _write(tmp_path / "records.json", records)
    target = db if "--replace" in argv else tmp_path / "new.sqlite"
    assert main(["import", str(path), *argv, "--db", str(target)]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {path}: {message}\n")
    assert _ids(capsys, "--db", str(db))[0] == ("TKT-101", "Login fails after password reset")
    assert not (tmp_path / "new.sqlite").exists()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("-1", id="negative"),
        pytest.param("+5", id="plus"),
        pytest.param("5.0", id="float"),
        pytest.param(" 5", id="space"),
        pytest.param(str(2**63), id="too-big"),
        pytest.param("1" * 20, id="too-long"),
    ],
)
def test_a_high_water_that_is_not_a_version(
    tmp_path: Path, new_records: Path, capsys: Captured, value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(
            ["import", str(new_records), "--db", str(tmp_path / "x.sqlite"), "--high-water", value]
        )
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "ticket-tools import: error: argument --high-water: expected an integer from 0 to 2^63-1\n"
    )


# Issue 32, point 3: a status other than "open" or "closed" is refused by record, at
# import and at a refresh, on either store; nothing is written.
STATUS_RULE = 'the status is not "open" or "closed"'


@pytest.fixture(params=["sqlite", "postgres"])
def target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[list[str], list[str], list[str]]:
    """(the owner's store options, a new table's grant, a reader's store options)."""
    if request.param == "sqlite":
        db = str(tmp_path / "tickets.sqlite")
        return ["--db", db], [], ["--db", db]
    database: PostgresDatabase = request.getfixturevalue("postgres_database")
    scratch: str = request.getfixturevalue("scratch")
    return (
        ["--postgres", database.cluster.dsn(OWNER, scratch)],
        ["--grant-to", READER],
        ["--postgres", database.cluster.dsn(READER, scratch)],
    )


@pytest.mark.parametrize(
    ("status", "versions"),
    [
        pytest.param("Open", [], id="capitalised"),
        pytest.param("", [], id="empty"),
        pytest.param("pending", [], id="another-word"),
        pytest.param("open ", ["--high-water", "9"], id="trailing-space-versioned"),
    ],
)
def test_a_status_other_than_open_or_closed_is_refused_by_record(
    tmp_path: Path,
    capsys: Captured,
    target: tuple[list[str], list[str], list[str]],
    status: str,
    versions: list[str],
) -> None:
    owner, grant, reader = target
    version = {"version": 3} if versions else {}
    records = {
        "alpha:TKT-300": {"id": "TKT-300", "title": "new", "status": "open", **version},
        "alpha:TKT-301": {"id": "TKT-301", "title": "odd", "status": status, **version},
    }
    bad = _write(tmp_path / "bad.json", records)
    refused = ("", f"ticket-tools: {bad}: record 2 (in file order): {STATUS_RULE}\n")
    assert main(["import", str(bad), *owner, *grant, *versions]) == 2
    assert capsys.readouterr() == refused
    # Nothing was written: import, which only fills what is empty, takes a good file.
    assert main(["import", str(_write(tmp_path / "new.json", NEW)), *owner, *grant]) == 0
    capsys.readouterr()
    assert main(["import", str(bad), "--replace", *owner, *versions]) == 2
    assert capsys.readouterr() == refused
    assert _search(capsys, *reader) == NEW_PAGE
