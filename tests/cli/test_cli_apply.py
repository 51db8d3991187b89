"""`ticket-tools apply`: a feed file or stdin into SQLite or PostgreSQL, batched, stopped."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, cast

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import fixture_records
from ticket_tools.cli import apply as apply_command
from ticket_tools.cli import main
from ticket_tools.cli.apply import (
    Applied,
    FeedLineError,
    FeedReadError,
    Progress,
    apply_feed,
)
from ticket_tools.cli.signals import Terminated
from ticket_tools.stores.feed import MAX_LINE_BYTES, Change, Counts
from ticket_tools.stores.ids import ID_FORMAT
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.schema import describe
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.writer import SQLiteWriter
from wide_ids import SIX, widened

Captured = pytest.CaptureFixture[str]
# Only reached when something is broken: how long a test waits for a subprocess.
WAIT_SECONDS = 60.0


def upsert(key: str, version: int, title: str = "t", status: str = "open") -> str:
    ticket_id = key.rpartition(":")[2]
    ticket = {"id": ticket_id, "title": title, "status": status, "internal_note": "n"}
    return json.dumps({"op": "upsert", "key": key, "version": version, "ticket": ticket})


def delete(key: str, version: int) -> str:
    return json.dumps({"op": "delete", "key": key, "version": version})


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def dump(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    connection = sqlite3.connect(path)
    try:
        tickets = connection.execute("SELECT * FROM tickets ORDER BY tenant, id").fetchall()
        tombstones = connection.execute("SELECT * FROM tombstones ORDER BY tenant, id").fetchall()
    finally:
        connection.close()
    return tickets, tombstones


def write_feed(path: Path, lines: Sequence[str], end: str = "\n") -> Path:
    path.write_text("".join(line + end for line in lines), encoding="utf-8")
    return path


# The worked example of docs/feed.md, line for line.
DOCS_EXAMPLE = [
    upsert("alpha:TKT-101", 5, "Login works again", "closed"),
    upsert("alpha:TKT-101", 3, "Login fails"),
    delete("alpha:TKT-102", 8),
    upsert("alpha:TKT-102", 7, "CSV export times out", "closed"),
    upsert("alpha:TKT-102", 9, "CSV export works", "closed"),
    upsert("alpha:TKT-120", 1, "VPN drops hourly"),
]


def test_the_docs_example_then_its_replay(tmp_path: Path, database: Path, capsys: Captured) -> None:
    feed = write_feed(tmp_path / "changes.jsonl", DOCS_EXAMPLE)
    assert main(["apply", str(feed), "--db", str(database)]) == 0
    assert capsys.readouterr() == (
        f"applied 6 changes from {feed} to {database}: 3 upserted, 1 deleted, 2 stale\n",
        "",
    )
    after = dump(database)
    assert after[0][:2] == [
        ("alpha", "TKT-101", "Login works again", "closed", 5),
        ("alpha", "TKT-102", "CSV export works", "closed", 9),
    ]
    assert after[0][-4] == ("alpha", "TKT-120", "VPN drops hourly", "open", 1)
    assert after[1] == []
    assert main(["apply", str(feed), "--db", str(database)]) == 0
    assert capsys.readouterr().out == (
        f"applied 6 changes from {feed} to {database}: 0 upserted, 0 deleted, 6 stale\n"
    )
    assert dump(database) == after


def test_stdin_blank_lines_and_crlf(
    tmp_path: Path, database: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "\r\n".join([delete("beta:TKT-103", 1), "", "  ", delete("beta:TKT-104", 1)]) + "\r\n\n"
    (tmp_path / "stdin").write_bytes(text.encode())
    with (tmp_path / "stdin").open(encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["apply", "-", "--db", str(database)]) == 0
    assert capsys.readouterr().out == (
        f"applied 2 changes from stdin to {database}: 0 upserted, 2 deleted, 0 stale\n"
    )
    assert dump(database)[1] == [("beta", "TKT-103", 1), ("beta", "TKT-104", 1)]


KEY_RULE = 'the key is not "tenant:" followed by the ticket\'s own id'
WIDTH_RULE = "the id is not TKT- followed by exactly three digits"
MALFORMED = [
    pytest.param("{not json", "the line is not JSON", id="not-json"),
    pytest.param(
        json.dumps({"op": "insert", "key": "alpha:TKT-101", "version": 2}),
        'the op is not "upsert" or "delete"',
        id="unknown-op",
    ),
    pytest.param(delete("alpha:TKT-1", 2), WIDTH_RULE, id="key-of-another-width"),
    pytest.param(delete("alpha:TKT-1x", 2), KEY_RULE, id="bad-key"),
    pytest.param(
        upsert("alpha:TKT-101", 2).replace('"id": "TKT-101"', '"id": "TKT-102"'),
        KEY_RULE,
        id="id-not-the-keys",
    ),
    pytest.param(
        delete("alpha:TKT-101", 2).replace('"version": 2', '"version": true'),
        "the version is not an integer from 0 to 2^63-1",
        id="bad-version",
    ),
    pytest.param(
        upsert("alpha:TKT-101", 2).replace(', "status": "open"', ""),
        "id, title and status must be strings of valid Unicode",
        id="ticket-missing-a-field",
    ),
    pytest.param(
        upsert("alpha:TKT-101", 2, status="Open"),
        'the status is not "open" or "closed"',
        id="status-capitalised",
    ),
]


@pytest.mark.parametrize(("line", "rule"), MALFORMED)
def test_a_malformed_line_stops_after_committing_what_came_before(
    tmp_path: Path, database: Path, capsys: Captured, line: str, rule: str
) -> None:
    before = [upsert("alpha:TKT-101", 1, "first"), delete("alpha:TKT-102", 1)]
    after = [upsert("alpha:TKT-104", 1, "never")]
    feed = write_feed(tmp_path / "feed.jsonl", [*before, line, *after])
    assert main(["apply", str(feed), "--db", str(database)]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {feed} line 3: {rule}\n")
    tickets, tombstones = dump(database)
    assert (tickets[0], tickets[1][1], tombstones) == (
        ("alpha", "TKT-101", "first", "open", 1),
        "TKT-104",  # TKT-102 is deleted; TKT-104 untouched
        [("alpha", "TKT-102", 1)],
    )
    assert tickets[1] == ("alpha", "TKT-104", "Settings crash", "open", 0)
    # Fixed and run again: what was applied is stale, the rest is applied.
    fixed = write_feed(tmp_path / "feed.jsonl", [*before, *after])
    assert main(["apply", str(fixed), "--db", str(database)]) == 0
    assert capsys.readouterr().out.endswith(": 1 upserted, 0 deleted, 2 stale\n")


def test_a_line_over_the_limit_is_refused_by_number(
    tmp_path: Path, database: Path, capsys: Captured
) -> None:
    long_line = upsert("alpha:TKT-101", 9, "x" * MAX_LINE_BYTES)
    feed = write_feed(tmp_path / "feed.jsonl", [delete("alpha:TKT-102", 1), long_line])
    assert main(["apply", str(feed), "--db", str(database)]) == 2
    assert (
        capsys.readouterr().err == f"ticket-tools: {feed} line 2: the line is longer than 1 MiB\n"
    )
    assert dump(database)[1] == [("alpha", "TKT-102", 1)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["apply", "feed.jsonl"],
            "apply needs --db FILE or --postgres DSN (or $TICKET_TOOLS_POSTGRES)",
            id="no-target",
        ),
        pytest.param(
            ["apply", "missing.jsonl", "--db", "{db}"],
            "cannot read missing.jsonl: No such file or directory",
            id="no-feed",
        ),
        pytest.param(
            ["apply", "{feed}", "--db", "missing.sqlite"],
            "no database at missing.sqlite",
            id="no-database",
        ),
    ],
)
def test_what_apply_cannot_run_with_is_one_line(  # noqa: PLR0917
    tmp_path: Path,
    database: Path,
    capsys: Captured,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("TICKET_TOOLS_POSTGRES", raising=False)
    monkeypatch.chdir(tmp_path)
    feed = write_feed(tmp_path / "feed.jsonl", [delete("alpha:TKT-101", 1)])
    argv = [arg.format(db=database, feed=feed) for arg in argv]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {message}\n")


def test_ctrl_c_rolls_back_the_open_batch_and_exits_130(
    tmp_path: Path, database: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = dump(database)

    def interrupted(self: SQLiteWriter, changes: Sequence[Change]) -> Counts:
        self._connection.execute("BEGIN IMMEDIATE")
        self._connection.execute("DELETE FROM tickets")
        raise KeyboardInterrupt  # as Ctrl-C mid-batch: the transaction is never committed

    monkeypatch.setattr(SQLiteWriter, "apply", interrupted)
    feed = write_feed(tmp_path / "feed.jsonl", [delete("alpha:TKT-101", 1)])
    assert main(["apply", str(feed), "--db", str(database)]) == 130
    assert capsys.readouterr() == ("", "ticket-tools: interrupted\n")
    assert dump(database) == before


def test_progress_on_a_terminal(
    tmp_path: Path, database: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apply_command, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(apply_command, "BATCH_CHANGES", 2)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    lines = [delete(f"alpha:TKT-{n}", 1) for n in range(200, 205)]
    feed = write_feed(tmp_path / "feed.jsonl", lines)
    assert main(["apply", str(feed), "--db", str(database)]) == 0
    assert capsys.readouterr().err == (
        "\rapplying: 2 changes, 0 upserted, 2 deleted, 0 stale"
        "\rapplying: 4 changes, 0 upserted, 4 deleted, 0 stale"
        "\rapplying: 5 changes, 0 upserted, 5 deleted, 0 stale\n"
    )


def test_progress_is_drawn_at_most_once_a_second() -> None:
    out = io.StringIO()
    progress = Progress(out)
    progress.update(Applied(1, Counts(1, 0, 0)))  # within a second of the start
    progress.finish()
    assert out.getvalue() == ""


# --- apply_feed itself: batches, bounded reading ---


class RecordingWriter:
    """A writer that applies nothing and records each batch."""

    id_format = ID_FORMAT

    def __init__(self) -> None:
        self.batches: list[list[Change]] = []

    @staticmethod
    def check(change: Change) -> None:
        pass

    def apply(self, changes: Sequence[Change]) -> Counts:
        self.batches.append(list(changes))
        return Counts(upserted=len(changes))

    def close(self) -> None:
        pass


def _file(tmp_path: Path, data: bytes) -> BinaryIO:
    path = tmp_path / "feed.jsonl"
    path.write_bytes(data)
    return path.open("rb")


def test_batches_are_cut_by_count(tmp_path: Path) -> None:
    writer = RecordingWriter()
    lines = "".join(delete(f"a:TKT-{n}", 1) + "\n" for n in range(100, 105)).encode()
    with _file(tmp_path, lines) as stream:
        applied = apply_feed(stream, writer, batch_changes=2)
    assert applied == Applied(5, Counts(5, 0, 0))
    assert [[c.id for c in batch] for batch in writer.batches] == [
        ["TKT-100", "TKT-101"],
        ["TKT-102", "TKT-103"],
        ["TKT-104"],
    ]


class Unreadable:
    """A stream whose descriptor is a folder's: reading it fails (EISDIR)."""

    def __init__(self, folder: Path) -> None:
        self.fd = os.open(folder, os.O_RDONLY)

    def fileno(self) -> int:
        return self.fd


