"""Ctrl-C and SIGTERM at start-up, for every command and both entry points (issue 30, 12).

From the first statement of `main` on, before the commands' modules are imported, a signal
ends any command with its one line and status (130, 143), once or twice in a row; for the
installed script from its first module on (`ticket_tools_start`), before the brief's package
is imported: only the interpreter's own start comes first (docs/input-rules.md).
The waits of `apply` and `import` are walked in test_apply_inputs.py and test_import_inputs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ticket_tools_start  # noqa: F401 - measured here too: the script's first module
from command_inputs import (
    ENTRY_POINTS,
    PACKAGE_MODULE,
    SIGNALS,
    Ended,
    blocked_in_open,
    closing,
    ended,
    held_in_imports,
    outcomes,
    reap,
    send,
    shadowing_env,
    start,
    subcommands,
)
from ticket_tools.cli.program import build_parser


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


# Each command held where its start-up waits: a FIFO no one writes, opened as its input.
# None: a command without input, whose only wait is its imports (held there, below).
STARTING = {
    "acceptance": ["acceptance", "--records", "{fifo}"],
    "call": ["call", "get_ticket", "{{}}", "--tenant", "alpha", "--records", "{fifo}"],
    "declarations": None,
    "dev-token": None,
    "serve stdio": ["serve", "stdio", "--tenant", "alpha", "--records", "{fifo}"],
    "serve http": [
        *("serve", "http", "127.0.0.1:0", "--jwks", "{fifo}"),
        *("--issuer", "https://idp.example", "--audience", "tickets"),
    ],
    "import": ["import", "{fifo}", "--db", "{db}"],
    "apply": ["apply", "{fifo}", "--db", "{db}"],
    # Its input is a store, opened as `apply` opens one; held in its imports here.
    "migrate": None,
}
WITHOUT_INPUT = [name for name, args in STARTING.items() if args is None]


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("name", WITHOUT_INPUT)
def test_a_signal_while_the_command_line_is_imported(
    tmp_path: Path, name: str, entry: str, signals: str
) -> None:
    with held_in_imports(tmp_path) as reached:
        process = start(name.split(), command=ENTRY_POINTS[entry], env=shadowing_env(tmp_path))
        reached()
        send(process, SIGNALS[signals])
        assert ended(process) in outcomes(signals)


@pytest.mark.parametrize("signals", list(SIGNALS), ids=list(SIGNALS))
@pytest.mark.parametrize("name", WITHOUT_INPUT)
def test_a_signal_while_the_installed_script_imports_the_package(
    tmp_path: Path, name: str, signals: str
) -> None:
    # Before `main`: the script's first module installed the handlers (ticket_tools_start).
    with held_in_imports(tmp_path, PACKAGE_MODULE) as reached:
        process = start(name.split(), command=ENTRY_POINTS["script"], env=shadowing_env(tmp_path))
        reached()
        send(process, SIGNALS[signals])
        assert ended(process) in outcomes(signals)


@pytest.mark.parametrize("signals", ["int", "term"])
def test_a_signal_there_with_stderr_closed_keeps_its_status(tmp_path: Path, signals: str) -> None:
    with held_in_imports(tmp_path, PACKAGE_MODULE) as reached:
        process = start(
            ["declarations"],
            command=ENTRY_POINTS["script"],
            env=shadowing_env(tmp_path),
            preexec_fn=closing(2),
        )
        reached()
        send(process, SIGNALS[signals])
        assert ended(process) == Ended({"int": 130, "term": 143}[signals], "", "")


def test_the_package_module_is_first_imported_by_the_package() -> None:
    # What makes the test above hold the script where it says (coverage's start-up included).
    probe = (
        "import sys; first = sorted(sys.modules); import ticket_tools_start; "
        "second = sorted(sys.modules); import ticket_tools; "
        f"print([{PACKAGE_MODULE!r} in found for found in (first, second, sys.modules)])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True)
    assert (done.stdout, done.stderr) == (b"[False, False, True]\n", b"")


def test_every_command_has_a_start_up_wait_here() -> None:
    assert sorted(STARTING) == sorted(subcommands(build_parser()))


@pytest.mark.parametrize("signals", ["int", "term", "int-int", "term-int"])
@pytest.mark.parametrize("name", [name for name, args in STARTING.items() if args is not None])
def test_a_signal_while_a_command_starts(tmp_path: Path, name: str, signals: str) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    args = STARTING[name]
    assert args is not None
    db = tmp_path / "t.sqlite"
    process = start([arg.format(fifo=fifo, db=db) for arg in args])
    blocked_in_open(process.pid)
    send(process, SIGNALS[signals])
    assert ended(process) in outcomes(signals)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["input.fifo"]
