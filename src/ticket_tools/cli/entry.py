"""`main`, ready for a signal or a closed standard stream from its first statement.

Only the standard library is imported before the handlers are installed (`cli.signals`);
the commands' modules (argparse, the stores, the MCP SDK: most of a start-up's time) are
imported after them, inside the same guard, so that Ctrl-C or SIGTERM at any moment of
start-up ends the command with its one line and status, never a traceback. The installed
script has handlers before these, from before the package's import (`ticket_tools_start`).

A command that leaves a daemon thread behind (`serve`: a store call past its deadline or
its drain, a read of a silent stdin) ends without the interpreter's teardown, once its
status is decided, its output flushed and its exit handlers run. A daemon thread that
wakes during the teardown (its busy wait or its read returning) runs against an
interpreter being freed: `serve stdio`'s signal tests ended with SIGSEGV instead of their
status about once in 12 runs under coverage, whose saving lengthens the teardown.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from ticket_tools.cli import signals, streams


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Without `argv` (the process's own command line), the handlers stay to the exit,
    letting any later signal pass, so the status is the one returned; with `argv` (a
    caller in the same process), the previous handlers are put back.
    """
    restore = signals.install()
    try:
        streams.repair()
        from ticket_tools.cli import program  # noqa: PLC0415 - after the handlers

        status = program.main(argv)
    except signals.Terminated:
        status = _fail("terminated (SIGTERM)", signals.EXIT_TERMINATED)
    except KeyboardInterrupt:
        status = _fail("interrupted", signals.EXIT_INTERRUPTED)
    finally:
        if argv is None:
            signals.ignore()
        else:
            restore()
    if argv is None and _daemon_threads_left():
        _exit_now(status)
    return status


def _daemon_threads_left() -> bool:
    return any(thread.daemon for thread in threading.enumerate())


def _exit_now(status: int) -> NoReturn:
    """End the process with `status` after its exit handlers, skipping the teardown."""
    _flush()
    # Python's own exit handlers, as a normal exit runs them before the teardown: the
    # stores' finalizers (a PostgreSQL pool closes its connections), coverage's saving.
    atexit._run_exitfuncs()
    _flush()
    os._exit(status)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, full or gone: status stands
            stream.flush()


def _fail(message: str, status: int) -> int:
    print(f"ticket-tools: {message}", file=sys.stderr)
    return status