def test_a_read_error_is_feed_read_error(tmp_path: Path) -> None:
    stream = Unreadable(tmp_path)
    try:
        with pytest.raises(FeedReadError) as raised:
            apply_feed(cast(BinaryIO, stream), RecordingWriter())
    finally:
        os.close(stream.fd)
    assert str(raised.value) == "Is a directory"


def test_a_read_error_on_stdin_is_one_line(
    tmp_path: Path, database: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = Unreadable(tmp_path)

    class Stdin:
        buffer = stream

    monkeypatch.setattr(sys, "stdin", Stdin())
    try:
        assert main(["apply", "-", "--db", str(database)]) == 2
    finally:
        os.close(stream.fd)
    assert capsys.readouterr() == ("", "ticket-tools: cannot read stdin: Is a directory\n")


def test_a_malformed_line_in_a_long_feed_starts_no_thread(tmp_path: Path) -> None:
    lines = [(delete(f"a:TKT-{n % 1000:03}", 1) + "\n").encode() for n in range(10_000)]
    lines[1] = b"not json\n"
    before = threading.active_count()
    with _file(tmp_path, b"".join(lines)) as stream, pytest.raises(FeedLineError) as raised:
        apply_feed(stream, RecordingWriter())
    assert (raised.value.number, raised.value.rule, threading.active_count()) == (
        2,
        "the line is not JSON",
        before,
    )


# --- Real processes: a slow pipe, SIGINT, SIGKILL ---


def _apply_process(db: Path | None, *target: str) -> subprocess.Popen[bytes]:
    args = ["--db", str(db)] if db is not None else list(target)
    return subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", "apply", "-", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_until(condition: object) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def _send(process: subprocess.Popen[bytes], lines: Sequence[str]) -> None:
    stdin = cast(BinaryIO, process.stdin)
    stdin.write("".join(line + "\n" for line in lines).encode())
    stdin.flush()


def test_a_slow_trickle_is_committed_while_the_pipe_stays_open(database: Path) -> None:
    process = _apply_process(database)
    _send(process, [upsert("alpha:TKT-101", 1, "trickled")])
    # One change, far from a full batch, no end of input: committed by time alone.
    _wait_until(lambda: dump(database)[0][0][2] == "trickled")
    assert process.poll() is None
    _send(process, [delete("alpha:TKT-101", 2)])
    _wait_until(lambda: dump(database)[1] == [("alpha", "TKT-101", 2)])
    out, err = process.communicate(timeout=WAIT_SECONDS)
    assert (process.returncode, out.decode(), err.decode()) == (
        0,
        f"applied 2 changes from stdin to {database}: 1 upserted, 1 deleted, 0 stale\n",
        "",
    )


def test_sigint_exits_130(database: Path) -> None:
    process = _apply_process(database)
    _send(process, [upsert("alpha:TKT-101", 1, "kept")])
    _wait_until(lambda: dump(database)[0][0][2] == "kept")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WAIT_SECONDS)
    assert (process.returncode, out, err) == (130, b"", b"ticket-tools: interrupted\n")


