"""Every way a records file reaches `ticket-tools import`, through the real command (issue 30).

In one write and split at every byte; at the record limit and one past it; endless; from
closed and redirected standard streams, FIFOs and symbolic links; and signals at each kind
of wait (opening the file, reading it, the writers' lock of --replace, a connect), once and
twice. Each ends with its documented status and one line, and nothing half-imported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from command_inputs import (
    SIGNALS,
    TERMINATED,
    Ended,
    blocked_in_open,
    closing,
    ended,
    lock_waiters,
    outcomes,
    reap,
    send,
    silent_server,
    start,
    wait_until,
)
from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import fixture_records
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.schema import WRITER_LOCK
from ticket_tools.stores.records_stream import MAX_RECORD_CHARS
from ticket_tools.stores.sqlite.importer import write_database


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


def ticket(number: int, title: str = "imported") -> dict[str, str]:
    return {"id": f"TKT-{number}", "title": title, "status": "open"}


RECORDS = {f"alpha:TKT-{n}": ticket(n, f"caf\u00e9 {n}") for n in (101, 102, 103)}
RECORDS_BYTES = json.dumps(RECORDS, indent=1).encode()


def titles(db: Path) -> list[tuple[str, str]]:
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute("SELECT id, title FROM tickets ORDER BY id").fetchall()
    finally:
        connection.close()
    return [(str(ticket_id), str(title)) for ticket_id, title in rows]


ALL = [(f"TKT-{n}", f"caf\u00e9 {n}") for n in (101, 102, 103)]


def left_in(folder: Path) -> list[str]:
    """Return what is in `folder`: nothing half-built may stay."""
    return sorted(path.name for path in folder.iterdir())


# --- One read, split, at the limit, endless ---


@pytest.mark.parametrize("pieces", ["whole", "bytes", "records"])
def test_records_from_a_fifo_in_one_write_or_in_pieces_are_imported_alike(
    tmp_path: Path, pieces: str
) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(fifo), "--db", str(db)])
    if pieces == "whole":
        chunks = [RECORDS_BYTES]
    elif pieces == "bytes":  # every boundary: mid-key, mid-character, between records
        chunks = [RECORDS_BYTES[n : n + 1] for n in range(len(RECORDS_BYTES))]
    else:
        chunks = [part + b"," for part in RECORDS_BYTES.split(b",")]
        chunks[-1] = chunks[-1][:-1]
    with fifo.open("wb", buffering=0) as writer:
        for chunk in chunks:
            writer.write(chunk)
    assert ended(process) == Ended(0, f"imported 3 tickets into {db}\n", "")
    assert titles(db) == ALL


def record_of(size: int) -> bytes:
    """Return a ticket's JSON text of exactly `size` characters (padded with whitespace)."""
    text = json.dumps(ticket(101))
    return (text[:-1] + " " * (size - len(text)) + "}").encode()


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        pytest.param(MAX_RECORD_CHARS, False, id="at-the-limit"),
        pytest.param(MAX_RECORD_CHARS + 1, True, id="past-it"),
    ],
)
@pytest.mark.parametrize("source", ["file", "fifo"])
def test_a_record_at_the_limit_is_imported_and_one_character_more_is_refused(
    tmp_path: Path, size: int, refused: bool, source: str
) -> None:
    data = b'{"alpha:TKT-102": ' + json.dumps(ticket(102)).encode()
    data += b', "alpha:TKT-101": ' + record_of(size) + b"}"
    records = tmp_path / "records.json"
    db = tmp_path / "t.sqlite"
    if source == "file":
        records.write_bytes(data)
        process = start(["import", str(records), "--db", str(db)])
    else:
        os.mkfifo(records)
        process = start(["import", str(records), "--db", str(db)])
        with records.open("wb") as writer, contextlib.suppress(BrokenPipeError):
            writer.write(data)
    if refused:
        assert ended(process) == Ended(
            2,
            "",
            f"ticket-tools: {records}: record 2 (in file order): the record is longer "
            f"than {MAX_RECORD_CHARS} characters\n",
        )
        assert left_in(tmp_path) == ["records.json"]
    else:
        assert ended(process) == Ended(0, f"imported 2 tickets into {db}\n", "")
        assert titles(db) == [("TKT-101", "imported"), ("TKT-102", "imported")]


