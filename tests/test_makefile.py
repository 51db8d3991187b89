"""The Makefile's front door: `make help` lists every target, `make dev` builds and runs nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make") or "make"
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def phony_targets() -> list[str]:
    """Return the targets the Makefile declares .PHONY: the ones a user runs."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    declared = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    assert declared is not None
    return declared.group(1).split()


def make(*argv: str) -> str:
    done = subprocess.run(
        [MAKE, "--no-print-directory", "-C", str(ROOT), *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def test_help_gives_every_target_one_line() -> None:
    lines = make("-s", "help").splitlines()
    named = [line.split()[1] for line in lines]
    assert (sorted(named), len(named)) == (sorted(phony_targets()), len(phony_targets()))
    assert all(re.fullmatch(r"make [a-z-]+ +\S.*", line) for line in lines), lines


def test_dev_installs_the_dev_extra_and_runs_no_test() -> None:
    # A dry run (-n) of every step (-B), as on a fresh clone: what `make dev` would run.
    planned = make("-n", "-B", "dev").splitlines()
    assert (
        [line for line in planned if "-e '.[dev]'" in line],
        [line for line in planned if "pytest" in line],
    ) == (["$(BIN)/python -m pip install -q -e '.[dev]'".replace("$(BIN)", ".venv/bin")], [])
