"""Every way a feed reaches `ticket-tools apply`, through the real command (issue 30, point 2).

In one write and split at every byte; at the line limit and one past it; endless; from
closed, redirected and same-file standard streams, FIFOs and symbolic links; and signals
at each kind of wait (opening the feed, reading it, the writers' lock, a connect), once and
twice. Each ends with its documented status and at most one line of its own on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import psycopg
import pytest

from command_inputs import (
    INTERRUPTED,
    SIGNALS,
    TERMINATED,
    Ended,
    Terminal,
    at_eof,
    blocked_in_open,
    closing,
    ended,
    lock_waiters,
    outcomes,
    reap,
    send,
    silent_server,
    start,
    stdin_of,
    wait_until,
)
from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import fixture_records
from ticket_tools.stores.feed import MAX_LINE_BYTES
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.schema import WRITER_LOCK, describe
from ticket_tools.stores.sqlite.importer import write_database

NO_CHANGE = "0 upserted, 0 deleted, 0 stale"
# Longer than a test waits (command_inputs.WAIT_SECONDS): a wait that only ends by itself
# fails the test.
LONG_WAIT = ["--wait-seconds", "600"]


def upsert(number: int, title: str = "fed", version: int = 1) -> str:
    ticket = {"id": f"TKT-{number}", "title": title, "status": "open"}
    change = {"op": "upsert", "key": f"alpha:TKT-{number}", "version": version, "ticket": ticket}
    return json.dumps(change)


FEED = [upsert(201, "caf\u00e9 cr\u00e8me"), upsert(202), upsert(203, "third")]
FEED_BYTES = "".join(line + "\r\n" if n == 1 else line + "\n" for n, line in enumerate(FEED))


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def fed(db: Path) -> list[tuple[str, str]]:
    """Return the (id, title) of each fed ticket (TKT-2xx) in the database."""
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(
            "SELECT id, title FROM tickets WHERE id >= 'TKT-200' ORDER BY id"
        ).fetchall()
    finally:
        connection.close()
    return [(str(ticket_id), str(title)) for ticket_id, title in rows]


def summary(count: int, source: str, target: object, counts: str | None = None) -> str:
    counts = counts or f"{count} upserted, 0 deleted, 0 stale"
    changes = "1 change" if count == 1 else f"{count} changes"
    return f"applied {changes} from {source} to {target}: {counts}\n"


ALL_FED = [("TKT-201", "caf\u00e9 cr\u00e8me"), ("TKT-202", "fed"), ("TKT-203", "third")]


# --- One read, split, at the limit, endless ---


@pytest.mark.parametrize("pieces", ["whole", "bytes", "lines"])
def test_a_feed_in_one_write_or_in_pieces_is_applied_alike(database: Path, pieces: str) -> None:
    data = FEED_BYTES.encode()
    if pieces == "whole":
        chunks = [data]
    elif pieces == "bytes":  # every boundary: mid-line, mid-character, between \r and \n
        chunks = [data[n : n + 1] for n in range(len(data))]
    else:
        chunks = [line + b"\n" for line in data.split(b"\n")[:-1]]
    process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE)
    for chunk in chunks:
        stdin_of(process).write(chunk)
        stdin_of(process).flush()
        time.sleep(0.001)  # so that a read can end between two writes
    assert at_eof(process) == Ended(0, summary(3, "stdin", database), "")
    assert fed(database) == ALL_FED


def padded(line: str, size: int) -> bytes:
    """Return `line` padded with JSON whitespace to `size` bytes (its newline not counted)."""
    data = line.encode()
    return data[:-1] + b" " * (size - len(data)) + data[-1:]


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        pytest.param(MAX_LINE_BYTES, (0, "applied"), id="at-the-limit"),
        pytest.param(
            MAX_LINE_BYTES + 1, (2, "line 2: the line is longer than 1 MiB"), id="past-it"
        ),
    ],
)
@pytest.mark.parametrize("source", ["file", "pipe"])
def test_a_line_at_the_limit_is_applied_and_one_byte_more_is_refused(
    tmp_path: Path, database: Path, size: int, expected: tuple[int, str], source: str
) -> None:
    data = upsert(201).encode() + b"\n" + padded(upsert(202), size) + b"\n"
    if source == "file":
        feed = tmp_path / "feed.jsonl"
        feed.write_bytes(data)
        process = start(["apply", str(feed), "--db", str(database)])
        name = str(feed)
    else:
        process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE)
        with contextlib.suppress(BrokenPipeError):  # past the limit: it may stop reading first
            stdin_of(process).write(data)
            stdin_of(process).close()
        name = "stdin"
    status, what = expected
    if status == 0:
        assert ended(process) == Ended(0, summary(2, name, database), "")
        assert fed(database) == [("TKT-201", "fed"), ("TKT-202", "fed")]
    else:
        assert ended(process) == Ended(2, "", f"ticket-tools: {name} {what}\n")
        assert fed(database) == [("TKT-201", "fed")]


def _peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")  # pragma: no cover - Linux always has it


def test_an_endless_line_is_refused_at_the_limit_while_it_is_still_written(
    database: Path,
) -> None:
    process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE)
    stdin = stdin_of(process)
    stdin.write(upsert(201).encode() + b"\n")
    block = b"x" * (1 << 20)
    with contextlib.suppress(BrokenPipeError):  # apply stops reading at the limit
        for _ in range(64):
            stdin.write(block)
            stdin.flush()
    assert ended(process) == Ended(
        2, "", "ticket-tools: stdin line 2: the line is longer than 1 MiB\n"
    )
    assert fed(database) == [("TKT-201", "fed")]


def test_an_endless_line_set_aside_keeps_memory_flat(tmp_path: Path, database: Path) -> None:
    letters = tmp_path / "dead.jsonl"
    process = start(
        ["apply", "-", "--db", str(database), "--dead-letter", str(letters)],
        stdin=subprocess.PIPE,
    )
    stdin = stdin_of(process)
    stdin.write(upsert(201).encode() + b"\n")
    stdin.flush()
    wait_until(lambda: fed(database) == [("TKT-201", "fed")])
    before = _peak_kib(process.pid)
    block = b"x" * (1 << 20)
    for _ in range(32):  # 32 MiB of one line, not ended yet
        stdin.write(block)
    stdin.flush()
    wait_until(lambda: letters.stat().st_size > 0)  # set aside at the limit, the rest skipped
    stdin.write(b"x\n" + upsert(202).encode() + b"\n")
    stdin.flush()
    wait_until(lambda: len(fed(database)) == 2)
    growth = _peak_kib(process.pid) - before
    process.send_signal(signal.SIGTERM)
    assert ended(process) == Ended(
        143,
        summary(2, "stdin", database),
        f"ticket-tools: terminated (SIGTERM); 1 line set aside in {letters}\n",
    )
    assert json.loads(letters.read_text()) == {
        "feed": "stdin",
        "line": 2,
        "rule": "the line is longer than 1 MiB",
    }
    # The peak grew by the line limit and a chunk at most, whatever the line's length.
    assert growth < 8 * 1024


def test_an_endless_feed_stopped_by_sigterm_commits_every_line_read(database: Path) -> None:
    process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE)
    stdin = stdin_of(process)
    lines = [upsert(n) for n in range(300, 1000)]
    stdin.write("".join(line + "\n" for line in lines[:200]).encode())
    stdin.flush()
    wait_until(lambda: len(fed(database)) == 200)
    stdin.write("".join(line + "\n" for line in lines[200:]).encode())
    stdin.flush()
    process.send_signal(signal.SIGTERM)
    result = ended(process)
    count = len(fed(database))
    assert result == Ended(143, summary(count, "stdin", database), TERMINATED)
    assert fed(database) == [(f"TKT-{n}", "fed") for n in range(300, 300 + count)]


# --- Standard streams: closed, redirected, the same file ---


BAD = '{"op": "bogus"}'
BAD_RULE = 'the op is not "upsert" or "delete"'


def write_feed(tmp_path: Path, *lines: str) -> Path:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return feed


def test_a_closed_stdin_is_one_line_and_nothing_is_created(tmp_path: Path, database: Path) -> None:
    letters = tmp_path / "dead.jsonl"
    process = start(
        ["apply", "-", "--db", str(database), "--dead-letter", str(letters)],
        stdin=None,
        preexec_fn=closing(0),
    )
    assert ended(process) == Ended(2, "", "ticket-tools: cannot read stdin: Bad file descriptor\n")
    assert (fed(database), letters.exists()) == ([], False)


def test_a_closed_stdout_is_the_closed_pipes_line_after_the_feed_is_applied(
    tmp_path: Path, database: Path
) -> None:
    feed = write_feed(tmp_path, *FEED)
    process = start(["apply", str(feed), "--db", str(database)], stdout=None, preexec_fn=closing(1))
    assert ended(process) == Ended(
        141, "", "ticket-tools: stdout was closed before the output was written\n"
    )
    assert fed(database) == ALL_FED


@pytest.mark.parametrize("stdout", ["closed", "reader-gone"])
def test_lines_set_aside_keep_exit_3_and_its_line_without_stdout(
    tmp_path: Path, database: Path, stdout: str
) -> None:
    feed = write_feed(tmp_path, upsert(201), BAD)
    letters = tmp_path / "dead.jsonl"
    args = ["apply", str(feed), "--db", str(database), "--dead-letter", str(letters)]
    if stdout == "closed":
        process = start(args, stdout=None, preexec_fn=closing(1))
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader went away before the summary was written
        process = start(args, stdout=write_end)
        os.close(write_end)
    assert ended(process) == Ended(3, "", f"ticket-tools: 1 line set aside in {letters}\n")
    assert [json.loads(line)["line"] for line in letters.read_text().splitlines()] == [2]


def test_sigterm_keeps_exit_143_and_its_line_when_stdouts_reader_is_gone(database: Path) -> None:
    read_end, write_end = os.pipe()
    process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE, stdout=write_end)
    os.close(write_end)
    stdin_of(process).write((upsert(201) + "\n").encode())
    stdin_of(process).flush()
    wait_until(lambda: fed(database) == [("TKT-201", "fed")])
    os.close(read_end)
    process.send_signal(signal.SIGTERM)
    assert ended(process) == Ended(143, "", TERMINATED)


def test_a_closed_stderr_keeps_the_status_of_a_bad_line(tmp_path: Path, database: Path) -> None:
    feed = write_feed(tmp_path, upsert(201), BAD)
    process = start(["apply", str(feed), "--db", str(database)], stderr=None, preexec_fn=closing(2))
    assert ended(process) == Ended(2, "", "")
    assert fed(database) == [("TKT-201", "fed")]


def test_stdout_and_stderr_on_one_file_hold_the_summary_then_the_outcome(
    tmp_path: Path, database: Path
) -> None:
    feed = write_feed(tmp_path, upsert(201), BAD)
    letters = tmp_path / "dead.jsonl"
    log = tmp_path / "apply.log"
    with log.open("wb") as both:
        process = start(
            ["apply", str(feed), "--db", str(database), "--dead-letter", str(letters)],
            stdout=both,
            stderr=subprocess.STDOUT,
        )
        assert ended(process) == Ended(3, "", "")
    assert log.read_text() == (
        summary(1, str(feed), database) + f"ticket-tools: 1 line set aside in {letters}\n"
    )


def test_stdin_a_directory_is_the_interpreters_own_refusal(database: Path) -> None:
    # CPython refuses it in init_sys_streams, before any code of ours runs (issue 30, 15).
    folder = os.open("/", os.O_RDONLY)
    try:
        process = start(["apply", "-", "--db", str(database)], stdin=folder)
    finally:
        os.close(folder)
    result = ended(process)
    assert (result.status, result.out, result.err.splitlines()[0]) == (
        1,
        "",
        "Fatal Python error: init_sys_streams: <stdin> is a directory, cannot continue",
    )
    assert fed(database) == []


# --- The dead-letter file: never the feed, never through a link, a FIFO or another mode ---


@pytest.mark.parametrize("way", ["the-feed", "stdin-s-file", "a-link-to-it", "stderr-on-it"])
def test_a_dead_letter_file_that_is_the_feed_is_refused_before_any_line(
    tmp_path: Path, database: Path, way: str
) -> None:
    feed = write_feed(tmp_path, upsert(201), BAD)
    feed.chmod(0o600)  # a mode a dead-letter file may have
    before = feed.read_bytes()
    stdin: int | IO[bytes] = subprocess.DEVNULL
    stderr: int | IO[bytes] = subprocess.PIPE
    name, letters = str(feed), str(feed)
    reason = "it is the feed"
    if way == "stdin-s-file":
        stdin, name, reason = feed.open("rb"), "-", "it is the file stdin reads"
    elif way == "a-link-to-it":
        name = str(tmp_path / "link.jsonl")
        Path(name).symlink_to(feed)
    elif way == "stderr-on-it":
        letters, stderr = "/dev/stderr", feed.open("ab")
    process = start(
        ["apply", name, "--db", str(database), "--dead-letter", letters],
        stdin=stdin,
        stderr=stderr,
    )
    for given in (stdin, stderr):
        if not isinstance(given, int):
            given.close()
    result = ended(process)
    line = f"ticket-tools: cannot write {letters}: {reason}\n"
    if way == "stderr-on-it":
        assert (result, feed.read_bytes()) == (Ended(2, "", ""), before + line.encode())
    else:
        assert (result, feed.read_bytes()) == (Ended(2, "", line), before)
    assert fed(database) == []


@pytest.mark.parametrize("kind", ["fifo-no-reader", "fifo-read", "link", "mode-0644"])
def test_a_dead_letter_file_of_the_wrong_kind_is_refused_at_once(
    tmp_path: Path, database: Path, kind: str
) -> None:
    letters = tmp_path / "dead.jsonl"
    target = tmp_path / "private.txt"
    reason = "it is not a regular file"
    held = None
    if kind.startswith("fifo"):
        os.mkfifo(letters, 0o600)
        if kind == "fifo-read":
            held = os.open(letters, os.O_RDONLY | os.O_NONBLOCK)
    elif kind == "link":
        target.write_text("kept\n")
        target.chmod(0o600)
        letters.symlink_to(target)
        reason = "it is a symbolic link"
    else:
        letters.write_text("kept\n")
        letters.chmod(0o644)
        reason = (
            "its mode is 0644, not 0600; a line set aside may hold internal fields "
            "(chmod 600 it, or name a new file)"
        )
    feed = write_feed(tmp_path, upsert(201), BAD)
    try:
        process = start(["apply", str(feed), "--db", str(database), "--dead-letter", str(letters)])
        assert ended(process) == Ended(2, "", f"ticket-tools: cannot write {letters}: {reason}\n")
    finally:
        if held is not None:
            os.close(held)
    assert fed(database) == []
    if kind == "link":
        assert target.read_text() == "kept\n"
    if kind == "mode-0644":
        assert (letters.read_text(), letters.stat().st_mode & 0o777) == ("kept\n", 0o644)


def _limit_file_size(size: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_letter_a_full_disk_cut_short_is_completed_by_the_next_run(
    tmp_path: Path, database: Path
) -> None:
    letters = tmp_path / "dead.jsonl"
    earlier = json.dumps({"feed": "old", "line": 1, "rule": "r", "text": "x" * (4 << 20)})
    letters.write_text(earlier + "\n")
    letters.chmod(0o600)
    feed = write_feed(tmp_path, BAD, upsert(201))
    args = ["apply", str(feed), "--db", str(database), "--dead-letter", str(letters)]
    # The file may grow by 20 bytes: what a full disk takes of a letter, as `ulimit -f`.
    size = letters.stat().st_size
    process = start(args, preexec_fn=_limit_file_size(size + 20))
    assert ended(process) == Ended(
        2, "", f"ticket-tools: cannot write {letters}: the disk took part of a line\n"
    )
    assert fed(database) == []  # the line after it was never committed
    process = start(args)
    assert ended(process) == Ended(
        3, summary(1, str(feed), database), f"ticket-tools: 1 line set aside in {letters}\n"
    )
    first, cut, whole = letters.read_text().splitlines()
    letter = {"feed": str(feed), "line": 1, "rule": BAD_RULE, "text": BAD}
    assert (first, cut, json.loads(whole)) == (earlier, json.dumps(letter)[:20], letter)


# --- FIFOs and links as the feed ---


def test_a_fifo_whose_writer_closes_at_once_is_an_empty_feed(
    tmp_path: Path, database: Path
) -> None:
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    process = start(["apply", str(fifo), "--db", str(database)])
    with fifo.open("wb"):
        pass
    assert ended(process) == Ended(0, summary(0, str(fifo), database, NO_CHANGE), "")


def test_a_feed_through_a_symbolic_link_is_read(tmp_path: Path, database: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(write_feed(tmp_path, *FEED))
    process = start(["apply", str(link), "--db", str(database)])
    assert ended(process) == Ended(0, summary(3, str(link), database), "")
    assert fed(database) == ALL_FED


# --- Signals at each kind of wait, once and twice ---

WAITING = (
    "ticket-tools: waiting for the writers' lock of {target}: another apply or an "
    "import --replace holds it (up to 600 s, --wait-seconds)\n"
)
NOT_COMMITTED = (
    "ticket-tools: terminated (SIGTERM) while a batch waited for the store: "
    "lines from 2 on were not committed\n"
)


def without_progress(text: str) -> str:
    """Drop the progress line a terminal may show (drawn once a second, if at all)."""
    return "".join(line for line in text.splitlines(keepends=True) if "applying: " not in line)


@pytest.fixture
def pg(postgres_database: PostgresDatabase, scratch: str) -> str:
    """The scratch database holding the fixture tickets: the owner's DSN."""
    owner = postgres_database.cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    return owner


