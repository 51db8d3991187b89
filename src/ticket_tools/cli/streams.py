"""The standard streams a command was started with, closed ones (`<&-`, `>&-`, `2>&-`) included.

A descriptor 0, 1 or 2 closed at the start would be handed to the next file opened: a
dead-letter file opened as descriptor 2 would then receive what is meant for stderr.
`repair` puts /dev/null there first, as SQLite does for its own files. Python has already
set such a stream to None, and the commands read that: a closed stdin cannot be read
(`inputs.stdin_fd`), output to a closed stdout fails as a closed pipe does (exit 141), and
what goes to a closed stderr is lost, the exit status intact.

A stdout that refuses a write for another reason (a full disk, `> /dev/full`: ENOSPC; EIO)
raises StdoutError from the stand-in `repair` wraps it in, so that the command line names
that reason (`cannot write stdout: No space left on device`, exit 2) and no other failure
is mistaken for it.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable
from typing import TextIO, TypeVar, cast

_T = TypeVar("_T")

STDIO_FDS = (0, 1, 2)


class ClosedStdoutError(BrokenPipeError):
    """Written to a stdout that was closed when the command started: handled as a closed pipe."""


class StdoutError(OSError):
    """A write to stdout failed, and not because the reader went away: ENOSPC, EIO."""


def closed_pipe(error: OSError) -> bool:
    """Return whether a failed write to stdout means it was closed (its reader gone, `>&-`).

    Else it was refused for another reason (StdoutError). `serve stdio`'s transport raises
    BrokenPipeError for any write it could not make, with the system's errno and reason.
    """
    return error.errno in (None, errno.EPIPE)


class _GuardedOutput(io.TextIOBase):
    """What sys.stdout is (`repair`): the interpreter's, a failed write raised as StdoutError."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return _guarded(self._stream.write, text)

    def flush(self) -> None:
        _guarded(self._stream.flush)

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


def _guarded(call: Callable[..., _T], *args: str) -> _T:
    try:
        return call(*args)
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(error.errno, error.strerror) from None


class _ClosedOutput(io.TextIOBase):
    """What sys.stdout is when descriptor 1 was closed: any write fails."""

    def write(self, text: str) -> int:
        raise ClosedStdoutError("stdout is closed")

    def fileno(self) -> int:
        return 1  # /dev/null since `repair`


def repair() -> None:
    """Open /dev/null on each closed standard descriptor; give a None stream its stand-in."""
    for fd in STDIO_FDS:
        try:
            os.fstat(fd)
        except OSError:
            # The lowest free descriptor: this one, the lower ones being open by now.
            os.open(os.devnull, os.O_RDWR)
    if sys.stdout is None:
        sys.stdout = _ClosedOutput()
    elif sys.stdout is sys.__stdout__:  # not a caller's own stream (pytest's capsys)
        sys.stdout = _GuardedOutput(cast(TextIO, sys.stdout))
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - to the exit


def silence_stdout() -> None:
    """Point descriptor 1 at /dev/null, after a write to it failed (the reader went away).

    Else the interpreter's own flush at exit fails again, and prints a second message.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
