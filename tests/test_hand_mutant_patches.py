"""Every hand mutant still applies to the tree, so `make mutate` can run it.

`make mutate` stops at a patch that no longer applies, but it runs for an hour and is not
part of `make test`: a change to a patched line would otherwise go unseen until then.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATCHES = sorted((ROOT / "tests" / "mutants").glob("*.patch"))


@pytest.mark.parametrize("patch", PATCHES, ids=[patch.stem for patch in PATCHES])
def test_the_patch_applies(patch: Path) -> None:
    applied = subprocess.run(
        ["git", "apply", "--check", str(patch)],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (applied.returncode, applied.stderr) == (0, "")