def pg_fed(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as connection:
        rows = connection.execute(
            "SELECT id, title FROM tickets WHERE id >= 'TKT-200' ORDER BY id"
        ).fetchall()
    return [(str(ticket_id), str(title)) for ticket_id, title in rows]


def _send_line(process: subprocess.Popen[bytes], line: str) -> None:
    stdin_of(process).write((line + "\n").encode())
    stdin_of(process).flush()


# Per wait: what each signal sequence ends with (None: the two race, so it is not tried).
TWICE_AS_ONCE = {"int-int": "int", "term-term": "term"}


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_the_feed_fifo_waits_for_its_writer(
    tmp_path: Path, database: Path, signals: str
) -> None:
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    process = start(["apply", str(fifo), "--db", str(database)])
    blocked_in_open(process.pid)
    send(process, SIGNALS[signals])
    assert ended(process) in outcomes(signals)


@pytest.mark.parametrize("signals", ["int", "term", "int-int", "term-term"])
def test_signals_while_the_feed_is_silent(database: Path, signals: str) -> None:
    # SIGTERM then SIGINT race here (both end the run: which one first is the kernel's).
    process = start(["apply", "-", "--db", str(database)], stdin=subprocess.PIPE)
    _send_line(process, upsert(201))
    wait_until(lambda: fed(database) == [("TKT-201", "fed")])
    send(process, SIGNALS[signals])
    assert ended(process) == (
        Ended(130, "", INTERRUPTED)
        if SIGNALS[signals][0] == signal.SIGINT
        else Ended(143, summary(1, "stdin", database), TERMINATED)
    )


def _after_a_wait(signals: str, out: str, waiting: str) -> tuple[int, str, str]:
    """What apply ends with, signalled while its second batch waits for the writers' lock."""
    if SIGNALS[signals][-1] == signal.SIGINT:  # Ctrl-C, alone or during SIGTERM's grace
        return 130, "", waiting + INTERRUPTED
    return 143, out, waiting + NOT_COMMITTED


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_a_batch_waits_for_the_sqlite_lock(database: Path, signals: str) -> None:
    terminal = Terminal()  # on a terminal, the wait is announced: the test knows it began
    process = start(
        ["apply", "-", "--db", str(database), *LONG_WAIT],
        stdin=subprocess.PIPE,
        stderr=terminal.side,
    )
    terminal.started()
    _send_line(process, upsert(201))
    wait_until(lambda: fed(database) == [("TKT-201", "fed")])
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # as an import --replace holds it
        _send_line(process, upsert(202))
        waiting = WAITING.format(target=database)
        terminal.read_until(waiting)
        send(process, SIGNALS[signals])
        result = ended(process, err="")
    finally:
        holder.close()
    expected = _after_a_wait(signals, summary(1, "stdin", database), waiting)
    assert (result.status, result.out, without_progress(terminal.rest())) == expected
    assert fed(database) == [("TKT-201", "fed")]


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_a_batch_waits_for_the_postgres_lock(pg: str, signals: str) -> None:
    process = start(["apply", "-", "--postgres", pg, *LONG_WAIT], stdin=subprocess.PIPE)
    _send_line(process, upsert(201))
    wait_until(lambda: pg_fed(pg) == [("TKT-201", "fed")])
    with psycopg.connect(pg, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
        _send_line(process, upsert(202))
        wait_until(lambda: lock_waiters(pg) == 1)
        send(process, SIGNALS[signals])
        result = ended(process)
        waiters = lock_waiters(pg)  # the batch's wait ended with it, cancelled
    expected = _after_a_wait(signals, summary(1, "stdin", describe(pg)), "")
    assert ((result.status, result.out, result.err), waiters) == (expected, 0)
    assert pg_fed(pg) == [("TKT-201", "fed")]


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
def test_signals_while_connecting_to_a_postgres_that_never_answers(signals: str) -> None:
    with silent_server() as (address, connected):
        dsn = f"{address} dbname=tickets user={OWNER}"
        process = start(["apply", "-", "--postgres", dsn, *LONG_WAIT], stdin=subprocess.PIPE)
        connected()
        send(process, SIGNALS[signals])
        result = ended(process)
    assert result in outcomes(signals)
