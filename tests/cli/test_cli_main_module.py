"""`python -m ticket_tools` runs the command line; importing its `__main__` loads none of it."""

from __future__ import annotations

import importlib
import os
import runpy
import subprocess
import sys

import pytest

from ticket_tools.cli.program import build_parser

Captured = pytest.CaptureFixture[str]


def python(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, check=False, env=env, timeout=120
    )


def test_help_in_a_real_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    completed = python("-m", "ticket_tools", "--help")
    assert (completed.returncode, completed.stdout, completed.stderr) == (
        0,
        build_parser().format_help(),
        "",
    )


def test_acceptance_in_a_real_process() -> None:
    completed = python("-m", "ticket_tools", "acceptance")
    lines = completed.stdout.splitlines()
    assert (completed.returncode, completed.stderr, len(lines)) == (0, "", 14)
    assert [line.split()[:2] for line in lines[:-1]] == [["PASS", f"A{n}"] for n in range(1, 14)]
    assert lines[-1] == "13 passed, 0 failed"


def test_running_the_package_runs_main(monkeypatch: pytest.MonkeyPatch, capsys: Captured) -> None:
    monkeypatch.setattr("sys.argv", ["ticket_tools", "--version"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("ticket_tools", run_name="__main__", alter_sys=True)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("ticket-tools ")


def test_importing_the_main_module_loads_no_cli() -> None:
    probe = (
        "import sys, ticket_tools.__main__; "
        "print(sorted(m for m in sys.modules if m.startswith('ticket_tools.cli')))"
    )
    completed = python("-c", probe)
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "[]\n", "")


def test_importing_the_main_module_in_process_runs_nothing(capsys: Captured) -> None:
    importlib.reload(importlib.import_module("ticket_tools.__main__"))
    assert capsys.readouterr() == ("", "")
