"""`serve stdio` walked through every way its input can arrive, and every way it can end.

Each test runs a real `ticket-tools serve stdio` subprocess: all requests in one write and
the input closed behind them, a line split at every byte, requests pipelined behind one
waiting on a locked store, an endless line, a line at the limit and one past it; stdin or
stdout closed, /dev/null, a regular file, the same file for both, a FIFO, a full pipe nobody
reads, a pipe whose reader has gone; SIGINT and SIGTERM while it reads, while a store call
waits, while it writes, and twice. `Lines`, which cuts the input, is also checked in-process
at every boundary. The line-by-line answers (what each kind of line gets) are in
test_mcp_stdio.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import IO, Any, cast

import pytest

from expected import ALPHA
from ticket_tools import execute_tool, fixture_records
from ticket_tools.serve.server import UNAVAILABLE_DETAIL
from ticket_tools.serve.stdio import (
    LINE_TOO_LONG_MESSAGE,
    MAX_LINE_BYTES,
    Lines,
    _read_some,
    _write_all,
)
from ticket_tools.stores.sqlite import importer as sqlite_import

SERVE = [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"]
# Importing the SDK on a loaded 2-core machine takes seconds; only reached on a hang.
TIMEOUT = 90.0
PIPE_RUNS = 10  # issue 32: the pipe answered "Connection closed" 8 runs in 10


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


INITIALIZE = _line(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "walk", "version": "0"},
        },
    }
)
INITIALIZED = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
HANDSHAKE = INITIALIZE + INITIALIZED
INITIALIZE_ANSWER = {
    "jsonrpc": "2.0",
    "id": 0,
    "result": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "ticket-tools", "version": version("ticket-tools")},
    },
}


def call(request_id: object, name: str, args: dict[str, object]) -> bytes:
    """A tools/call line."""
    params = {"name": name, "arguments": args}
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def ping(request_id: object) -> bytes:
    """A ping line."""
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def pong(request_id: object) -> dict[str, object]:
    """The answer to `ping(request_id)`."""
    return {"jsonrpc": "2.0", "id": request_id, "result": {}}


def result(request_id: object, structured: dict[str, object], text: str | None = None) -> Any:
    """A tools/call answer: `structured`, its text (JSON, or "code: detail" for a failure)."""
    failed = structured["ok"] is False
    if text is None:
        text = f"{structured['code']}: {structured['detail']}" if failed else json.dumps(structured)
    content = [{"type": "text", "text": text}]
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": content, "structuredContent": structured, "isError": failed},
    }


def get_answer(request_id: object, ticket_id: str) -> Any:
    """The answer to a get_ticket of `ticket_id` for alpha with the fixture records."""
    args = {"ticket_id": ticket_id}
    return result(request_id, execute_tool("get_ticket", args, ALPHA, fixture_records()))


GET_104 = call(1, "get_ticket", {"ticket_id": "TKT-104"})
TOO_LONG = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": LINE_TOO_LONG_MESSAGE},
}
UNAVAILABLE = {"ok": False, "code": "unavailable", "detail": UNAVAILABLE_DETAIL}
QUERY_RULE = {
    "ok": False,
    "code": "invalid_arguments",
    "detail": "query: a string of 1 to 40 characters",
}


def _answers(out: bytes) -> list[Any]:
    return [json.loads(line) for line in out.splitlines()]


def _run(stdin: bytes, *args: str) -> tuple[int, list[Any], str]:
    """Run the server on `stdin` to its end; return its status, answers and stderr."""
    done = subprocess.run(
        [*SERVE, *args], input=stdin, capture_output=True, timeout=TIMEOUT, check=False
    )
    return done.returncode, _answers(done.stdout), done.stderr.decode()


class Server:
    """A server subprocess whose stdin the test writes and whose stdout it reads line by line."""

    def __init__(self, *args: str, stdin: int | None = None, stdout: int | None = None) -> None:
        self.process = subprocess.Popen(
            [*SERVE, *args],
            stdin=subprocess.PIPE if stdin is None else stdin,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE,
            bufsize=0,
        )

    def send(self, data: bytes) -> None:
        stdin = cast("IO[bytes]", self.process.stdin)
        stdin.write(data)

    def close(self) -> None:
        """End the input."""
        cast("IO[bytes]", self.process.stdin).close()
        self.process.stdin = None  # so that communicate() does not flush it

    def answer(self) -> Any:
        stdout = cast("IO[bytes]", self.process.stdout)
        ready, _, _ = select.select([stdout], [], [], TIMEOUT)
        assert ready, "the server did not answer"
        return json.loads(stdout.readline())

    def ready(self) -> None:
        """Handshake: once `initialize` is answered, the server handles signals."""
        self.send(HANDSHAKE)
        assert self.answer() == INITIALIZE_ANSWER

    def finish(self) -> tuple[int, bytes, str]:
        """Wait for the exit; return the status, what was left on stdout, and stderr."""
        out, err = self.process.communicate(timeout=TIMEOUT)
        return self.process.returncode, out or b"", err.decode()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A SQLite store holding the fixture records, in rollback-journal mode (see `locked`)."""
    path = tmp_path / "tickets.sqlite"
    sqlite_import.write_database(path, fixture_records())
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()
    return path


