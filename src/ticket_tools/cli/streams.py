"""The standard streams a command was started with, closed ones (`<&-`, `>&-`, `2>&-`) included.

A descriptor 0, 1 or 2 closed at the start would be handed to the next file opened: a
dead-letter file opened as descriptor 2 would then receive what is meant for stderr.
`repair` puts /dev/null there first, as SQLite does for its own files. Python has already
set such a stream to None, and the commands read that: a closed stdin cannot be read
(`inputs.stdin_fd`), output to a closed stdout fails as a closed pipe does (exit 141), and
what goes to a closed stderr is lost, the exit status intact.
"""

from __future__ import annotations

import io
import os
import sys

STDIO_FDS = (0, 1, 2)


class ClosedStdoutError(BrokenPipeError):
    """Written to a stdout that was closed when the command started: handled as a closed pipe."""


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
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - to the exit


def silence_stdout() -> None:
    """Point descriptor 1 at /dev/null, after a write to it failed (the reader went away).

    Else the interpreter's own flush at exit fails again, and prints a second message.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