def test_an_endless_record_is_refused_at_the_limit_while_it_is_still_written(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(fifo), "--db", str(db)])
    with fifo.open("wb") as writer, contextlib.suppress(BrokenPipeError):
        writer.write(b'{"alpha:TKT-101": {"id": "TKT-101", "title": "')
        for _ in range(64):  # a title that never ends: 64 MiB and on
            writer.write(b"x" * (1 << 20))
    assert ended(process) == Ended(
        2,
        "",
        f"ticket-tools: {fifo}: record 1 (in file order): the record is longer than "
        f"{MAX_RECORD_CHARS} characters\n",
    )
    assert left_in(tmp_path) == ["records.fifo"]


def test_an_endless_records_file_stopped_by_sigterm_leaves_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(fifo), "--db", str(db)])
    with fifo.open("wb") as writer:
        writer.write(b"{")
        for n in range(100, 1000):  # records keep coming; the object never closes
            for tenant in range(3):
                writer.write(f'"t{tenant}:TKT-{n}": {json.dumps(ticket(n))}, '.encode())
        writer.flush()
        process.send_signal(signal.SIGTERM)
        result = ended(process)
    assert result == Ended(143, "", TERMINATED)
    assert left_in(tmp_path) == ["records.fifo"]


# --- Standard streams, FIFOs, links, a directory ---


@pytest.fixture
def records(tmp_path: Path) -> Path:
    path = tmp_path / "records.json"
    path.write_bytes(RECORDS_BYTES)
    return path


def test_a_closed_stdin_is_not_needed(tmp_path: Path, records: Path) -> None:
    db = tmp_path / "t.sqlite"
    process = start(["import", str(records), "--db", str(db)], stdin=None, preexec_fn=closing(0))
    assert ended(process) == Ended(0, f"imported 3 tickets into {db}\n", "")
    assert titles(db) == ALL


def test_a_closed_stdout_is_the_closed_pipes_line_after_the_import(
    tmp_path: Path, records: Path
) -> None:
    db = tmp_path / "t.sqlite"
    process = start(["import", str(records), "--db", str(db)], stdout=None, preexec_fn=closing(1))
    assert ended(process) == Ended(
        141, "", "ticket-tools: stdout was closed before the output was written\n"
    )
    assert titles(db) == ALL


def test_a_closed_stderr_keeps_the_status_of_a_bad_record(tmp_path: Path) -> None:
    bad = tmp_path / "records.json"
    bad.write_text('{"alpha:TKT-101": {"id": "TKT-101"}}')
    db = tmp_path / "t.sqlite"
    process = start(["import", str(bad), "--db", str(db)], stderr=None, preexec_fn=closing(2))
    assert ended(process) == Ended(2, "", "")
    assert left_in(tmp_path) == ["records.json"]


def test_records_read_from_stdin_by_its_name(tmp_path: Path, records: Path) -> None:
    db = tmp_path / "t.sqlite"
    with records.open("rb") as stdin:
        process = start(["import", "/dev/stdin", "--db", str(db)], stdin=stdin)
        result = ended(process)
    assert result == Ended(0, f"imported 3 tickets into {db}\n", "")
    assert titles(db) == ALL


def test_records_through_a_symbolic_link_are_read(tmp_path: Path, records: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(records)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(link), "--db", str(db)])
    assert ended(process) == Ended(0, f"imported 3 tickets into {db}\n", "")


def test_a_database_named_by_a_dangling_link_is_not_created_through_it(
    tmp_path: Path, records: Path
) -> None:
    link = tmp_path / "t.sqlite"
    link.symlink_to(tmp_path / "elsewhere.sqlite")
    process = start(["import", str(records), "--db", str(link)])
    assert ended(process) == Ended(
        2, "", f"ticket-tools: {link} already exists; import only creates new files\n"
    )
    assert left_in(tmp_path) == ["records.json", "t.sqlite"]


def test_a_directory_as_the_records_file_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    process = start(["import", str(tmp_path), "--db", str(db)])
    assert ended(process) == Ended(2, "", f"ticket-tools: cannot read {tmp_path}: Is a directory\n")