@contextmanager
def locked(database: Path) -> Iterator[None]:
    """Hold the database so that every read waits (the store's busy wait, 5 s, then locked).

    In WAL mode (import's) nothing keeps out a reader that is already connected, as the
    server is; in rollback-journal mode an exclusive transaction does.
    """
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# --- the end of input: every request read is answered, then exit 0


def test_a_pipe_closed_behind_its_requests_is_answered_every_time() -> None:
    # printf 'initialize\ninitialized\ntools/call\n' | ticket-tools serve stdio --tenant alpha
    runs = [_run(HANDSHAKE + GET_104) for _ in range(PIPE_RUNS)]
    assert runs == [(0, [INITIALIZE_ANSWER, get_answer(1, "TKT-104")], "")] * PIPE_RUNS


def test_many_requests_in_one_write_are_all_answered_before_the_exit() -> None:
    requests = b"".join(
        call(n, "get_ticket", {"ticket_id": "TKT-101" if n % 2 else "TKT-104"})
        for n in range(1, 51)
    )
    status, answers, stderr = _run(HANDSHAKE + requests)
    assert (status, stderr) == (0, "")
    assert answers[0] == INITIALIZE_ANSWER
    # Tool calls run at once, each answered when it is done: compare by id.
    by_id = sorted(answers[1:], key=lambda answer: cast("int", answer["id"]))
    expected = [get_answer(n, "TKT-101" if n % 2 else "TKT-104") for n in range(1, 51)]
    assert by_id == expected


def test_a_last_line_without_a_newline_is_answered() -> None:
    assert _run(HANDSHAKE + GET_104.rstrip(b"\n")) == (
        0,
        [INITIALIZE_ANSWER, get_answer(1, "TKT-104")],
        "",
    )


def test_a_request_waiting_on_the_store_is_answered_before_the_exit(database: Path) -> None:
    # Pipelined behind it: a ping, tools/list, a call that needs no store; all answered
    # while the first waits. The input then ends; the exit waits for the first's answer
    # (the busy wait runs out: unavailable), where it was answered "Connection closed".
    server = Server("--db", str(database))
    server.ready()  # the store is opened (and checked) at launch
    with locked(database):
        server.send(call("slow", "get_ticket", {"ticket_id": "TKT-104"}))
        server.send(ping("p") + call("quick", "search_tickets", {"query": ""}))
        assert [server.answer(), server.answer()] == [pong("p"), result("quick", QUERY_RULE)]
        server.close()
        assert server.answer() == result("slow", UNAVAILABLE)
    assert server.finish() == (0, b"", "")


def test_a_request_the_client_cancelled_is_not_waited_for(database: Path) -> None:
    server = Server("--db", str(database))
    server.ready()  # the store is opened (and checked) at launch
    with locked(database):
        server.send(call("slow", "get_ticket", {"ticket_id": "TKT-104"}) + ping("p"))
        assert server.answer() == pong("p")
        cancel = {"requestId": "slow", "reason": "the user moved on"}
        server.send(
            _line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        )
        server.close()
        # Ended before the store's busy wait did: nothing more was written.
        assert server.finish() == (0, b"", "")


# --- how the bytes arrive


