"""The command line with a database: import, --db for call and acceptance, and its failures."""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ticket_tools import cli, fixture_records, sqlite_store


@pytest.fixture
def records_file(tmp_path: Path) -> Path:
    path = tmp_path / "records.json"
    path.write_text(json.dumps(fixture_records()), encoding="utf-8")
    return path


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    sqlite_store.write_database(path, fixture_records())
    return path


def test_import_writes_a_database(
    tmp_path: Path, records_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tickets.sqlite"
    status = cli.main(["import", str(records_file), "--db", str(path)])
    # Not a terminal (capsys), so no progress bar on stderr.
    assert (status, capsys.readouterr()) == (0, (f"imported 10 tickets into {path}\n", ""))


def test_call_reads_the_database(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "beta"]
    status = cli.main([*args, "--db", str(database)])
    out, err = capsys.readouterr()
    assert (status, json.loads(out), err) == (
        0,
        {
            "ok": True,
            "ticket": {"id": "TKT-104", "title": "Private billing issue", "status": "closed"},
        },
        "",
    )


def test_acceptance_passes_on_the_database(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["acceptance", "--db", str(database)])
    out, err = capsys.readouterr()
    assert (status, out.splitlines()[-1], err) == (0, "13 passed, 0 failed", "")


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["acceptance"], id="acceptance"),
        pytest.param(["call", "search_tickets", "{}", "--tenant", "alpha"], id="call"),
    ],
)
def test_records_and_db_are_mutually_exclusive(
    argv: list[str], records_file: Path, database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main([*argv, "--records", str(records_file), "--db", str(database)])
    out, err = capsys.readouterr()
    assert (raised.value.code, out, err.splitlines()[-1].split(": error: ")[1]) == (
        2,
        "",
        "argument --db: not allowed with argument --records",
    )


UNUSABLE = {
    "missing": "no database at {db}",
    "locked": "{db} is locked by another connection; try again",
    "not-sqlite": "{db} is not an SQLite database",
    "wrong-schema": "{db} is not a ticket-tools database (schema version 1)",
}


@pytest.fixture(params=sorted(UNUSABLE))
def unusable(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    database: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Path, str]]:
    """Yield a database path the CLI cannot use, and the one line it must print."""
    kind: str = request.param
    writer = None
    if kind == "missing":
        db = tmp_path / "missing.sqlite"
    elif kind == "locked":
        monkeypatch.setattr(sqlite_store, "DEFAULT_BUSY_TIMEOUT", 0.0)
        db = database
        writer = sqlite3.connect(db, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
    elif kind == "not-sqlite":
        db = tmp_path / "records.sqlite"
        db.write_text("{}", encoding="utf-8")
    else:
        db = tmp_path / "other.sqlite"
        connection = sqlite3.connect(db)
        connection.execute("CREATE TABLE notes (body TEXT)")
        connection.close()
    yield db, UNUSABLE[kind].format(db=db)
    if writer is not None:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["call", "search_tickets", "{}", "--tenant", "alpha"], id="call"),
        pytest.param(["acceptance"], id="acceptance"),
    ],
)
def test_unusable_database_is_one_line_and_exit_2(
    argv: list[str], unusable: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, message = unusable
    status = cli.main([*argv, "--db", str(db)])
    assert (status, capsys.readouterr()) == (2, ("", f"ticket-tools: {message}\n"))


def test_import_refuses_an_existing_database(
    database: Path, records_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["import", str(records_file), "--db", str(database)])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f"ticket-tools: {database} already exists; import only creates new files\n"),
    )


def test_import_refuses_malformed_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "records.json"
    records.write_text(
        json.dumps({"alpha:TKT-101": {"id": "TKT-102", "title": "t", "status": "open"}}),
        encoding="utf-8",
    )
    status = cli.main(["import", str(records), "--db", str(tmp_path / "t.sqlite")])
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: {records}: record 1 (in file order): "
            'the key is not "tenant:" followed by the ticket\'s own id\n',
        ),
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["records.json"]


def test_import_into_a_missing_folder(
    tmp_path: Path, records_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "no-such-folder" / "t.sqlite"
    status = cli.main(["import", str(records_file), "--db", str(db)])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f"ticket-tools: cannot write {db}: FileNotFoundError\n"),
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_import_draws_a_progress_bar_on_a_terminal(
    tmp_path: Path,
    records_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli, "PROGRESS_MIN_TICKETS", 10)
    monkeypatch.setattr(sqlite_store, "IMPORT_BATCH", 6)
    status = cli.main(["import", str(records_file), "--db", str(tmp_path / "t.sqlite")])
    assert (status, terminal.getvalue()) == (
        0,
        "\rimporting [##################            ]  60% 6/10"
        "\rimporting [##############################] 100% 10/10\n",
    )
    assert capsys.readouterr().out == f"imported 10 tickets into {tmp_path / 't.sqlite'}\n"


def test_small_import_draws_no_bar_even_on_a_terminal(
    tmp_path: Path, records_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    status = cli.main(["import", str(records_file), "--db", str(tmp_path / "t.sqlite")])
    assert (status, terminal.getvalue()) == (0, "")
