"""A stdout that cannot be written, for every command: one line naming the OS's reason.

A full disk (/dev/full: ENOSPC) is `ticket-tools: cannot write stdout: No space left on
device`, exit 2, for every command that writes to stdout, `serve stdio` included; a closed
pipe stays `stdout was closed before the output was written`, 141 (docs/input-rules.md).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from command_inputs import ended, reap, start, subcommands
from ticket_tools.cli import main, streams
from ticket_tools.cli.program import build_parser

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "examples" / "records.json"
FULL = "ticket-tools: cannot write stdout: No space left on device\n"
PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'

# What each command is run with to write to stdout; None: a command that writes nothing
# there (`serve http` logs to stderr), so a stdout of any kind changes nothing for it.
WRITING: dict[str, list[str] | None] = {
    "acceptance": ["acceptance"],
    "call": ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "alpha"],
    "declarations": ["declarations"],
    "dev-token": ["dev-token", "--tenant", "alpha", "--dir", "{tmp}/identity"],
    "import": ["import", str(SAMPLE), "--db", "{tmp}/new.sqlite"],
    "apply": ["apply", "{tmp}/feed.jsonl", "--db", "{tmp}/t.sqlite"],
    "migrate": ["migrate", "--db", "{tmp}/t.sqlite"],
    "serve stdio": ["serve", "stdio", "--tenant", "alpha"],
    "serve http": None,
}


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


@pytest.fixture
def folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A folder holding a database of the fixture store and a one-line feed for it."""
    assert main(["import", str(SAMPLE), "--db", str(tmp_path / "t.sqlite")]) == 0
    capsys.readouterr()
    change = {
        "op": "upsert",
        "key": "alpha:TKT-104",
        "version": 5,
        "ticket": {"id": "TKT-104", "title": "t", "status": "open"},
    }
    (tmp_path / "feed.jsonl").write_text(json.dumps(change) + "\n", encoding="utf-8")
    return tmp_path


def test_every_command_is_here() -> None:
    assert sorted(WRITING) == sorted(subcommands(build_parser()))


@pytest.mark.parametrize("name", [name for name, args in WRITING.items() if args is not None])
def test_a_full_stdout_is_one_line_naming_the_reason(folder: Path, name: str) -> None:
    args = WRITING[name]
    assert args is not None
    with open("/dev/full", "wb") as full:
        process = start(
            [arg.replace("{tmp}", str(folder)) for arg in args], stdin=subprocess.PIPE, stdout=full
        )
    assert process.stdin is not None
    process.stdin.write(PING)
    process.stdin.close()
    got = ended(process)
    assert (got.status, got.err) == (2, FULL)


def test_a_full_stdout_leaves_apply_s_status_of_lines_set_aside(folder: Path) -> None:
    (folder / "feed.jsonl").write_text("not json\n", encoding="utf-8")
    letters = folder / "letters.jsonl"
    with open("/dev/full", "wb") as full:
        process = start(
            [
                *("apply", str(folder / "feed.jsonl"), "--db", str(folder / "t.sqlite")),
                *("--dead-letter", str(letters)),
            ],
            stdout=full,
        )
    got = ended(process)
    assert (got.status, got.err) == (
        3,
        f"{FULL}ticket-tools: 1 line set aside in {letters}\n",
    )


# argparse writes these to stdout itself, and ignored a failed write (exit 0, nothing shown).
PRINTED_BY_ARGPARSE = [["--help"], ["--version"], ["call", "--help"]]


@pytest.mark.parametrize("args", PRINTED_BY_ARGPARSE, ids=" ".join)
def test_a_full_stdout_for_help_and_version(args: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        process = start(args, stdout=full)
    got = ended(process)
    assert (got.status, got.err) == (2, FULL)


@pytest.mark.parametrize("args", PRINTED_BY_ARGPARSE, ids=" ".join)
def test_help_and_version_to_a_gone_reader_are_a_closed_pipe(args: list[str]) -> None:
    process = start(args)
    assert process.stdout is not None
    process.stdout.close()  # the only reader, gone before the command writes
    process.stdout = None
    got = ended(process)
    assert (got.status, got.err) == (
        141,
        "ticket-tools: stdout was closed before the output was written\n",
    )


def test_the_stand_in_answers_as_the_stream_it_guards(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as file:
        guarded = streams._GuardedOutput(file)
        assert (guarded.fileno(), guarded.isatty()) == (file.fileno(), False)