def churn_feed(count: int, seed: int = 7) -> list[str]:
    """A feed of fresh upserts, then updates and deletes with versions out of order."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible feed, not a secret
    keys = [f"t{tenant}:TKT-{n:03}" for tenant in range(4) for n in range(500)]
    lines = [upsert(key, 1, f"first {key}") for key in keys]
    for _ in range(count - len(lines)):
        key = rng.choice(keys)
        version = rng.randrange(2, 60)
        if rng.random() < 0.3:
            lines.append(delete(key, version))
        else:
            lines.append(upsert(key, version, f"v{version} {key}", rng.choice(["open", "closed"])))
    return lines


FRESH = 2_000  # the feed's first lines: one fresh upsert per key


def _kill_mid_feed(process: subprocess.Popen[bytes], lines: list[str], committed: object) -> None:
    _send(process, lines[:FRESH])
    _wait_until(committed)  # two full batches are in
    _send(process, lines[FRESH : FRESH + 700])  # part of a batch, maybe mid-commit
    process.kill()
    process.wait(timeout=WAIT_SECONDS)
    for pipe in (process.stdin, process.stdout, process.stderr):
        cast(BinaryIO, pipe).close()
    assert process.returncode == -signal.SIGKILL


def test_kill_9_mid_feed_then_the_same_feed_again_on_sqlite(tmp_path: Path) -> None:
    lines = churn_feed(6_000)
    feed = write_feed(tmp_path / "feed.jsonl", lines)
    interrupted, uninterrupted = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    write_database(interrupted, fixture_records())
    write_database(uninterrupted, fixture_records())

    def versions_in() -> bool:
        connection = sqlite3.connect(interrupted)
        try:
            [count] = connection.execute(
                "SELECT count(*) FROM tickets WHERE version > 0"
            ).fetchone()
        finally:
            connection.close()
        return bool(count >= 2 * apply_command.BATCH_CHANGES)

    _kill_mid_feed(_apply_process(interrupted), lines, versions_in)
    for db in (interrupted, uninterrupted):
        done = subprocess.run(
            [sys.executable, "-m", "ticket_tools.cli", "apply", str(feed), "--db", str(db)],
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert dump(interrupted) == dump(uninterrupted)
    assert len(dump(interrupted)[0]) > 10  # the feed's tickets are there


@pytest.fixture
def pg(postgres_database: PostgresDatabase, scratch: str) -> dict[str, str]:
    """The scratch database holding the fixture tickets: each role's DSN."""
    cluster = postgres_database.cluster
    owner = cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    return {
        "owner": owner,
        "reader": cluster.dsn(READER, scratch),
        "super": cluster.dsn("postgres", scratch),
    }


