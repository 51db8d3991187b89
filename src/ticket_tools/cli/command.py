"""What every command family shares: how it registers its commands, and how one fails."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeAlias

# argparse's own (private) type for what add_subparsers() returns; generic only to mypy.
Commands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""The `COMMAND` choices a family adds its parsers to, with `commands.add_parser(name, ...)`."""

Run = Callable[[argparse.Namespace], int]
"""What a command does with its parsed options; returns the exit status.

Each parser names its own with `parser.set_defaults(run=...)`.
"""

Family = Callable[[Commands], None]
"""Add one family's commands (`add_commands` in each module); `program.FAMILIES` lists them."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, with no abbreviated options, for the program and every command.

    An abbreviation would make `serve http --tenant alpha` mean `--tenant-claim alpha`,
    and let a new option change what an abbreviation in someone's script meant.
    Subcommand parsers are made of this class too (add_subparsers uses the parent's type).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - argparse's own
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


class CommandError(Exception):
    """An expected failure: printed as one line on stderr, exit status 2."""