@pytest.mark.parametrize("cut", range(len(GET_104) + 1))
def test_lines_are_the_same_wherever_the_input_is_cut(cut: int) -> None:
    data = GET_104 + ping(2)
    lines = Lines(MAX_LINE_BYTES)
    got = lines.feed(data[:cut]) + lines.feed(data[cut:]) + lines.end()
    assert got == [GET_104.rstrip(b"\n"), ping(2).rstrip(b"\n")]


def test_lines_cut_into_single_bytes_are_the_same() -> None:
    data = GET_104 + b"\n" + ping(2)
    lines = Lines(MAX_LINE_BYTES)
    got = [line for byte in data for line in lines.feed(bytes([byte]))] + lines.end()
    assert got == [GET_104.rstrip(b"\n"), b"", ping(2).rstrip(b"\n")]


@pytest.mark.parametrize(
    ("chunks", "lines"),
    [
        pytest.param([b"1234\n"], [b"1234"], id="at-the-limit"),
        pytest.param([b"12345\n"], [None], id="one-past"),
        pytest.param([b"12", b"34", b"\n"], [b"1234"], id="at-the-limit-in-pieces"),
        pytest.param([b"12", b"345", b"6\n7\n"], [None, b"7"], id="one-past-in-pieces"),
        pytest.param([b"123456789", b"abc", b"\n12\n"], [None, b"12"], id="skipped-to-its-end"),
        pytest.param([b"12345"], [None], id="past-it-without-a-newline"),
        pytest.param([b"1234"], [b"1234"], id="at-it-without-a-newline"),
    ],
)
def test_a_line_past_the_limit_is_one_none_and_its_rest_is_skipped(
    chunks: list[bytes], lines: list[bytes | None]
) -> None:
    cutter = Lines(4)
    got: list[bytes | None] = [line for chunk in chunks for line in cutter.feed(chunk)]
    assert got + list(cutter.end()) == lines


def test_a_line_sent_one_byte_at_a_time_is_answered() -> None:
    server = Server()
    server.ready()
    for byte in GET_104:
        server.send(bytes([byte]))
        time.sleep(0.001)  # each byte its own read, as far as the OS lets it
    assert server.answer() == get_answer(1, "TKT-104")
    server.close()
    assert server.finish() == (0, b"", "")


