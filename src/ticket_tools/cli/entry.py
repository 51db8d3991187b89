"""`main`, ready for a signal or a closed standard stream from its first statement.

Only the standard library is imported before the handlers are installed (`cli.signals`);
the commands' modules (argparse, the stores, the MCP SDK: most of a start-up's time) are
imported after them, inside the same guard, so that Ctrl-C or SIGTERM at any moment of
start-up ends the command with its one line and status, never a traceback. The installed
script has handlers before these, from before the package's import (`ticket_tools_start`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

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

        return program.main(argv)
    except signals.Terminated:
        return _fail("terminated (SIGTERM)", signals.EXIT_TERMINATED)
    except KeyboardInterrupt:
        return _fail("interrupted", signals.EXIT_INTERRUPTED)
    finally:
        if argv is None:
            signals.ignore()
        else:
            restore()


def _fail(message: str, status: int) -> int:
    print(f"ticket-tools: {message}", file=sys.stderr)
    return status
