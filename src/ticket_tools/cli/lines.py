"""The lines of a file descriptor, read on the calling thread, never blocked past a deadline.

`apply` reads its feed here rather than through a thread and Python's buffered reader:
a thread blocked in `readline()` holds the buffer's lock, and the interpreter cannot
then exit ("Fatal Python error: _enter_buffered_busy"), nor a FIFO be closed. Here
the only wait is `poll`, on the feed and on a wake-up descriptor (SIGTERM's), with a
timeout: Ctrl-C interrupts it, and nothing is left behind holding the exit.
"""

from __future__ import annotations

import enum
import os
import select
import time

# Bytes asked of the kernel at a time: a pipe's whole buffer, a few hundred feed lines.
CHUNK_BYTES = 1 << 16
# The longest single poll: a signal that lands just before poll is entered (its handler
# not yet run) interrupts nothing, so the wait returns to the interpreter this often and
# the handler runs then, as psycopg's waits do, rather than when input next comes.
SLICE_SECONDS = 0.1


class Event(enum.Enum):
    """What `LineReader.read_line` returns instead of a line."""

    WAITED = "waited"
    """The timeout passed with no whole line."""
    ENDED = "ended"
    """The end of the input: every line has been returned."""
    WOKEN = "woken"
    """The wake-up descriptor became readable (and stays so): stop reading."""


class LineReader:
    """Return the lines of `fd` one at a time, each with its newline (the last may lack one).

    A line longer than `limit` bytes is returned cut to its first `limit + 1` bytes
    (enough for its reader to know it is too long); the rest of it is skipped, so
    memory stays within `limit + CHUNK_BYTES` whatever the input holds.
    """

    def __init__(self, fd: int, *, limit: int, wake_fd: int | None = None) -> None:
        self._fd = fd
        self._limit = limit
        self._wake_fd = wake_fd
        self._poll = select.poll()
        # poll, not epoll: epoll refuses a regular file; poll says it is always ready.
        self._poll.register(fd, select.POLLIN)
        if wake_fd is not None:
            self._poll.register(wake_fd, select.POLLIN)
        self._buffer = b""
        self._start = 0
        self._skipping = False  # within the rest of a line over the limit
        self._ended = False

    def read_line(self, timeout: float | None) -> bytes | Event:
        """Return the next line, or an Event if none is whole within `timeout` seconds.

        Lines already read are returned before a wake-up is looked at; None waits
        without a deadline. Raises OSError if reading fails.
        """
        while True:
            line = self._take()
            if line is not None:
                return line
            if self._ended:
                return self._rest()
            event = self._wait(timeout)
            if event is not None:
                return event
            chunk = os.read(self._fd, CHUNK_BYTES)
            self._ended = not chunk
            self._buffer = self._buffer[self._start :] + chunk
            self._start = 0

    def _take(self) -> bytes | None:
        end = self._buffer.find(b"\n", self._start)
        if self._skipping:
            if end < 0:
                self._buffer, self._start = b"", 0
                return None
            self._skipping = False
            self._start = end + 1
            end = self._buffer.find(b"\n", self._start)
        if end >= 0:
            # Cut at the limit, as a line read in several chunks would be.
            line = self._buffer[self._start : min(end + 1, self._start + self._limit + 1)]
            self._start = end + 1
            return line
        if len(self._buffer) - self._start > self._limit:
            line = self._buffer[self._start : self._start + self._limit + 1]
            self._buffer, self._start = b"", 0
            self._skipping = True
            return line
        return None

    def _rest(self) -> bytes | Event:
        rest = b"" if self._skipping else self._buffer[self._start :]
        self._buffer, self._start = b"", 0
        return rest or Event.ENDED

    def _wait(self, timeout: float | None) -> Event | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE_SECONDS if deadline is None else deadline - time.monotonic()
            ready = dict(self._poll.poll(max(0, round(min(left, SLICE_SECONDS) * 1000))))
            if ready:
                break
            if deadline is not None and time.monotonic() >= deadline:
                return Event.WAITED
        if self._wake_fd in ready:
            return Event.WOKEN
        return None
