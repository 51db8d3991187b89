"""`ticket-tools`, the installed command: Ctrl-C and SIGTERM handled from its first statement.

The console script imports this module, which stands outside the `ticket_tools` package:
importing `ticket_tools.cli` imports the package first (the brief's modules, with
dataclasses, inspect and typing: some 0.03 s), and a signal in that time had its default
action (a KeyboardInterrupt traceback, or a kill by SIGTERM with no line). Here the
handlers are installed before any import but the interpreter's own (`_signal` is built
in; `signal` would import enum first): the first SIGINT or SIGTERM before `cli.entry.main`
installs its own ends the command with its line and status, as that one does after.

Only the interpreter's start-up comes before (docs/input-rules.md). SIGHUP keeps its
default action (`cli.signals`).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: `signal`, which has one, imports enum
import sys
from types import FrameType

# As `cli.signals`: what a shell reports for a process stopped by SIGINT or SIGTERM.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class _Terminated(KeyboardInterrupt):
    """SIGTERM before `cli.entry.main` handles it, raised where the import is."""


def _stop(signum: int, frame: FrameType | None) -> None:
    # The first one decides: a second, 1 ms later, changes nothing. Not SIG_IGN here: a
    # signal already pending would be reported as "ignored due to race condition".
    _handle(_stopped)
    raise _Terminated if signum == _signal.SIGTERM else KeyboardInterrupt


def _stopped(signum: int, frame: FrameType | None) -> None:
    """A signal after the first: nothing to do, the command is ending."""


def _handle(handler: object) -> None:
    for signum in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(signum, handler)


def main() -> int:
    """Install the handlers, then run the command line (`ticket_tools.cli.main`)."""
    _handle(_stop)
    try:
        from ticket_tools.cli.entry import main as run  # noqa: PLC0415 - after the handlers

        return run()
    except _Terminated:
        return _fail("terminated (SIGTERM)", EXIT_TERMINATED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)


def _fail(message: str, status: int) -> int:
    # Ignored by the kernel (as `cli.signals.ignore` says why), the status being decided;
    # `cli.entry`'s own handlers may be the ones installed, and one may have raised.
    _handle(_signal.SIG_IGN)
    if sys.stderr is not None:  # closed (`2>&-`): the line is lost, the status stands
        print(f"ticket-tools: {message}", file=sys.stderr)
    return status