def pg_dump(dsn: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with psycopg.connect(dsn) as connection:
        tickets = connection.execute("SELECT * FROM tickets ORDER BY tenant, id").fetchall()
        tombstones = connection.execute("SELECT * FROM tombstones ORDER BY tenant, id").fetchall()
    return tickets, tombstones


def test_apply_to_postgres_from_the_environment(
    tmp_path: Path, pg: dict[str, str], capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKET_TOOLS_POSTGRES", pg["owner"])
    feed = write_feed(tmp_path / "changes.jsonl", DOCS_EXAMPLE)
    assert main(["apply", str(feed)]) == 0
    assert capsys.readouterr().out == (
        f"applied 6 changes from {feed} to {describe(pg['owner'])}: "
        "3 upserted, 1 deleted, 2 stale\n"
    )
    tickets, tombstones = pg_dump(pg["super"])
    assert tickets[:2] == [
        ("alpha", "TKT-101", "Login works again", "closed", "login works again", 5),
        ("alpha", "TKT-102", "CSV export works", "closed", "csv export works", 9),
    ]
    assert tombstones == []


def test_a_nul_is_refused_by_line_on_postgres(
    tmp_path: Path, pg: dict[str, str], capsys: Captured
) -> None:
    feed = write_feed(
        tmp_path / "feed.jsonl", [delete("alpha:TKT-101", 1), upsert("alpha:TKT-102", 2, "a\x00b")]
    )
    # A cleaned title loses its NUL (a control); a raw one keeps it, and is refused.
    argv = ["apply", str(feed), "--postgres", pg["owner"], "--raw-titles"]
    assert main(argv) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {feed} line 2: PostgreSQL text cannot hold a NUL character\n",
    )
    assert pg_dump(pg["super"])[1] == [("alpha", "TKT-101", 1)]


def test_apply_as_the_reader_is_refused(
    tmp_path: Path, pg: dict[str, str], capsys: Captured
) -> None:
    feed = write_feed(tmp_path / "feed.jsonl", [delete("alpha:TKT-101", 1)])
    assert main(["apply", str(feed), "--postgres", pg["reader"]]) == 2
    assert capsys.readouterr().err == (
        f"ticket-tools: {describe(pg['reader'])} connects as a role that cannot write the "
        "tickets, tombstones and title index tables (and read high_water); connect as their "
        "owner or the writer role\n"
    )


def test_kill_9_mid_feed_then_the_same_feed_again_on_postgres(
    tmp_path: Path, pg: dict[str, str]
) -> None:
    lines = churn_feed(6_000, seed=11)
    feed = write_feed(tmp_path / "feed.jsonl", lines)

    def versions_in() -> bool:
        with psycopg.connect(pg["super"]) as connection:
            row = connection.execute("SELECT count(*) FROM tickets WHERE version > 0").fetchone()
        return row is not None and row[0] >= 2 * apply_command.BATCH_CHANGES

    def run_whole_feed() -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ticket_tools.cli",
                "apply",
                str(feed),
                "--postgres",
                pg["owner"],
            ],
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    _kill_mid_feed(_apply_process(None, "--postgres", pg["owner"]), lines, versions_in)
    run_whole_feed()
    interrupted = pg_dump(pg["super"])
    # The same feed, once, uninterrupted, from the same start.
    with psycopg.connect(pg["owner"]) as connection:
        connection.execute("TRUNCATE tickets, tombstones")
        import_records(connection, fixture_records())
    run_whole_feed()
    assert pg_dump(pg["super"]) == interrupted
    assert len(interrupted[0]) > 10


