"""Reading what a command is given (JSON text, stdin, a records file), failing in one line."""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import sys
from pathlib import Path

from ticket_tools.cli.command import CommandError
from ticket_tools.stores.records import is_text


def parse_json(text: str, what: str) -> object:
    """Return the JSON value `text` holds; CommandError naming `what` if it holds none."""
    # A command line or stdin that is not UTF-8 decodes (surrogateescape) to lone
    # surrogates: not JSON text, whatever the locale.
    if not is_text(text):
        raise CommandError(f"{what} are not valid JSON (UnicodeDecodeError)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        # RecursionError: json.loads gives up on very deep nesting.
        raise CommandError(f"{what} are not valid JSON ({type(error).__name__})") from None


def closed_stdin() -> CommandError:
    """Return the error of reading a stdin closed when the command started (`<&-`)."""
    # Not read as empty: `streams.repair` put /dev/null there only so no file would be opened as it.
    return CommandError(f"cannot read stdin: {os.strerror(errno.EBADF)}")


def read_stdin() -> str:
    """Return all of stdin, the arguments of `call ... -`."""
    if sys.stdin is None:
        raise closed_stdin()
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        # JSON is UTF-8: undecodable bytes are malformed JSON, not a crash.
        raise CommandError("the arguments are not valid JSON (UnicodeDecodeError)") from None


def read_records(path: Path) -> object:
    """Return the JSON value of a records file, unchecked; CommandError if it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as error:
        raise CommandError(f"cannot read {path}: {os_reason(error)}") from None
    return parse_json(text, f"the records in {path}")


def os_reason(error: OSError) -> str:
    """Say what went wrong in the system's words ("No such file or directory")."""
    return error.strerror or type(error).__name__


def positive_seconds(text: str) -> float:
    """Parse an option's number of seconds above 0 (argparse's `type=`)."""
    # Digits and one point only: float() would also take "1e3", " 2", "inf" and "nan".
    if re.fullmatch("[0-9]{1,9}([.][0-9]{1,6})?", text) is None or float(text) == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds above 0, e.g. 2.5")
    return float(text)
