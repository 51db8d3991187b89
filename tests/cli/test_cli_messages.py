"""Every failure of every command names its cause in one line (issue 32, points 5 and 6).

The commands come from the parser itself, so a new command without failure cases fails
`test_every_command_has_failure_cases`. Each case runs through `main(argv)` and checks the
whole stderr and the exit status; every message is also checked for a bare exception class
name (`OSError`, `FileNotFoundError`, `JSONDecodeError`), which names no cause.
"""

from __future__ import annotations

import argparse
import builtins
import errno
import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testkit.tokens import AUDIENCE, ISSUER, Issuer
from ticket_tools import fixture_records
from ticket_tools.cli import main
from ticket_tools.cli.inputs import os_reason
from ticket_tools.cli.program import build_parser
from ticket_tools.stores.sqlite.importer import write_database

Captured = pytest.CaptureFixture[str]
Command = tuple[str, ...]


def leaf_commands(parser: argparse.ArgumentParser, path: Command = ()) -> Iterator[Command]:
    """Yield the path of every command that runs (`("serve", "http")`), from the parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from leaf_commands(subparser, (*path, name))
            return
    yield path


def takes_tenant(path: Command) -> bool:
    parser = build_parser()
    for name in path:
        parser = next(
            action.choices[name]
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
        )
    return any("--tenant" in action.option_strings for action in parser._actions)


COMMANDS = sorted(leaf_commands(build_parser()))

# Arguments each command parses (what they name need not exist: only parsing is asked of
# them). `{tmp}` is the test's own folder.
PARSES: dict[Command, list[str]] = {
    ("acceptance",): [],
    ("apply",): ["{tmp}/feed.jsonl", "--db", "{tmp}/tickets.db"],
    ("call",): ["search_tickets", "{}", "--tenant", "alpha"],
    ("declarations",): [],
    ("dev-token",): ["--tenant", "alpha", "--dir", "{tmp}/identity"],
    ("import",): ["{tmp}/ok.json", "--db", "{tmp}/new.db"],
    ("migrate",): ["--db", "{tmp}/tickets.db"],
    ("serve", "http"): [
        "127.0.0.1:0",
        "--jwks",
        "{tmp}/jwks.json",
        "--issuer",
        ISSUER,
        "--audience",
        AUDIENCE,
    ],
    ("serve", "stdio"): ["--tenant", "alpha"],
}

# A name that ends like an exception class (`OSError`, `JSONDecodeError`, `OperationalError`),
# or any of Python's own exception classes (`StopIteration`, `KeyboardInterrupt`).
EXCEPTION_NAMES = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
CLASS_LIKE = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning)\b")


def bare_exception_names(text: str) -> list[str]:
    """Return the exception class names `text` holds."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return sorted((words & EXCEPTION_NAMES) | set(CLASS_LIKE.findall(text)))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("cannot listen on 127.0.0.1:6010: OSError", ["OSError"], id="os-error"),
        pytest.param("not valid JSON (JSONDecodeError)", ["JSONDecodeError"], id="json"),
        pytest.param("cannot connect (OperationalError)", ["OperationalError"], id="psycopg"),
        pytest.param("stopped: StopIteration", ["StopIteration"], id="builtin-no-suffix"),
        pytest.param("cannot read x: No such file or directory", [], id="a-reason"),
        pytest.param("an Error of the user's", [], id="the-word-error"),
    ],
)
def test_bare_exception_names_are_found(text: str, found: list[str]) -> None:
    assert bare_exception_names(text) == found


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """A folder with the files the failure cases name."""
    (tmp_path / "ok.json").write_text("{}", encoding="utf-8")
    (tmp_path / "broken.json").write_text('{"alpha:TKT-001": {', encoding="utf-8")
    (tmp_path / "jwks.json").write_text(json.dumps(Issuer("m").jwks()), encoding="utf-8")
    write_database(tmp_path / "tickets.db", fixture_records())
    # A feed written by a pretty-printer: each change spread over several lines.
    change = {"op": "delete", "key": "alpha:TKT-101", "version": 9}
    (tmp_path / "pretty.jsonl").write_text(json.dumps(change, indent=2) + "\n", "utf-8")
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    return tmp_path