def test_apply_with_id_digits_on_sqlite(tmp_path: Path, capsys: Captured) -> None:
    db = tmp_path / "six.sqlite"
    write_database(db, widened(SIX), id_format=SIX)
    feed = write_feed(
        tmp_path / "changes.jsonl",
        [
            upsert("alpha:TKT-000101", 5, "Login works again", "closed"),
            delete("alpha:TKT-000102", 1),
        ],
    )
    # Without --id-digits the store is refused before any line is read.
    assert main(["apply", str(feed), "--db", str(db)]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {db} holds ticket IDs of 6 digits, not 3: use --id-digits 6\n",
    )
    assert main(["apply", str(feed), "--db", str(db), "--id-digits", "6"]) == 0
    assert capsys.readouterr() == (
        f"applied 2 changes from {feed} to {db}: 1 upserted, 1 deleted, 0 stale\n",
        "",
    )
    tickets, tombstones = dump(db)
    assert tickets[:2] == [
        ("alpha", "TKT-000101", "Login works again", "closed", 5),
        ("alpha", "TKT-000104", "Settings crash", "open", 0),
    ]
    assert tombstones == [("alpha", "TKT-000102", 1)]
    # A line whose id has another width is refused by number and rule.
    narrow = write_feed(tmp_path / "narrow.jsonl", [upsert("alpha:TKT-101", 9)])
    assert main(["apply", str(narrow), "--db", str(db), "--id-digits", "6"]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {narrow} line 1: the id is not TKT- followed by exactly six digits\n",
    )


