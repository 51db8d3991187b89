"""The command line with a database: import, --db for call and acceptance, and its failures."""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ticket_tools import cli, fixture_records
from ticket_tools.cli import progress
from ticket_tools.cli import stores as cli_stores
from ticket_tools.stores import records_stream
from ticket_tools.stores.sqlite import importer as sqlite_import
from ticket_tools.stores.sqlite import store as sqlite_store


@pytest.fixture
def records_file(tmp_path: Path) -> Path:
    path = tmp_path / "records.json"
    path.write_text(json.dumps(fixture_records()), encoding="utf-8")
    return path


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    sqlite_import.write_database(path, fixture_records())
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
    "wrong-schema": "{db} is not a ticket database of schema version 6: "
    "it was not made by ticket-tools import",
    "folder": "cannot read {db}: it is a folder",
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
        # WAL: only exclusive locking mode keeps a reader out.
        writer.execute("PRAGMA locking_mode = EXCLUSIVE")
        writer.execute("BEGIN EXCLUSIVE")
    elif kind == "folder":
        db = tmp_path
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
        ("", f"ticket-tools: cannot write {db}: No such file or directory\n"),
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_import_draws_a_progress_line_on_a_terminal(
    tmp_path: Path,
    records_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli_stores, "PROGRESS_MIN_BYTES", 10)
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(sqlite_import, "IMPORT_BATCH", 6)
    # Read in chunks of 512 bytes: the share of the file grows as the records are read.
    monkeypatch.setattr(records_stream, "CHUNK_BYTES", 512)
    size = records_file.stat().st_size
    status = cli.main(["import", str(records_file), "--db", str(tmp_path / "t.sqlite")])
    assert (status, size, terminal.getvalue()) == (
        0,
        1066,
        "\rimporting: 6 records, 96% of the file\rimporting: 10 records, 100% of the file\n",
    )
    assert capsys.readouterr().out == f"imported 10 tickets into {tmp_path / 't.sqlite'}\n"


def test_small_import_draws_no_line_even_on_a_terminal(
    tmp_path: Path, records_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    status = cli.main(["import", str(records_file), "--db", str(tmp_path / "t.sqlite")])
    assert (status, terminal.getvalue()) == (0, "")


def test_import_refuses_a_file_that_is_not_an_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = tmp_path / "records.json"
    records.write_text("[]", encoding="utf-8")
    status = cli.main(["import", str(records), "--db", str(tmp_path / "t.sqlite")])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f'ticket-tools: {records}: not a JSON object of "tenant:TKT-123" -> ticket\n'),
    )


# --- No traceback (issue 12, item 4) ---


@pytest.fixture
def big_records_file(tmp_path: Path) -> Path:
    """5,000 tickets with 200-character titles: a database of about 1.3 MB."""
    path = tmp_path / "records.json"
    records = {
        f"t{n}:TKT-{m:03d}": {"id": f"TKT-{m:03d}", "title": "x" * 200, "status": "open"}
        for n in range(5)
        for m in range(1000)
    }
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture
def file_size_limit(big_records_file: Path) -> Iterator[int]:
    """Lower this process's file size limit, as `ulimit -f` would, for one test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = 200_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_import_past_the_file_size_limit_is_one_line_and_exit_2(
    tmp_path: Path,
    big_records_file: Path,
    file_size_limit: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Was an sqlite3.OperationalError traceback and exit 1.
    db = tmp_path / "t.sqlite"
    status = cli.main(["import", str(big_records_file), "--db", str(db)])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f"ticket-tools: cannot write {db}: disk I/O error (SQLITE_IOERR_WRITE)\n"),
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["records.json"]


# Runs the real command line, stopping inside the import's one transaction (the database
# half-built in its temporary folder) until a signal arrives.
_IMPORT_THAT_WAITS = """
import sys, time
from ticket_tools import cli
from ticket_tools.stores.sqlite import importer as sqlite_import

insert_rows = sqlite_import.insert_rows

def wait_in_the_transaction(done):
    print("half-built", flush=True)
    time.sleep(60)

