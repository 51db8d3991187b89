"""The `ticket-tools` program: `main`, the top-level parser, and the command families it holds."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from ticket_tools.cli import apply, dev_token, serve, stores, tools
from ticket_tools.cli.command import CommandError, Family, Parser
from ticket_tools.stores.failure import StoreError

# Each family module adds its commands, in this order; a new family is one module and one
# line here (docs/extending.md).
FAMILIES: tuple[Family, ...] = (
    tools.add_commands,  # acceptance, call, declarations
    serve.add_commands,  # serve stdio, serve http
    stores.add_commands,  # import
    apply.add_commands,  # apply
    dev_token.add_commands,  # dev-token
)

# What a shell reports for a process stopped by SIGINT (Ctrl-C) or SIGPIPE: 128 + signal.
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
# An expected failure (CommandError, StoreError), as for argparse's usage errors.
EXIT_FAILED = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    options = build_parser().parse_args(argv)
    try:
        status: int = options.run(options)
        # Buffered output reaches a pipe here, so that a closed one is caught below.
        sys.stdout.flush()
    except (CommandError, StoreError) as error:
        return _fail(str(error), EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`| head -1`). Point stdout at /dev/null, or Python's
        # own flush at exit fails again and prints a second message.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _fail("stdout was closed before the output was written", EXIT_BROKEN_PIPE)
    return status


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of every command, each naming its `run` (see `command.Run`)."""
    parser = Parser(
        prog="ticket-tools", description="Read-only help-desk ticket tools for a model."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for add_commands in FAMILIES:
        add_commands(commands)
    return parser


def _fail(message: str, status: int) -> int:
    print(f"ticket-tools: {message}", file=sys.stderr)
    return status


def _version() -> str:
    try:
        return importlib.metadata.version("ticket-tools")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "(not installed)"
