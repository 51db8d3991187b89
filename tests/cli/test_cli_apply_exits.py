"""Every exit of `ticket-tools apply`, through the real command, fed by a pipe or a FIFO whose
writer stays open and silent: one line on stderr, the documented status, never an abort."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, cast

import pytest

from ticket_tools import fixture_records
from ticket_tools.stores.sqlite.importer import write_database

# Only reached when something is broken: how long a test waits for the process.
WAIT_SECONDS = 60.0
Feed = Literal["pipe", "fifo"]
FEEDS = [pytest.param("pipe", id="pipe"), pytest.param("fifo", id="fifo")]


def upsert(key: str, version: int, title: str) -> str:
    ticket_id = key.rpartition(":")[2]
    ticket = {"id": ticket_id, "title": title, "status": "open"}
    return json.dumps({"op": "upsert", "key": key, "version": version, "ticket": ticket})


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


def title_of(db: Path, ticket_id: str) -> str:
    connection = sqlite3.connect(db)
    try:
        row = connection.execute(
            "SELECT title FROM tickets WHERE tenant = 'alpha' AND id = ?", (ticket_id,)
        ).fetchone()
    finally:
        connection.close()
    return str(row[0])


@dataclass
class Run:
    """A running `apply` and the write end of its feed, held open by the test."""

    process: subprocess.Popen[bytes]
    feed: BinaryIO

    def send(self, *lines: str) -> None:
        self.feed.write("".join(line + "\n" for line in lines).encode())
        self.feed.flush()

    def ended(self) -> tuple[int, str, str]:
        """Wait for the exit with the feed still open; return status, stdout, stderr."""
        self.process.wait(timeout=WAIT_SECONDS)
        out = cast(BinaryIO, self.process.stdout).read().decode()
        err = cast(BinaryIO, self.process.stderr).read().decode()
        return self.process.returncode, out, err


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[Feed, list[str]], Run]]:
    runs: list[Run] = []

    def started(feed: Feed, args: list[str]) -> Run:
        command = [sys.executable, "-m", "ticket_tools.cli", "apply"]
        if feed == "pipe":
            process = subprocess.Popen(
                [*command, "-", *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            run = Run(process, cast(BinaryIO, process.stdin))
        else:
            fifo = tmp_path / "feed.fifo"
            os.mkfifo(fifo)
            process = subprocess.Popen(
                [*command, str(fifo), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            run = Run(process, fifo.open("wb"))  # returns once apply has opened it
        runs.append(run)
        return run

    yield started
    for run in runs:
        if run.process.poll() is None:
            run.process.kill()
            run.process.wait(timeout=WAIT_SECONDS)
        for stream in (run.feed, run.process.stdout, run.process.stderr):
            cast(BinaryIO, stream).close()


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


@pytest.mark.parametrize("feed", FEEDS)
def test_a_bad_line_exits_2(
    feed: Feed, database: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    run = start(feed, ["--db", str(database)])
    run.send(upsert("alpha:TKT-101", 1, "kept"), '{"op": "bogus"}')
    source = "stdin" if feed == "pipe" else str(Path(run.feed.name))
    assert run.ended() == (
        2,
        "",
        f'ticket-tools: {source} line 2: the op is not "upsert" or "delete"\n',
    )
    assert title_of(database, "TKT-101") == "kept"


@pytest.mark.parametrize("feed", FEEDS)
def test_a_refused_store_exits_2(
    feed: Feed, tmp_path: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    missing = tmp_path / "missing.sqlite"
    run = start(feed, ["--db", str(missing)])
    assert run.ended() == (2, "", f"ticket-tools: no database at {missing}\n")


@pytest.mark.parametrize("feed", FEEDS)
def test_a_locked_store_exits_2(
    feed: Feed, database: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past apply's wait
        run = start(feed, ["--db", str(database), "--wait-seconds", "0.5"])
        run.send(upsert("alpha:TKT-101", 1, "never"))
        status, out, err = run.ended()
    finally:
        holder.close()
    assert (status, out, err) == (
        2,
        "",
        f"ticket-tools: {database} is locked by another connection; try again\n",
    )


@pytest.mark.parametrize("feed", FEEDS)
def test_sigint_exits_130(
    feed: Feed, database: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    run = start(feed, ["--db", str(database)])
    run.send(upsert("alpha:TKT-101", 1, "kept"))
    _wait_until(lambda: title_of(database, "TKT-101") == "kept")
    run.process.send_signal(signal.SIGINT)
    assert run.ended() == (130, "", "ticket-tools: interrupted\n")


@pytest.mark.parametrize("feed", FEEDS)
def test_sigterm_commits_what_was_read_and_exits_143(
    feed: Feed, database: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    # That the open batch is committed, not lost, is test_cli_apply's
    # test_sigterm_commits_the_lines_read (a signal between two lines needs a seam).
    run = start(feed, ["--db", str(database)])
    run.send(upsert("alpha:TKT-101", 1, "first"))
    _wait_until(lambda: title_of(database, "TKT-101") == "first")
    run.process.send_signal(signal.SIGTERM)
    assert run.ended() == (
        143,
        f"applied 1 change from {'stdin' if feed == 'pipe' else run.feed.name} to {database}: "
        "1 upserted, 0 deleted, 0 stale\n",
        "ticket-tools: terminated (SIGTERM)\n",
    )


@pytest.mark.parametrize("feed", FEEDS)
def test_dead_letters_go_on_and_exit_3(
    feed: Feed, tmp_path: Path, database: Path, start: Callable[[Feed, list[str]], Run]
) -> None:
    letters = tmp_path / "dead.jsonl"
    run = start(feed, ["--db", str(database), "--dead-letter", str(letters)])
    bad = '{"op": "delete", "key": "alpha:TKT-102", "version": -1}'
    run.send(upsert("alpha:TKT-101", 1, "first"), bad, upsert("alpha:TKT-104", 1, "after"))
    _wait_until(lambda: title_of(database, "TKT-104") == "after")
    run.process.send_signal(signal.SIGTERM)  # the feed never ends: stopped as a supervisor would
    source = "stdin" if feed == "pipe" else run.feed.name
    assert run.ended() == (
        143,
        f"applied 2 changes from {source} to {database}: 2 upserted, 0 deleted, 0 stale\n",
        f"ticket-tools: terminated (SIGTERM); 1 line set aside in {letters}\n",
    )
    assert [json.loads(line) for line in letters.read_text().splitlines()] == [
        {
            "feed": source,
            "line": 2,
            "rule": "the version is not an integer from 0 to 2^63-1",
            "text": bad,
        }
    ]
    assert letters.stat().st_mode & 0o777 == 0o600