def test_apply_with_id_digits_on_postgres(
    postgres_database: PostgresDatabase, scratch: str, tmp_path: Path, capsys: Captured
) -> None:
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, widened(SIX), grant_to=READER, id_format=SIX)
    feed = write_feed(tmp_path / "changes.jsonl", [delete("alpha:TKT-000102", 1)])
    assert main(["apply", str(feed), "--postgres", owner]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {describe(owner)} holds ticket IDs of 6 digits, not 3: use --id-digits 6\n",
    )
    assert main(["apply", str(feed), "--postgres", owner, "--id-digits", "6"]) == 0
    assert capsys.readouterr().out == (
        f"applied 1 change from {feed} to {describe(owner)}: 0 upserted, 1 deleted, 0 stale\n"
    )


# --- SIGTERM's wake-up and --dead-letter, in process ---


def test_a_wake_up_commits_every_line_read_then_stops() -> None:
    # As SIGTERM arriving after the second line was read and checked, before the third.
    feed_read, feed_write = os.pipe()
    wake_read, wake_write = os.pipe()

    class WokenAtTheSecond(RecordingWriter):
        def check(self, change: Change) -> None:  # type: ignore[override]
            if change.id == "TKT-101":
                os.write(wake_write, b"T")

    writer = WokenAtTheSecond()
    os.write(feed_write, "".join(delete(f"a:TKT-{n}", 1) + "\n" for n in (100, 101)).encode())
    try:
        with os.fdopen(feed_read, "rb") as stream:
            applied = apply_feed(stream, writer, batch_seconds=3600.0, wake_fd=wake_read)
            os.write(feed_write, (delete("a:TKT-102", 1) + "\n").encode())
    finally:
        for fd in (feed_write, wake_read, wake_write):
            os.close(fd)
    assert (applied, [[c.id for c in batch] for batch in writer.batches]) == (
        Applied(2, Counts(2, 0, 0), 0, woken=True),
        [["TKT-100", "TKT-101"]],
    )


