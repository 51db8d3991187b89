"""LineReader: lines of a descriptor, an over-long line cut and skipped, waits and wake-ups."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ticket_tools.cli.lines import CHUNK_BYTES, Event, LineReader


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):  # closed by the test
            os.close(fd)


def _all(reader: LineReader) -> list[bytes | Event]:
    items: list[bytes | Event] = []
    while (item := reader.read_line(None)) is not Event.ENDED:
        items.append(item)
    return [*items, Event.ENDED]


@pytest.mark.parametrize(
    ("data", "limit", "expected"),
    [
        pytest.param(b"", 10, [Event.ENDED], id="empty"),
        pytest.param(b"a\nbb\n", 10, [b"a\n", b"bb\n", Event.ENDED], id="lines"),
        pytest.param(b"a\nbb", 10, [b"a\n", b"bb", Event.ENDED], id="last-without-newline"),
        pytest.param(b"\n\n", 10, [b"\n", b"\n", Event.ENDED], id="blank"),
        pytest.param(
            b"a\n" + b"x" * 25 + b"\nb\n", 10, [b"a\n", b"x" * 11, b"b\n", Event.ENDED], id="cut"
        ),
        pytest.param(b"x" * 25, 10, [b"x" * 11, Event.ENDED], id="cut-at-the-end"),
        pytest.param(
            b"x" * (3 * CHUNK_BYTES) + b"\nb\n",
            10,
            [b"x" * 11, b"b\n", Event.ENDED],
            id="cut-over-chunks",
        ),
        pytest.param(b"x" * 10 + b"\n", 10, [b"x" * 10 + b"\n", Event.ENDED], id="at-the-limit"),
    ],
)
def test_lines_of_a_file(
    tmp_path: os.PathLike[str], data: bytes, limit: int, expected: list[bytes | Event]
) -> None:
    path = os.path.join(tmp_path, "feed")
    with open(path, "wb") as out:
        out.write(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _all(LineReader(fd, limit=limit)) == expected
    finally:
        os.close(fd)


def test_a_silent_pipe_waits_then_a_wake_up_stops(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    wake_read, wake_write = os.pipe()
    try:
        reader = LineReader(read_fd, limit=100, wake_fd=wake_read)
        os.write(write_fd, b"one\ntw")
        assert reader.read_line(None) == b"one\n"
        assert reader.read_line(0.01) is Event.WAITED  # "tw" is not a whole line
        os.write(write_fd, b"o\nthree\n")
        assert reader.read_line(None) == b"two\n"  # "three" is read too, in the same chunk
        os.write(wake_write, b"T")
        os.write(write_fd, b"four\n")
        # Lines already read come first; then the wake-up, and it stays.
        assert [reader.read_line(None) for _ in range(3)] == [b"three\n", Event.WOKEN, Event.WOKEN]
    finally:
        os.close(wake_read)
        os.close(wake_write)


def test_a_closed_pipe_ends(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    reader = LineReader(read_fd, limit=100)
    os.write(write_fd, b"last")
    os.close(write_fd)
    assert [reader.read_line(None), reader.read_line(None)] == [b"last", Event.ENDED]


def test_a_signal_that_interrupts_no_wait_is_handled_within_a_slice(pipe: tuple[int, int]) -> None:
    # SIGINT taken by another thread, as one landing just before poll is entered: the main
    # thread's poll is not interrupted, and the handler runs only when the interpreter gets
    # control back. Without slices that is when input comes: the line, seconds later.
    read_fd, write_fd = pipe
    reader = LineReader(read_fd, limit=100)
    waiting = Path(f"/proc/self/task/{threading.get_native_id()}/wchan")
    interrupted = threading.Event()
    written: list[bytes] = []

    def signal_then_write() -> None:
        while "poll" not in waiting.read_text() and not interrupted.wait(0.001):
            pass  # until the main thread sleeps in poll
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        if not interrupted.wait(10.0):
            written.append(b"came first\n")
            os.write(write_fd, written[0])

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    helper = threading.Thread(target=signal_then_write)
    try:
        helper.start()  # it signals once this thread sleeps in poll, in read_line
        with pytest.raises(KeyboardInterrupt):
            reader.read_line(None)
    finally:
        interrupted.set()
        helper.join()
        signal.signal(signal.SIGINT, previous)
    assert written == []  # interrupted before any input came