sqlite_import.insert_rows = lambda c, rows, _, **kw: insert_rows(
    c, rows, wait_in_the_transaction, **kw
)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_ctrl_c_during_import_is_one_line_and_exit_130(tmp_path: Path, records_file: Path) -> None:
    db = tmp_path / "t.sqlite"
    importer = subprocess.Popen(
        [sys.executable, "-c", _IMPORT_THAT_WAITS, "import", str(records_file), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert importer.stdout is not None
    assert importer.stdout.readline() == b"half-built\n"
    (folder,) = (path for path in tmp_path.iterdir() if path.name.endswith(".tmp"))
    assert [path.name for path in folder.iterdir()] == ["t.sqlite"]
    importer.send_signal(signal.SIGINT)
    out, err = importer.communicate(timeout=60)
    assert (importer.returncode, out, err) == (130, b"", b"ticket-tools: interrupted\n")
    # Nothing half-written: no database, no temporary folder.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["records.json"]


@pytest.mark.parametrize(
    ("argv", "stdin", "expected"),
    [
        pytest.param(
            [b"search_tickets", b"-", b"--tenant", b"alpha"],
            b'{"query": "\xff"}',
            (2, b"", b"ticket-tools: the arguments are not UTF-8 text\n"),
            id="stdin-not-utf8",
        ),
        pytest.param(
            [b"search_tickets", b"{}", b"--tenant", b"\xff"],
            b"",
            (2, b"", b"ticket-tools: --tenant must be UTF-8 text\n"),
            id="tenant-not-utf8",
        ),
        pytest.param(
            [b"search_tickets", b'{"query": "\\ud800"}', b"--tenant", b"alpha"],
            b"",
            (0, b'{"ok": true, "tickets": [], "next_cursor": null}\n', b""),
            id="lone-surrogate-query",
        ),
    ],
)
def test_text_that_is_not_utf8_with_a_database(
    database: Path, argv: list[bytes], stdin: bytes, expected: tuple[int, bytes, bytes]
) -> None:
    # Issue 12, items 1 and 4: each of these was a UnicodeEncodeError traceback with --db.
    completed = subprocess.run(
        [sys.executable, "-m", "ticket_tools.cli", "call", *argv, "--db", str(database)],
        input=stdin,
        capture_output=True,
        check=False,
        env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""},
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == expected


# --- A records file read as a stream: each fault named as a whole-file read names it ---

SYNTAX_ERROR = "the records in {path} are not valid JSON: a syntax error"


@pytest.mark.parametrize(
    ("content", "err"),
    [
        pytest.param(b"", SYNTAX_ERROR, id="empty"),
        pytest.param(b'"x', SYNTAX_ERROR, id="x"),
        pytest.param(b'"x"', '{path}: not a JSON object of "tenant:TKT-123" -> ticket', id="str"),
        pytest.param(b"\xff[]", "cannot read {path}: it is not UTF-8 text", id="not-utf8-first"),
        pytest.param(
            b'{"alpha:TKT-101": {"id": "TKT-101", "title": "t", "status": "open"}, oops}',
            SYNTAX_ERROR,
            id="cut-after-a-record",
        ),
        pytest.param(
            b'{"alpha:TKT-101": "\xff"}', "cannot read {path}: it is not UTF-8 text", id="not-utf8"
        ),
        pytest.param(
            b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "the records in {path} are not valid JSON: arrays or objects nested too deeply",
            id="deep",
        ),
        pytest.param(
            b'{"alpha:TKT-101": {"id": "TKT-101", "title": "t", "status": "open"}, "b": "'
            + b"x" * (1 << 20)
            + b'"}',
            "{path}: record 2 (in file order): the record is longer than 1048576 characters",
            id="too-long",
        ),
    ],
)
def test_import_names_a_file_fault_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, err: str
) -> None:
    records = tmp_path / "records.json"
    records.write_bytes(content)
    status = cli.main(["import", str(records), "--db", str(tmp_path / "t.sqlite")])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f"ticket-tools: {err.format(path=records)}\n"),
    )
    assert [path.name for path in tmp_path.iterdir()] == ["records.json"]


def test_import_of_a_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["import", str(tmp_path), "--db", str(tmp_path / "t.sqlite")])
    assert (status, capsys.readouterr()) == (
        2,
        ("", f"ticket-tools: cannot read {tmp_path}: Is a directory\n"),
    )
