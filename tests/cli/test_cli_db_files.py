"""A `--db` that is no database file: one line naming why, for every command that takes one.

A database in a folder that cannot be searched (mode 0) gave a PermissionError traceback
(`path.exists()` raised); a file of another owner, mode 0600, said `unable to open database
file (SQLITE_CANTOPEN)`. Both are now `cannot read FILE: Permission denied` (`cannot write`
for `apply` and `import --replace`), exit 2. A FIFO held every command in SQLite's open for
ever (a C wait no signal ends): it is `it is not a regular file`, as any FIFO, socket or device.

The commands run as a real process for whom the permissions hold: as root (the suite may
run as root, who passes every permission check), without the two capabilities that let it
pass them, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, dropped in the child before it starts.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from command_inputs import ended, reap, start, subcommands
from ticket_tools import fixture_records
from ticket_tools.cli.program import build_parser
from ticket_tools.stores.sqlite.importer import write_database

# linux/prctl.h and linux/capability.h.
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
# Another user's file (as root): nobody's.
OTHER_UID = 65534

# Each command that takes --db, run with it; the store is read ("read") or written ("write"):
# `import` writes one only with --replace (a new file's folder refused: test_cli_db.py).
TAKING_DB = {
    "acceptance": (["acceptance"], "read"),
    "call": (["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "alpha"], "read"),
    "serve stdio": (["serve", "stdio", "--tenant", "alpha"], "read"),
    "serve http": (
        [
            *("serve", "http", "127.0.0.1:0", "--jwks", "{tmp}/jwks.json"),
            *("--issuer", "https://idp.example", "--audience", "tickets"),
        ],
        "read",
    ),
    "apply": (["apply", "{tmp}/feed.jsonl"], "write"),
    "import": (["import", "{tmp}/records.json", "--replace"], "write"),
    "migrate": (["migrate"], "write"),
}


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


def _without_permission_override() -> None:
    """In the child: as root, give up passing permission checks (a no-op for another user)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _run(args: list[str], folder: Path, db: Path) -> tuple[int, str]:
    command = [arg.replace("{tmp}", str(folder)) for arg in args]
    try:
        process = start([*command, "--db", str(db)], preexec_fn=_without_permission_override)
    except subprocess.SubprocessError:
        pytest.skip("root here cannot drop CAP_DAC_OVERRIDE (no CAP_SETPCAP): no check fails")
    got = ended(process)
    return got.status, got.err


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with the inputs of TAKING_DB's commands."""
    (tmp_path / "feed.jsonl").write_text("", encoding="utf-8")
    (tmp_path / "records.json").write_text("{}", encoding="utf-8")
    return tmp_path


def test_every_command_taking_db_is_here() -> None:
    parser = build_parser()
    taking = [name for name in subcommands(parser) if "--db" in _options(parser, name.split())]
    assert sorted(TAKING_DB) == sorted(taking)


def _options(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
    """Return the options of the command `path` names (`["serve", "http"]`)."""
    for name in path:
        commands = next(
            action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
        )
        parser = commands.choices[name]
    return list(parser._option_string_actions)


@pytest.mark.parametrize("name", list(TAKING_DB))
@pytest.mark.parametrize("existing", [True, False], ids=["existing", "missing"])
def test_a_database_in_a_folder_that_cannot_be_searched(
    folder: Path, name: str, existing: bool
) -> None:
    locked = folder / "locked"
    locked.mkdir()
    db = locked / "tickets.sqlite"
    if existing:
        write_database(db, fixture_records())
    locked.chmod(0)
    args, action = TAKING_DB[name]
    try:
        got = _run(args, folder, db)
    finally:
        locked.chmod(0o700)
    assert got == (2, f"ticket-tools: cannot {action} {db}: Permission denied\n")


@pytest.mark.parametrize("name", list(TAKING_DB))
def test_a_database_file_of_another_owner(folder: Path, name: str) -> None:
    db = folder / "tickets.sqlite"
    write_database(db, fixture_records())
    if os.geteuid() == 0:
        os.chown(db, OTHER_UID, OTHER_UID)
        db.chmod(0o600)
    else:  # no file can be given away: one of its own the owner may not open does the same
        db.chmod(0)
    args, action = TAKING_DB[name]
    assert _run(args, folder, db) == (2, f"ticket-tools: cannot {action} {db}: Permission denied\n")


@pytest.mark.parametrize("name", list(TAKING_DB))
def test_a_fifo_is_no_database(folder: Path, name: str) -> None:
    fifo = folder / "tickets.sqlite"
    os.mkfifo(fifo)
    args, action = TAKING_DB[name]
    assert _run(args, folder, fifo) == (
        2,
        f"ticket-tools: cannot {action} {fifo}: it is not a regular file\n",
    )
