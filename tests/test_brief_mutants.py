"""The brief's suite alone catches the two tenant-key mutants (tests/mutants/03 and 27).

Each patch is applied to a copy of src/ holding only tests/brief and pyproject.toml (so no
conftest and no test from outside the brief's folder runs); there, `pytest tests/brief`
passes without the patch and fails with it, on exactly the tests named below.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GIT = shutil.which("git") or "git"
ISOLATION = "tests/brief/test_brief_isolation.py::"
NEIGHBOURS = ISOLATION + "test_a_tenant_sees_no_key_of_a_tenant_whose_name_extends_its_own"


def brief_copy(destination: Path) -> Path:
    """Copy the source, the brief's suite and the config into `destination`; return it."""
    ignored = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", destination / "src", ignore=ignored)
    shutil.copytree(ROOT / "tests" / "brief", destination / "tests" / "brief", ignore=ignored)
    shutil.copy2(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


def failed_brief_tests(tree: Path) -> tuple[int, list[str]]:
    """Run `pytest tests/brief` in `tree`; return its status and the failed tests' ids."""
    # Not measured: coverage would report the copy's files as the package's, uncovered.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE", "COV_CORE"))}
    env["PYTHONPATH"] = str(tree / "src")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests/brief"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    return done.returncode, failed


def test_the_brief_suite_passes_on_the_unmutated_copy(tmp_path: Path) -> None:
    assert failed_brief_tests(brief_copy(tmp_path)) == (0, [])


@pytest.mark.parametrize(
    ("patch", "failed"),
    [
        pytest.param(
            "03-tenant-split-at-first-colon.patch", [NEIGHBOURS + "[alpha]"], id="last-colon"
        ),
        pytest.param(
            "27-tenant-prefix-without-colon.patch",
            [NEIGHBOURS + "[alpha]", NEIGHBOURS + "[alph]"],
            id="prefix-tenant",
        ),
    ],
)
def test_the_brief_suite_alone_fails_on_the_mutant(
    tmp_path: Path, patch: str, failed: list[str]
) -> None:
    tree = brief_copy(tmp_path)
    applied = subprocess.run(
        [GIT, "apply", str(ROOT / "tests" / "mutants" / patch)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert failed_brief_tests(tree) == (1, failed)