@pytest.fixture
def filled(tmp: Path) -> Iterator[Callable[[str], str]]:
    """Fill in `{tmp}` and `{port}`, a loopback port something already listens on."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        yield lambda text: text.replace("{tmp}", str(tmp)).replace("{port}", port)


NOT_JSON = "the arguments are not valid JSON"
PRETTY = (
    "the line is not JSON: it ends inside an object or array; a feed holds one whole JSON "
    "object per line (JSON Lines), not pretty-printed JSON"
)
UNREACHABLE = "host=127.0.0.1 port=1 dbname=tickets user=reader connect_timeout=5"

# (argv, expected stderr after "ticket-tools: "); every one exits 2.
FAILURES: dict[Command, list[object]] = {
    ("acceptance",): [
        pytest.param(
            ["--records", "{tmp}/missing.json"],
            "cannot read {tmp}/missing.json: No such file or directory",
            id="records-missing",
        ),
        pytest.param(
            ["--records", "{tmp}"], "cannot read {tmp}: Is a directory", id="records-a-folder"
        ),
        pytest.param(["--db", "{tmp}"], "cannot read {tmp}: it is a folder", id="db-a-folder"),
    ],
    ("apply",): [
        pytest.param(
            ["{tmp}/missing.jsonl", "--db", "{tmp}/tickets.db"],
            "cannot read {tmp}/missing.jsonl: No such file or directory",
            id="feed-missing",
        ),
        pytest.param(
            ["{tmp}", "--db", "{tmp}/tickets.db"],
            "cannot read {tmp}: Is a directory",
            id="feed-a-folder",
        ),
        pytest.param(
            ["{tmp}/pretty.jsonl", "--db", "{tmp}/tickets.db"],
            "{tmp}/pretty.jsonl line 1: " + PRETTY,
            id="feed-pretty-printed",
        ),
        pytest.param(
            ["{tmp}/pretty.jsonl", "--db", "{tmp}/missing.db"],
            "no database at {tmp}/missing.db",
            id="db-missing",
        ),
        pytest.param(
            ["{tmp}/pretty.jsonl", "--db", "{tmp}/tickets.db", "--dead-letter", "{tmp}"],
            "cannot write {tmp}: Is a directory",
            id="dead-letter-a-folder",
        ),
        pytest.param(
            ["{tmp}/pretty.jsonl", "--postgres", UNREACHABLE],
            "cannot connect to PostgreSQL (user=reader host=127.0.0.1 port=1 dbname=tickets): "
            "no connection (the server is down or unreachable, or it refused the database, "
            "role or password)",
            id="postgres-unreachable",
        ),
    ],
    ("call",): [
        pytest.param(
            ["get_ticket", "{", "--tenant", "alpha"],
            f"{NOT_JSON}: Expecting property name enclosed in double quotes (line 1, column 2)",
            id="args-cut-short",
        ),
        pytest.param(
            ["get_ticket", "", "--tenant", "alpha"],
            f"{NOT_JSON}: Expecting value (line 1, column 1)",
            id="args-empty",
        ),
        pytest.param(
            ["get_ticket", "[" * 100_000, "--tenant", "alpha"],
            f"{NOT_JSON}: arrays or objects nested too deeply",
            id="args-nested-too-deeply",
        ),
        pytest.param(
            ["search_tickets", '{"limit": ' + "9" * 5000 + "}", "--tenant", "alpha"],
            f"{NOT_JSON}: an integer longer than 4300 digits",
            id="args-integer-too-long",
        ),
        pytest.param(
            ["search_tickets", '{"query": "\udcff"}', "--tenant", "alpha"],
            "the arguments are not UTF-8 text",
            id="args-not-utf8",
        ),
        pytest.param(
            ["search_tickets", "{}", "--tenant", "alpha", "--records", "{tmp}/broken.json"],
            "the records in {tmp}/broken.json are not valid JSON: a syntax error",
            id="records-not-json",
        ),
        pytest.param(
            ["search_tickets", "{}", "--tenant", "alpha", "--db", "{tmp}/missing.db"],
            "no database at {tmp}/missing.db",
            id="db-missing",
        ),
        pytest.param(
            ["search_tickets", "{}", "--tenant", "alpha", "--postgres", UNREACHABLE],
            "cannot connect to PostgreSQL (user=reader host=127.0.0.1 port=1 dbname=tickets): "
            "no connection (the server is down or unreachable, or it refused the database, "
            "role or password)",
            id="postgres-unreachable",
        ),
    ],
    ("declarations",): [],  # no input but its options: its usage errors are tested below
    ("dev-token",): [
        pytest.param(
            ["--tenant", "alpha", "--dir", "{tmp}/a-file"],
            "cannot write {tmp}/a-file: it is not a folder",
            id="dir-a-file",
        ),
        pytest.param(
            ["--tenant", "../alpha", "--dir", "{tmp}/identity"],
            "--tenant: dev-token names each token file after its tenant, so here a tenant is "
            "1 to 64 letters, digits, '.', '_' and '-', not starting with '.' or '-'",
            id="tenant-not-a-file-name",
        ),
    ],
    ("import",): [
        pytest.param(
            ["{tmp}/missing.json", "--db", "{tmp}/new.db"],
            "cannot read {tmp}/missing.json: No such file or directory",
            id="records-missing",
        ),
        pytest.param(
            ["{tmp}/broken.json", "--db", "{tmp}/new.db"],
            "the records in {tmp}/broken.json are not valid JSON: a syntax error",
            id="records-not-json",
        ),
        pytest.param(
            ["{tmp}/ok.json", "--db", "{tmp}/no-such-folder/new.db"],
            "cannot write {tmp}/no-such-folder/new.db: No such file or directory",
            id="db-folder-missing",
        ),
        pytest.param(
            ["{tmp}/ok.json", "--db", "{tmp}/tickets.db"],
            "{tmp}/tickets.db already exists; import only creates new files",
            id="db-exists",
        ),
    ],
    ("migrate",): [
        pytest.param(
            ["--db", "{tmp}/missing.db"], "no database at {tmp}/missing.db", id="db-missing"
        ),
        pytest.param(["--db", "{tmp}"], "cannot write {tmp}: it is a folder", id="db-a-folder"),
        pytest.param(
            ["--db", "{tmp}/ok.json"], "{tmp}/ok.json is not an SQLite database", id="db-not-sqlite"
        ),
        pytest.param(
            ["--postgres", UNREACHABLE],
            "cannot migrate PostgreSQL (user=reader host=127.0.0.1 port=1 dbname=tickets): "
            "no connection (the server is down or unreachable, or it "
            "refused the database, role or password)",
            id="postgres-unreachable",
        ),
    ],
    ("serve", "http"): [
        pytest.param(
            [
                "127.0.0.1:0",
                "--jwks",
                "{tmp}/missing.json",
                "--issuer",
                ISSUER,
                "--audience",
                AUDIENCE,
            ],
            "cannot load the JWKS: cannot read {tmp}/missing.json: No such file or directory",
            id="jwks-missing",
        ),
        pytest.param(
            [
                "127.0.0.1:0",
                "--jwks",
                "https://127.0.0.1:1/jwks.json",
                "--issuer",
                ISSUER,
                "--audience",
                AUDIENCE,
            ],
            "cannot load the JWKS: cannot fetch https://127.0.0.1:1/jwks.json: Connection refused",
            id="jwks-url-refused",
        ),
        pytest.param(
            [
                "127.0.0.1:{port}",
                "--jwks",
                "{tmp}/jwks.json",
                "--issuer",
                ISSUER,
                "--audience",
                AUDIENCE,
            ],
            "cannot listen on 127.0.0.1:{port}: Address already in use",
            id="address-in-use",
        ),
        pytest.param(
            # TEST-NET-1 (RFC 5737): never an address of this machine.
            [
                "192.0.2.1:0",
                "--jwks",
                "{tmp}/jwks.json",
                "--issuer",
                ISSUER,
                "--audience",
                AUDIENCE,
            ],
            "cannot listen on 192.0.2.1:0: Cannot assign requested address",
            id="address-not-here",
        ),
        pytest.param(
            [
                "127.0.0.1:0",
                "--jwks",
                "{tmp}/jwks.json",
                "--issuer",
                ISSUER,
                "--audience",
                AUDIENCE,
                "--audit-log",
                "{tmp}",
            ],
            "cannot open {tmp}: Is a directory",
            id="audit-log-a-folder",
        ),
    ],
    ("serve", "stdio"): [
        pytest.param(
            ["--tenant", "alpha", "--records", "{tmp}/missing.json"],
            "cannot read {tmp}/missing.json: No such file or directory",
            id="records-missing",
        ),
    ],
}

CASES = [
    pytest.param(path, *case.values, id=f"{' '.join(path)}-{case.id}")  # type: ignore[attr-defined]
    for path, cases in FAILURES.items()
    for case in cases
]


def test_every_command_has_failure_cases() -> None:
    # A new command is listed here with its failures (or an empty list saying why none).
    assert (sorted(FAILURES), sorted(PARSES)) == (COMMANDS, COMMANDS)


@pytest.mark.parametrize(("path", "argv", "expected"), CASES)
def test_each_failure_names_its_cause(
    capsys: Captured,
    filled: Callable[[str], str],
    path: Command,
    argv: list[str],
    expected: str,
) -> None:
    assert main([*path, *(filled(arg) for arg in argv)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"ticket-tools: {filled(expected)}\n")
    assert bare_exception_names(captured.err) == []


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_a_usage_error_prints_the_commands_own_usage(
    capsys: Captured, tmp_path: Path, path: Command
) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in PARSES[path]]
    with pytest.raises(SystemExit) as exited:
        main([*path, *argv, "--no-such-option"])
    lines = capsys.readouterr().err.splitlines()
    command = " ".join(("ticket-tools", *path))
    assert (exited.value.code, lines[0].startswith(f"usage: {command} "), lines[-1]) == (
        2,
        True,
        f"{command}: error: unrecognized arguments: --no-such-option",
    )


def test_apply_with_an_option_it_does_not_take_prints_applys_usage(capsys: Captured) -> None:
    # The case a user met: `--records` belongs to the reading commands, not to apply.
    with pytest.raises(SystemExit):
        main(["apply", "feed.jsonl", "--db", "tickets.db", "--records", "records.json"])
    lines = capsys.readouterr().err.splitlines()
    assert (lines[0].split()[:3], lines[-1]) == (
        ["usage:", "ticket-tools", "apply"],
        "ticket-tools apply: error: unrecognized arguments: --records records.json",
    )


# --- A tenant no call could read is refused at launch (point 5) ---

TENANT_COMMANDS = [path for path in COMMANDS if takes_tenant(path)]


def test_the_commands_that_take_a_tenant() -> None:
    assert TENANT_COMMANDS == [("call",), ("dev-token",), ("serve", "stdio")]


@pytest.mark.parametrize(
    ("tenant", "rule"),
    [
        pytest.param("", "--tenant must not be empty", id="empty"),
        pytest.param(
            "alpha:x",
            "--tenant must not contain ':' (a ticket's key is tenant:TKT-123)",
            id="colon",
        ),
        pytest.param(
            ":", "--tenant must not contain ':' (a ticket's key is tenant:TKT-123)", id="a-colon"
        ),
        pytest.param("\udcff", "--tenant must be UTF-8 text", id="not-utf8"),
    ],
)
@pytest.mark.parametrize("path", TENANT_COMMANDS, ids=" ".join)
def test_a_tenant_no_call_could_read_is_refused(
    capsys: Captured,
    tmp_path: Path,
    path: Command,
    tenant: str,
    rule: str,
) -> None:
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in PARSES[path]]
    argv[argv.index("--tenant") + 1] = tenant
    assert main([*path, *argv]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {rule}\n")
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


# --- Counts in words: one of a thing, two of them (point 6) ---


def test_one_ticket_imported_and_one_change_applied(capsys: Captured, tmp_path: Path) -> None:
    records = tmp_path / "records.json"
    records.write_text(
        json.dumps({"alpha:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"}}), "utf-8"
    )
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps({"op": "delete", "key": "alpha:TKT-001", "version": 1}) + "\n")
    db = tmp_path / "tickets.db"
    assert main(["import", str(records), "--db", str(db)]) == 0
    assert main(["apply", str(feed), "--db", str(db)]) == 0
    assert capsys.readouterr() == (
        f"imported 1 ticket into {db}\n"
        f"applied 1 change from {feed} to {db}: 0 upserted, 1 deleted, 0 stale\n",
        "",
    )


def test_one_line_set_aside_and_five_lines(capsys: Captured, tmp: Path) -> None:
    one = tmp / "one.jsonl"
    one.write_text("{\n", encoding="utf-8")
    database = str(tmp / "tickets.db")
    for feed, letters in [(one, tmp / "one.letters"), (tmp / "pretty.jsonl", tmp / "five.letters")]:
        assert main(["apply", str(feed), "--db", database, "--dead-letter", str(letters)]) == 3
    # Each of the five lines of the pretty-printed change is refused.
    assert capsys.readouterr().err == (
        f"ticket-tools: 1 line set aside in {tmp / 'one.letters'}\n"
        f"ticket-tools: 5 lines set aside in {tmp / 'five.letters'}\n"
    )


def _with_errno(number: int) -> OSError:
    error = OSError()
    error.errno = number
    return error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        pytest.param(
            FileNotFoundError(2, "No such file or directory"),
            "No such file or directory",
            id="strerror",
        ),
        pytest.param(_with_errno(errno.EACCES), os.strerror(errno.EACCES), id="errno-only"),
        pytest.param(TimeoutError("timed out"), os.strerror(errno.ETIMEDOUT), id="socket-timeout"),
        pytest.param(OSError("the value sent"), "the system gave no reason", id="message-only"),
    ],
)
def test_an_os_error_is_named_by_the_systems_words(error: OSError, reason: str) -> None:
    assert os_reason(error) == reason
