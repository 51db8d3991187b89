"""Run the suite against each hand-written security mutant (`make mutate`).

Each tests/mutants/*.patch is one fault mutmut cannot make: its first paragraph says what
the fault is, the rest is a `git diff` against src/. For each patch, in name order, the
tree is copied to a temporary directory, the patch is applied there (never to the working
tree), and the whole suite runs against the copy. A patch that no longer applies stops the
run before any suite runs: regenerate it against the current source.

Prints CAUGHT (the suite failed: the tests have teeth) or MISSED per mutant, then the
score; the exit status is 0 only when every mutant was caught.

    python tests/mutants/run_hand_mutants.py                 # every patch
    python tests/mutants/run_hand_mutants.py 05 12           # the patches whose names start so
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATCHES = Path(__file__).resolve().parent
# What a copy of the tree needs to run the suite: the source, the tests, the config, and
# what tests read beside them: testkit/ (the shared helpers, on pytest's pythonpath), the
# sample records file, and the licence the CLI tests compare.
COPIED = ("src", "tests", "testkit", "examples", "pyproject.toml", "LICENSE")
# Generous: the whole suite takes well under a minute; a mutant that loops forever is caught.
SUITE_TIMEOUT_SECONDS = 900
# pytest's exit statuses: 1 is "tests failed", 2 "interrupted" (a collection error, such
# as a mutant that no longer imports). Both mean the suite rejected the mutant.
REJECTED = (1, 2)


@dataclass(frozen=True)
class Verdict:
    """What the suite made of one mutant."""

    patch: str
    caught: bool
    seconds: float
    evidence: str
    """The first failing test, or why the suite stopped."""


def describe(patch: Path) -> str:
    """Return a patch's first line: what its fault is."""
    return patch.read_text("utf-8").splitlines()[0]


def copy_tree(destination: Path) -> Path:
    """Copy what the suite needs into `destination`; return the copy's root."""
    tree = destination / "tree"
    tree.mkdir()
    ignored = shutil.ignore_patterns("__pycache__", "*.egg-info", ".hypothesis")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=ignored)
        else:
            shutil.copy2(source, tree / name)
    return tree


def git_apply(patch: Path, tree: Path, *, check: bool) -> subprocess.CompletedProcess[str]:
    """Apply `patch` to `tree` (or only check that it applies)."""
    command = ["git", "apply", "--check" if check else "--verbose", str(patch)]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)


def suite_environment(tree: Path) -> dict[str, str]:
    """Make the copy's src/ win over the editable install of the working tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), *filter(None, [env.get("PYTHONPATH")])])
    # The default profile's examples, derandomized and without shrinking (tests/conftest.py):
    # the same verdict every run, reached sooner.
    env["HYPOTHESIS_PROFILE"] = "mutation"
    return env


def imported_from(tree: Path) -> Path:
    """Return where `import ticket_tools` resolves to under the copy's environment."""
    probe = subprocess.run(
        [sys.executable, "-c", "import ticket_tools; print(ticket_tools.__file__)"],
        cwd=tree,
        env=suite_environment(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(probe.stdout.strip()).resolve()


def run_suite(tree: Path) -> tuple[int, str]:
    """Run the whole suite in `tree`, stopping at the first failure; return (status, evidence)."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            env=suite_environment(tree),
            capture_output=True,
            text=True,
            timeout=SUITE_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 1, f"the suite ran over {SUITE_TIMEOUT_SECONDS}s"
    lines = done.stdout.splitlines()
    # pytest's -ra summary lines; captured log lines also start with "ERROR", then a space.
    failed = [line for line in lines if line.startswith(("FAILED tests/", "ERROR tests/"))]
    evidence = failed[0] if failed else (lines[-1] if lines else done.stderr.strip()[-200:])
    return done.returncode, evidence


def try_mutant(patch: Path) -> Verdict:
    """Apply `patch` to a fresh copy of the tree and run the suite against it."""
    with tempfile.TemporaryDirectory(prefix="hand-mutant-") as scratch:
        tree = copy_tree(Path(scratch))
        applied = git_apply(patch, tree, check=False)
        if applied.returncode != 0:
            raise SystemExit(f"{patch.name} no longer applies:\n{applied.stderr}")
        started = time.perf_counter()
        status, evidence = run_suite(tree)
        seconds = time.perf_counter() - started
    if status not in (0, *REJECTED):
        raise SystemExit(f"{patch.name}: pytest stopped with status {status}: {evidence}")
    return Verdict(patch.name, status in REJECTED, seconds, evidence)


def check_baseline() -> None:
    """Fail loudly unless every patch applies and the unmutated copy passes the suite."""
    patches = sorted(PATCHES.glob("*.patch"))
    with tempfile.TemporaryDirectory(prefix="hand-mutant-") as scratch:
        tree = copy_tree(Path(scratch))
        stale = [patch for patch in patches if git_apply(patch, tree, check=True).returncode]
        if stale:
            names = ", ".join(patch.name for patch in stale)
            raise SystemExit(f"these patches no longer apply; regenerate them: {names}")
        source = imported_from(tree)
        if not source.is_relative_to(tree.resolve()):
            raise SystemExit(f"the suite would test {source}, not the copy under {tree}")
        status, evidence = run_suite(tree)
        if status != 0:
            raise SystemExit(f"the suite fails without any mutant: {evidence}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected mutants (all by default); return 0 only if every one was caught."""
    prefixes = tuple(sys.argv[1:] if argv is None else argv)
    patches = [
        patch
        for patch in sorted(PATCHES.glob("*.patch"))
        if not prefixes or patch.name.startswith(prefixes)
    ]
    if not patches:
        raise SystemExit("no patch matches")
    print(f"hand mutants: checking that {len(patches)} patches apply and the suite passes ...")
    check_baseline()
    verdicts = []
    for patch in patches:
        verdict = try_mutant(patch)
        verdicts.append(verdict)
        mark = "CAUGHT" if verdict.caught else "MISSED"
        print(f"{mark} {patch.stem} ({verdict.seconds:.0f}s): {describe(patch)}", flush=True)
        print(f"       {verdict.evidence}", flush=True)
    caught = sum(verdict.caught for verdict in verdicts)
    print(f"hand mutants: {caught} of {len(verdicts)} caught")
    return 0 if caught == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
