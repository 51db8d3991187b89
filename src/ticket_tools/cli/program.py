"""The `ticket-tools` program: `main`, the top-level parser, and the command families it holds."""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

from ticket_tools.cli import apply, dev_token, serve, stores, streams, tools
from ticket_tools.cli.command import CommandError, Family, Parser
from ticket_tools.cli.inputs import stdout_refused
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

# What a shell reports for a process stopped by SIGPIPE: 128 + signal (Ctrl-C and SIGTERM:
# `entry.main`, `signals`).
EXIT_BROKEN_PIPE = 141
# An expected failure (CommandError, StoreError), as for argparse's usage errors.
EXIT_FAILED = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (`entry.main` runs it, signals handled)."""
    try:
        # Inside: --help's output is written here.
        options = build_parser().parse_args(argv)
        status: int = options.run(options)
        # Buffered output reaches a pipe here, so that a closed one is caught below.
        sys.stdout.flush()
    except (CommandError, StoreError) as error:
        return _fail(str(error), EXIT_FAILED)
    except (BrokenPipeError, streams.StdoutError) as error:
        streams.silence_stdout()
        if streams.closed_pipe(error):
            # The reader went away (`| head -1`), or stdout was closed from the start (`>&-`).
            return _fail("stdout was closed before the output was written", EXIT_BROKEN_PIPE)
        # A full disk (`> /dev/full`): what was written stays written, the rest is lost.
        return _fail(stdout_refused(error), EXIT_FAILED)
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