def _query_call(size: int) -> bytes:
    """A search_tickets line of exactly `size` bytes, newline not counted."""
    head = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": '
    head += b'{"name": "search_tickets", "arguments": {"query": "'
    tail = b'"}}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_a_line_at_the_limit_is_read_and_one_past_it_is_refused() -> None:
    server = Server()
    server.ready()
    server.send(_query_call(MAX_LINE_BYTES) + b"\n")
    assert server.answer() == result(5, QUERY_RULE)
    server.send(_query_call(MAX_LINE_BYTES + 1) + b"\n" + ping("after"))
    assert [server.answer(), server.answer()] == [TOO_LONG, pong("after")]
    server.close()
    assert server.finish() == (0, b"", "")


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def test_an_endless_line_is_answered_once_and_holds_no_memory() -> None:
    server = Server()
    server.ready()
    before = _rss_kib(server.process.pid)
    chunk = b"x" * (64 * 1024)
    for _ in range(4 * MAX_LINE_BYTES // len(chunk)):
        server.send(chunk)
    # Answered as soon as the line passed the limit, while it still went on.
    assert server.answer() == TOO_LONG
    grown_mib = (_rss_kib(server.process.pid) - before) / 1024
    server.send(b"\n" + ping("after"))
    assert server.answer() == pong("after")
    server.close()
    assert server.finish() == (0, b"", "")
    assert grown_mib < 64, f"grew {grown_mib:.1f} MiB"


# --- standard streams: closed, redirected, the same file, a FIFO, a pipe nobody reads


@pytest.mark.parametrize("fd", [0, 1], ids=["stdin", "stdout"])
def test_a_closed_standard_stream_is_refused_at_launch(fd: int) -> None:
    done = subprocess.run(
        SERVE,
        input=HANDSHAKE if fd else None,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        preexec_fn=lambda: os.close(fd),
    )
    name = ("stdin", "stdout")[fd]
    line = f"ticket-tools: serve stdio: {name} is closed; the host must connect it\n"
    assert (done.returncode, done.stderr.decode()) == (2, line)


def test_stdin_dev_null_ends_at_once_with_nothing_written() -> None:
    done = subprocess.run(
        SERVE, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_regular_files_for_stdin_and_stdout(tmp_path: Path) -> None:
    requests, answers = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    requests.write_bytes(HANDSHAKE + GET_104)
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            SERVE, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=TIMEOUT, check=False
        )
    assert (done.returncode, done.stderr) == (0, b"")
    assert _answers(answers.read_bytes()) == [INITIALIZE_ANSWER, get_answer(1, "TKT-104")]


def test_the_same_file_for_stdin_and_stdout_ends(tmp_path: Path) -> None:
    # `serve stdio < f >> f`: the answers land after the requests, may be read back as
    # messages, and are never answered (they are responses): the run ends.
    both = tmp_path / "session.jsonl"
    both.write_bytes(HANDSHAKE + GET_104)
    with both.open("rb") as stdin, both.open("ab") as stdout:
        done = subprocess.run(
            SERVE, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=TIMEOUT, check=False
        )
    assert (done.returncode, done.stderr) == (0, b"")
    lines = both.read_bytes().splitlines(keepends=True)
    assert lines[:3] == (HANDSHAKE + GET_104).splitlines(keepends=True)
    assert _answers(b"".join(lines[3:])) == [INITIALIZE_ANSWER, get_answer(1, "TKT-104")]


def test_a_stdin_that_cannot_be_read_is_the_end_of_input(tmp_path: Path) -> None:
    # A file opened for writing only: every read fails (EBADF). One line names it.
    with (tmp_path / "out").open("wb") as stdin:
        done = subprocess.run(SERVE, stdin=stdin, capture_output=True, timeout=TIMEOUT, check=False)
    line = "ticket-tools: WARNING stopped reading stdin: Bad file descriptor\n"
    assert (done.returncode, done.stdout, done.stderr.decode()) == (0, b"", line)


def test_a_fifo_for_stdin_is_read_until_its_writer_closes(tmp_path: Path) -> None:
    fifo = tmp_path / "requests.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer first, so that opening to read never blocks
    reader = os.open(fifo, os.O_RDONLY)
    server = Server(stdin=reader)
    os.close(reader)
    os.write(writer, HANDSHAKE)
    assert server.answer() == INITIALIZE_ANSWER
    os.write(writer, GET_104)
    assert server.answer() == get_answer(1, "TKT-104")
    os.close(writer)
    assert server.finish() == (0, b"", "")


def test_a_non_blocking_read_and_write_wait_in_process() -> None:
    # The subprocess test below may find bytes waiting at every read, so which branch it
    # runs depends on timing; here a read finds nothing at first and a write a full pipe.
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    try:
        later = threading.Timer(0.2, os.write, (write_end, b"late"))
        later.start()
        assert _read_some(read_end) == b"late"  # it waited: nothing was there at first
        later.join()
        drained: list[bytes] = []
        reader = threading.Timer(0.2, lambda: drained.append(_drain(read_end, capacity + 1)))
        reader.start()
        _write_all(write_end, b"x" * (capacity + 1))  # more than the pipe holds: it waits
        reader.join()
        assert drained == [b"x" * (capacity + 1)]
    finally:
        os.close(read_end)
        os.close(write_end)


def _drain(fd: int, size: int) -> bytes:
    got = b""
    while len(got) < size:
        select.select([fd], [], [])
        got += os.read(fd, size - len(got))
    return got


def test_non_blocking_stdin_and_stdout_are_waited_on() -> None:
    # O_NONBLOCK belongs to the open file, so a host may have set it on the server's ends:
    # a read with nothing to read, a write to a full pipe, then fail with EAGAIN.
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    os.set_blocking(stdin_read, False)
    os.set_blocking(stdout_write, False)
    capacity = fcntl.fcntl(stdout_write, fcntl.F_GETPIPE_SZ)
    server = Server(stdin=stdin_read, stdout=stdout_write)
    os.close(stdin_read)
    os.close(stdout_write)
    calls = 2 * capacity // 200  # more answers than the pipe holds: some write must wait
    os.write(stdin_write, HANDSHAKE)
    time.sleep(0.5)  # the reader finds nothing to read for a while
    with os.fdopen(stdin_write, "wb") as requests:
        requests.write(GET_104 * calls)
    deadline = time.monotonic() + TIMEOUT
    while _pipe_bytes(stdout_read) < capacity - 512:  # full: the writer waits
        assert time.monotonic() < deadline, "the pipe never filled"
        time.sleep(0.05)
    with os.fdopen(stdout_read, "rb") as answers:
        written = answers.read()
    assert _answers(written) == [INITIALIZE_ANSWER] + [get_answer(1, "TKT-104")] * calls
    assert server.finish() == (0, b"", "")


def test_a_stdout_whose_reader_has_gone_ends_the_server_with_141() -> None:
    read_end, write_end = os.pipe()
    server = Server(stdout=write_end)
    os.close(write_end)
    os.close(read_end)
    server.send(HANDSHAKE)
    status, _, stderr = server.finish()
    assert (status, stderr) == (
        141,
        "ticket-tools: stdout was closed before the output was written\n",
    )


def _pipe_bytes(fd: int) -> int:
    """Return how many bytes wait unread in the pipe `fd` reads."""
    got = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(got, sys.byteorder)


def test_a_full_stdout_nobody_reads_still_ends_on_sigterm() -> None:
    read_end, write_end = os.pipe()
    capacity = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    server = Server(stdout=write_end)
    os.close(write_end)
    server.send(HANDSHAKE + GET_104 * (2 * capacity // 200))  # each answer is ~250 bytes
    server.close()
    deadline = time.monotonic() + TIMEOUT
    while _pipe_bytes(read_end) < capacity - 512:  # nearly full: the writer waits
        assert time.monotonic() < deadline, "the pipe never filled"
        time.sleep(0.05)
    server.process.send_signal(signal.SIGTERM)
    status, _, stderr = server.finish()
    os.close(read_end)
    assert (status, stderr) == (143, "ticket-tools: terminated (SIGTERM)\n")


# --- signals during each wait, and twice

STOPS = [
    pytest.param([signal.SIGINT], 130, "ticket-tools: interrupted\n", id="sigint"),
    pytest.param([signal.SIGTERM], 143, "ticket-tools: terminated (SIGTERM)\n", id="sigterm"),
    pytest.param(
        [signal.SIGINT, signal.SIGINT], 130, "ticket-tools: interrupted\n", id="sigint-twice"
    ),
    pytest.param(
        [signal.SIGTERM, signal.SIGTERM],
        143,
        "ticket-tools: terminated (SIGTERM)\n",
        id="sigterm-twice",
    ),
    # Signals that arrive together are handled in signal number order: SIGINT first.
    pytest.param(
        [signal.SIGINT, signal.SIGTERM], 130, "ticket-tools: interrupted\n", id="sigint-sigterm"
    ),
]


def _stop(server: Server, signals: list[signal.Signals]) -> None:
    for signum in signals:
        server.process.send_signal(signum)
        time.sleep(0.001)


@pytest.mark.parametrize(("signals", "status", "line"), STOPS)
def test_a_signal_while_it_waits_for_input_ends_it(
    signals: list[signal.Signals], status: int, line: str
) -> None:
    server = Server()  # stdin stays open and silent: the reader waits
    server.ready()
    _stop(server, signals)
    assert server.finish() == (status, b"", line)


@pytest.mark.parametrize(("signals", "status", "line"), STOPS)
def test_a_signal_while_a_store_call_waits_ends_it(
    database: Path, signals: list[signal.Signals], status: int, line: str
) -> None:
    server = Server("--db", str(database))
    server.ready()  # the store is opened (and checked) at launch
    with locked(database):
        server.send(call("slow", "get_ticket", {"ticket_id": "TKT-104"}) + ping("p"))
        assert server.answer() == pong("p")  # the call went to the store before the ping
        _stop(server, signals)
        # Ended before the store's busy wait did: the call was never answered.
        assert server.finish() == (status, b"", line)


def test_a_signal_after_the_input_ended_while_a_call_waits_ends_it(database: Path) -> None:
    server = Server("--db", str(database))
    server.ready()  # the store is opened (and checked) at launch
    with locked(database):
        server.send(call("slow", "get_ticket", {"ticket_id": "TKT-101"}) + ping("p"))
        assert server.answer() == pong("p")
        server.close()  # the end of input waits for the call
        server.process.send_signal(signal.SIGTERM)
        assert server.finish() == (143, b"", "ticket-tools: terminated (SIGTERM)\n")