def test_a_fifo_whose_writer_closes_at_once_is_an_empty_file(tmp_path: Path) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(fifo), "--db", str(db)])
    with fifo.open("wb"):
        pass
    assert ended(process) == Ended(
        2, "", f'ticket-tools: {fifo}: not a JSON object of "tenant:TKT-123" -> ticket\n'
    )


# --- Signals at each kind of wait, once and twice ---


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_the_records_fifo_waits_for_its_writer(tmp_path: Path, signals: str) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    process = start(["import", str(fifo), "--db", str(tmp_path / "t.sqlite")])
    blocked_in_open(process.pid)
    send(process, SIGNALS[signals])
    assert ended(process) in outcomes(signals)
    assert left_in(tmp_path) == ["records.fifo"]


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_the_records_are_read_from_a_silent_writer(
    tmp_path: Path, signals: str
) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(fifo), "--db", str(db)])
    with fifo.open("wb") as writer:
        writer.write(RECORDS_BYTES[:-40])  # half a file, then nothing: the import waits
        writer.flush()
        blocked_in_open(process.pid)  # in read(), as it was in open(): its first sleep
        send(process, SIGNALS[signals])
        result = ended(process)
    assert result in outcomes(signals)
    assert left_in(tmp_path) == ["records.fifo"]


def _has_open(pid: int, fragment: str) -> bool:
    """Say whether the process has a file open whose path holds `fragment`."""
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            if fragment in os.readlink(entry):
                return True
    return False


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_a_replace_waits_for_the_sqlite_lock(
    tmp_path: Path, records: Path, signals: str
) -> None:
    db = tmp_path / "served.sqlite"
    write_database(db, fixture_records())
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer: an apply's batch
        process = start(["import", str(records), "--db", str(db), "--replace"])
        wait_until(lambda: _has_open(process.pid, "served.sqlite-wal"))  # opened: it waits
        send(process, SIGNALS[signals])
        result = ended(process)
    finally:
        holder.close()
    assert result in outcomes(signals)
    assert len(titles(db)) == len(fixture_records())  # nothing replaced


@pytest.fixture
def pg(postgres_database: PostgresDatabase, scratch: str) -> str:
    """The scratch database holding the fixture tickets: the owner's DSN."""
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    return owner


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_a_replace_waits_for_the_postgres_lock(
    pg: str, records: Path, signals: str
) -> None:
    with psycopg.connect(pg, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
        process = start(["import", str(records), "--postgres", pg, "--replace"])
        wait_until(lambda: lock_waiters(pg) == 1)
        send(process, SIGNALS[signals])
        result = ended(process)
        waiters = lock_waiters(pg)
    with psycopg.connect(pg) as connection:
        count = connection.execute("SELECT count(*) FROM tickets").fetchone()
    assert result in outcomes(signals)
    assert (waiters, count) == (0, (len(fixture_records()),))


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_connecting_to_a_postgres_that_never_answers(
    records: Path, signals: str
) -> None:
    with silent_server() as (address, connected):
        process = start(["import", str(records), "--postgres", f"{address} user={OWNER}"])
        connected()
        send(process, SIGNALS[signals])
        result = ended(process)
    assert result in outcomes(signals)


def test_stdin_a_directory_is_the_interpreters_own_refusal(tmp_path: Path, records: Path) -> None:
    folder = os.open("/", os.O_RDONLY)
    try:
        process = start(["import", str(records), "--db", str(tmp_path / "t.sqlite")], stdin=folder)
    finally:
        os.close(folder)
    result = ended(process)
    assert (result.status, result.out, result.err.splitlines()[0]) == (
        1,
        "",
        "Fatal Python error: init_sys_streams: <stdin> is a directory, cannot continue",
    )
    assert left_in(tmp_path) == ["records.json"]


def test_what_an_import_prints_when_stdout_is_a_pipe_no_one_reads(
    tmp_path: Path, records: Path
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    db = tmp_path / "t.sqlite"
    process = start(["import", str(records), "--db", str(db)], stdout=write_end)
    os.close(write_end)
    assert ended(process) == Ended(
        141, "", "ticket-tools: stdout was closed before the output was written\n"
    )
    assert titles(db) == ALL