def test_dead_letters_apply_the_rest_and_exit_3(
    tmp_path: Path, database: Path, capsys: Captured
) -> None:
    letters = tmp_path / "dead.jsonl"
    lines = [delete("alpha:TKT-101", 1), "{not json", delete("alpha:TKT-102", 1), "[]"]
    feed = write_feed(tmp_path / "feed.jsonl", lines)
    argv = ["apply", str(feed), "--db", str(database), "--dead-letter", str(letters)]
    assert main(argv) == 3
    assert capsys.readouterr() == (
        f"applied 2 changes from {feed} to {database}: 0 upserted, 2 deleted, 0 stale\n",
        f"ticket-tools: 2 lines set aside in {letters}\n",
    )
    assert dump(database)[1] == [("alpha", "TKT-101", 1), ("alpha", "TKT-102", 1)]
    assert [json.loads(line) for line in letters.read_text().splitlines()] == [
        {"feed": str(feed), "line": 2, "rule": "the line is not JSON", "text": "{not json"},
        {"feed": str(feed), "line": 4, "rule": "the line is not a JSON object", "text": "[]"},
    ]
    # The refused lines fixed and fed again: exit 0, and the file is left as it was.
    before = letters.read_bytes()
    fixed = write_feed(tmp_path / "fixed.jsonl", [delete("alpha:TKT-103", 1)])
    assert main(["apply", str(fixed), "--db", str(database), "--dead-letter", str(letters)]) == 0
    assert capsys.readouterr() == (
        f"applied 1 change from {fixed} to {database}: 0 upserted, 1 deleted, 0 stale\n",
        "",
    )
    assert letters.read_bytes() == before


def test_a_dead_letter_file_that_cannot_be_opened_stops_before_reading(
    tmp_path: Path, database: Path, capsys: Captured
) -> None:
    feed = write_feed(tmp_path / "feed.jsonl", [delete("alpha:TKT-101", 1)])
    argv = ["apply", str(feed), "--db", str(database), "--dead-letter", str(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: cannot write {tmp_path}: Is a directory\n")
    assert dump(database)[1] == []


def test_a_batch_ended_by_sigterms_grace_names_the_first_line_not_committed(
    tmp_path: Path,
) -> None:
    # As SIGTERM's grace running out while the fourth line's batch waits for the store;
    # the blank line and the line set aside before it needed no commit.
    class EndedInTheSecondBatch(RecordingWriter):
        def apply(self, changes: Sequence[Change]) -> Counts:
            if self.batches:
                raise Terminated
            return super().apply(changes)

    writer = EndedInTheSecondBatch()
    lines = [
        delete("a:TKT-100", 1),
        "",
        "{not json",
        delete("a:TKT-101", 1),
        delete("a:TKT-102", 1),
    ]
    aside: list[int] = []
    data = "".join(line + "\n" for line in lines).encode()
    with _file(tmp_path, data) as stream:
        applied = apply_feed(
            stream, writer, batch_changes=1, set_aside=lambda n, rule, line: aside.append(n)
        )
    assert (applied, aside) == (
        Applied(1, Counts(1, 0, 0), set_aside=1, woken=True, uncommitted_from=4),
        [3],
    )


def test_a_missing_feed_with_a_dead_letter_file_is_one_line(
    tmp_path: Path, database: Path, capsys: Captured
) -> None:
    missing = tmp_path / "missing.jsonl"
    letters = tmp_path / "dead.jsonl"
    argv = ["apply", str(missing), "--db", str(database), "--dead-letter", str(letters)]
    assert main(argv) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: cannot read {missing}: No such file or directory\n",
    )


def test_a_stdin_closed_at_the_start_is_one_line(
    database: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What Python makes of `<&-`: no sys.stdin (test_apply_inputs.py runs the real `<&-`).
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["apply", "-", "--db", str(database)]) == 2
    assert main(["call", "get_ticket", "-", "--tenant", "alpha"]) == 2
    assert capsys.readouterr() == (
        "",
        "ticket-tools: cannot read stdin: Bad file descriptor\n" * 2,
    )


# Issue 32, point 3: a status other than "open" or "closed" is a bad line like any
# other, on either store: it stops apply, or is set aside with --dead-letter.
STATUS_RULE = 'the status is not "open" or "closed"'


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], str, list[str]]:
    """The fixture tickets in a store: apply's options, the store's name, a reader's options."""
    if request.param == "sqlite":
        db = tmp_path / "tickets.sqlite"
        write_database(db, fixture_records())
        return ["--db", str(db)], str(db), ["--db", str(db)]
    dsns: dict[str, str] = request.getfixturevalue("pg")
    return ["--postgres", dsns["owner"]], describe(dsns["owner"]), ["--postgres", dsns["reader"]]


