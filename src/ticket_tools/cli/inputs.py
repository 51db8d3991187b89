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


def parse_json(text: str, what: str, *, say_where: bool = True) -> object:
    """Return the JSON value `text` holds; CommandError naming `what` and why if it holds none.

    A syntax error is named by json's own words and its line and column, or, without
    `say_where`, as "a syntax error": `import` reads a records file as a stream, which
    knows no position, and `--records` names the fault of one file as `import` does.
    """
    # A command line or stdin that is not UTF-8 decodes (surrogateescape) to lone
    # surrogates: not JSON text, whatever the locale.
    if not is_text(text):
        raise CommandError(f"{what} are not UTF-8 text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        # json's fixed words and the position, never the text around it.
        fault = f"{error.msg} (line {error.lineno}, column {error.colno})"
        raise CommandError(f"{what} are not valid JSON: {fault if say_where else SYNTAX}") from None
    except (ValueError, RecursionError) as error:
        # RecursionError: json.loads gives up on very deep nesting.
        raise CommandError(f"{what} are not valid JSON: {json_fault(error)}") from None


def json_fault(error: ValueError | RecursionError) -> str:
    """Say why json refused a text, for a refusal other than a syntax error."""
    # The one other ValueError of json.loads: an integer past Python's digit limit.
    return NESTED_TOO_DEEPLY if isinstance(error, RecursionError) else integer_too_long()


NESTED_TOO_DEEPLY = "arrays or objects nested too deeply"
SYNTAX = "a syntax error"


def integer_too_long() -> str:
    """Say that an integer has more digits than Python converts (`sys.set_int_max_str_digits`)."""
    return f"an integer longer than {sys.get_int_max_str_digits()} digits"


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
        raise CommandError("the arguments are not UTF-8 text") from None


def read_records(path: Path) -> object:
    """Return the JSON value of a records file, unchecked; CommandError if it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as error:
        raise CommandError(f"cannot read {path}: {os_reason(error)}") from None
    return parse_json(text, f"the records in {path}", say_where=False)


def os_reason(error: OSError) -> str:
    """Say what went wrong in the system's words ("No such file or directory").

    An OSError made without them (a socket's `TimeoutError("timed out")`) is named by its
    errno's words, or else by fixed words of its kind: never by its class name, which names
    no cause, nor by its message, which may quote what it was given.
    """
    if error.strerror:
        return error.strerror
    if error.errno:
        return os.strerror(error.errno)
    if isinstance(error, TimeoutError):
        return os.strerror(errno.ETIMEDOUT)
    return "the system gave no reason"


def stdout_refused(error: OSError) -> str:
    """Return the line saying why stdout could not be written (not a closed pipe: 141)."""
    return f"cannot write stdout: {os_reason(error)}"


def check_tenant(tenant: str) -> str:
    """Return `tenant` if a call could read its tickets; else CommandError naming the rule.

    A store key is `tenant:TKT-123` and every store refuses a key whose tenant holds `:`,
    so such a tenant, an empty one or one that is not text would read nothing: refused at
    launch, rather than serving a session whose every call fails or finds nothing.
    """
    if not tenant:
        raise CommandError("--tenant must not be empty")
    if ":" in tenant:
        raise CommandError("--tenant must not contain ':' (a ticket's key is tenant:TKT-123)")
    if not is_text(tenant):
        raise CommandError("--tenant must be UTF-8 text")
    return tenant


def positive_seconds(text: str) -> float:
    """Parse an option's number of seconds above 0 (argparse's `type=`)."""
    # Digits and one point only: float() would also take "1e3", " 2", "inf" and "nan".
    if re.fullmatch("[0-9]{1,9}([.][0-9]{1,6})?", text) is None or float(text) == 0:
        raise argparse.ArgumentTypeError("expected a number of seconds above 0, e.g. 2.5")
    return float(text)
