"""The hand-in's own suite catches the tenant-key and schema mutants (tests/mutants/03, 27-29).

The hand-in is built as `make take-home` builds it, into a temporary folder; each patch is
applied there, and `python -m pytest` runs in it as a reviewer would run it (no plugin, no
conftest, nothing of this repository's). It passes without the patch and fails with it, on
exactly the tests named below.
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
DECLARATIONS = "tests/brief/test_brief_registry.py::test_the_declarations_the_model_receives"


def hand_in(destination: Path) -> Path:
    """Build the hand-in under `destination`; return its folder."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_take_home.py"), str(destination)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return destination / "take-home"


def failed_tests(folder: Path) -> tuple[int, list[str]]:
    """Run `python -m pytest` in the hand-in; return its status and the failed tests' ids."""
    # Not measured, no plugin: coverage would report the copy's files as the package's.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "COVERAGE", "COV_CORE"))
    }
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    failed = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    return done.returncode, failed


def test_the_hand_in_suite_passes_unmutated(tmp_path: Path) -> None:
    assert failed_tests(hand_in(tmp_path)) == (0, [])


@pytest.mark.parametrize(
    ("patch", "failed"),
    [
        pytest.param(
            "03-tenant-split-at-first-colon.patch", [NEIGHBOURS + "[alpha]"], id="literal-prefix"
        ),
        pytest.param(
            "27-tenant-prefix-without-colon.patch",
            [NEIGHBOURS + "[alpha]", NEIGHBOURS + "[alph]"],
            id="prefix-tenant",
        ),
        pytest.param("28-schema-drops-maximum.patch", [DECLARATIONS], id="schema-maximum"),
        pytest.param("29-schema-allows-other-keys.patch", [DECLARATIONS], id="schema-other-keys"),
    ],
)
def test_the_hand_in_suite_fails_on_the_mutant(
    tmp_path: Path, patch: str, failed: list[str]
) -> None:
    folder = hand_in(tmp_path)
    applied = subprocess.run(
        [GIT, "apply", str(ROOT / "tests" / "mutants" / patch)],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert failed_tests(folder) == (1, failed)
