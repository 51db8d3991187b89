"""SIGINT and SIGTERM for every command: one line and the documented status, at any moment.

From `main`'s first statement (before the commands' modules are imported) to the exit, the
first SIGINT raises KeyboardInterrupt and the first SIGTERM raises Terminated, wherever the
main thread is: importing, parsing, connecting, opening a FIFO, waiting for a lock. `main`
turns them into `ticket-tools: interrupted` (130) and `ticket-tools: terminated (SIGTERM)`
(143). Every later signal is ignored, so a second Ctrl-C during the unwinding (a rollback, a
close) cannot turn the exit into a traceback.

A command that drains on SIGTERM (`apply`) says so with `draining()`: SIGTERM then makes a
descriptor readable instead, and the command stops at its next wait for input. Within
`finishing()` (a batch being written), the work in hand has GRACE_SECONDS to end by itself;
past them Terminated is raised in it (by SIGALRM), so no wait holds the exit longer.

SIGHUP keeps its default action: the process ends at once, as after SIGKILL, and nothing
is written in place for it to leave half-done (docs/input-rules.md).

A handler runs only when the interpreter gets control back: each wait must return to it
often. psycopg's waits do (every 0.1 s); SQLite's busy wait is a C sleep, so the writers
wait for its lock in slices (`stores/sqlite/writer.py`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

# What a shell reports for a process stopped by SIGINT (Ctrl-C) or SIGTERM: 128 + signal.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
# After SIGTERM, how long a batch being written may go on before it is given up: enough for
# one that only commits (milliseconds), short of the second an exit may take.
GRACE_SECONDS = 0.5


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is; a KeyboardInterrupt, so unwound as Ctrl-C is.

    psycopg cancels the statement in flight on a KeyboardInterrupt, and every writer rolls
    back its open transaction on one.
    """


@dataclass
class _State:
    """The handlers' state: process-wide, as signal dispositions are."""

    raised: bool = False
    """A signal has raised its exception (or the command is done): later ones change nothing."""
    wake_fd: int | None = None
    """While draining: the descriptor SIGTERM writes to instead of raising."""
    terminated: bool = False
    """SIGTERM came while draining."""
    finishing: bool = False
    """Within `finishing()`."""


_state = _State()
_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


def install() -> Callable[[], None]:
    """Install the handlers; return what puts the previous ones back.

    Off the main thread (where no handler can be set) nothing is installed.
    """
    global _state  # noqa: PLW0603 - the handlers' state, fresh for each command
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _state = _State()
    previous = {signum: signal.getsignal(signum) for signum in _HANDLED}
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGALRM, _grace_over)

    def restore() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


def ignore() -> None:
    """From now on, ignore every signal: the command is done, its status decided.

    Ignored by the kernel (SIG_IGN), not by a handler: the interpreter's finalization puts
    the default action back for a handler it set, and a late Ctrl-C would then end the
    process as killed by SIGINT after its line was written.
    """
    _state.raised = True
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum in _HANDLED:
            signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def draining() -> Iterator[int]:
    """While in the block, SIGTERM makes the yielded descriptor readable (a self-pipe)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    _state.wake_fd = write_fd
    try:
        yield read_fd
    finally:
        _state.wake_fd = None
        os.close(read_fd)
        os.close(write_fd)


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """While in the block, SIGTERM (when draining) leaves it GRACE_SECONDS, then raises in it."""
    _state.finishing = True
    if _state.terminated:  # the drain's own last batch: it has the grace from its start
        signal.setitimer(signal.ITIMER_REAL, GRACE_SECONDS)
    try:
        yield
    finally:
        _state.finishing = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if _state.raised:
        return
    _state.raised = True
    raise KeyboardInterrupt


def _terminate(signum: int, frame: FrameType | None) -> None:
    if _state.raised or _state.terminated:
        return
    if _state.wake_fd is None:
        _state.raised = True
        raise Terminated
    _state.terminated = True
    with contextlib.suppress(BlockingIOError):  # already readable: once is enough
        os.write(_state.wake_fd, b"T")
    if _state.finishing:
        signal.setitimer(signal.ITIMER_REAL, GRACE_SECONDS)


def _grace_over(signum: int, frame: FrameType | None) -> None:
    if _state.raised or not _state.finishing:
        return  # the batch ended meanwhile: the drain goes on
    _state.raised = True
    raise Terminated
