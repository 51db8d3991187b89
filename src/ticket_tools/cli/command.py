"""What every command family shares: how it registers its commands, how one fails, counts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

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

    # One signature for typeshed's two overloads (a Namespace subclass is not used here).
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse `args`; an argument no parser takes is a usage error of this parser.

        argparse hands a subcommand's unknown arguments up to the program, which then
        printed its own usage (`apply --records` showed the program's, not apply's): the
        innermost command now refuses them itself, with its own usage.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """Print `message`; on stdout (--help, --version), a failed write is not hidden.

        argparse ignores it and exits 0: the output lost, the exit would say it was
        written. It fails here as any command's output does (141, or 2 on a full disk).
        """
        to_stdout = file is sys.stdout  # a flag: `is` would narrow sys.stdout's type to file's
        if message and to_stdout:
            sys.stdout.write(message)
            sys.stdout.flush()
            return
        super()._print_message(message, file)


class CommandError(Exception):
    """An expected failure: printed as one line on stderr, exit status 2."""


def counted(count: int, noun: str) -> str:
    """Return `count` and `noun`, plural unless one: "1 line", "3 lines", "0 tickets"."""
    return f"{count} {noun if count == 1 else noun + 's'}"