def _alpha(capsys: Captured, reader: list[str]) -> list[tuple[str, str, str]]:
    capsys.readouterr()
    argv = ["call", "search_tickets", '{"limit": 4}', "--tenant", "alpha", *reader]
    assert main(argv) == 0
    page = json.loads(capsys.readouterr().out)
    return [(ticket["id"], ticket["title"], ticket["status"]) for ticket in page["tickets"]]


@pytest.mark.parametrize(
    "status",
    [
        pytest.param("Open", id="capitalised"),
        pytest.param("", id="empty"),
        pytest.param("pending", id="another-word"),
    ],
)
def test_a_status_other_than_open_or_closed_stops_apply_at_its_line(
    tmp_path: Path, capsys: Captured, target: tuple[list[str], str, list[str]], status: str
) -> None:
    store, _, reader = target
    lines = [
        upsert("alpha:TKT-101", 1, "first", "closed"),
        upsert("alpha:TKT-102", 1, "odd", status),
        upsert("alpha:TKT-104", 1, "never"),
    ]
    feed = write_feed(tmp_path / "feed.jsonl", lines)
    assert main(["apply", str(feed), *store]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {feed} line 2: {STATUS_RULE}\n")
    assert _alpha(capsys, reader) == [
        ("TKT-101", "first", "closed"),
        ("TKT-102", "CSV export times out", "closed"),
        ("TKT-104", "Settings crash", "open"),
        ("TKT-107", "Login page slow on mobile", "open"),
    ]


def test_a_bad_status_is_set_aside_as_any_bad_line(
    tmp_path: Path, capsys: Captured, target: tuple[list[str], str, list[str]]
) -> None:
    store, name, reader = target
    letters = tmp_path / "dead.jsonl"
    odd = [upsert("alpha:TKT-102", 1, "odd", "Open"), upsert("alpha:TKT-107", 1, "odd", "")]
    lines = [upsert("alpha:TKT-101", 1, "first", "closed"), *odd, upsert("alpha:TKT-104", 1, "x")]
    feed = write_feed(tmp_path / "feed.jsonl", lines)
    assert main(["apply", str(feed), *store, "--dead-letter", str(letters)]) == 3
    assert capsys.readouterr() == (
        f"applied 2 changes from {feed} to {name}: 2 upserted, 0 deleted, 0 stale\n",
        f"ticket-tools: 2 lines set aside in {letters}\n",
    )
    assert [json.loads(line) for line in letters.read_text().splitlines()] == [
        {"feed": str(feed), "line": 2, "rule": STATUS_RULE, "text": odd[0]},
        {"feed": str(feed), "line": 3, "rule": STATUS_RULE, "text": odd[1]},
    ]
    assert _alpha(capsys, reader) == [
        ("TKT-101", "first", "closed"),
        ("TKT-102", "CSV export times out", "closed"),
        ("TKT-104", "x", "open"),
        ("TKT-107", "Login page slow on mobile", "open"),
    ]
