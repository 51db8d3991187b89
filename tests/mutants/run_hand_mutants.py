"""Run the suite against each hand-written security mutant (`make mutate`).

Each tests/mutants/*.patch is one fault mutmut cannot make: its first paragraph says what
the fault is, the rest is a `git diff` against src/. For each patch, in name order, the
tree is copied to a temporary directory, the patch is applied there (never to the working
tree), and the suite runs against the copy: first the tests of the layer the patch touches
(tests/serve/ for src/ticket_tools/serve/, the root tests and tests/tools/ for the core),
then, only if those all pass, the whole suite. A patch that no longer applies stops the run
before any suite runs: regenerate it against the current source. Each set of tests is first
run once without any mutant and must pass, so a failure is the mutant's doing.

Prints CAUGHT (the suite failed: the tests have teeth) or MISSED per mutant, then the
score; the exit status is 0 only when every mutant was caught. A suite that runs past its
time limit stops the run: on a loaded machine that is no verdict.

    python tests/mutants/run_hand_mutants.py                 # every patch
    python tests/mutants/run_hand_mutants.py 05 12           # the patches whose names start so
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATCHES = Path(__file__).resolve().parent
# What a copy of the tree needs to run the suite: the source, the tests, the shared helpers,
# the config, and the sample records and the licence the CLI tests read; the documents and
# folders whose named paths tests/test_doc_paths.py checks (benchmarks/ for the one past path
# it expects absent), REVIEW.md and the hand-in's build script and templates.
COPIED = (
    "src",
    "tests",
    "testkit",
    "examples",
    "LICENSE",
    "pyproject.toml",
    "README.md",
    "REVIEW.md",
    "CHANGELOG.md",
    "docs",
    "benchmarks",
    "scripts",
    "handin",
    "review",
)
# A mutant that makes the suite hang stops the run rather than counting as caught: on a
# shared machine the suite alone can take many minutes, so a timeout proves nothing.
SUITE_TIMEOUT_SECONDS = 3600
# Mutants tried at once: each is one pytest process (`make mutate` runs mutmut with 2 too).
JOBS = 2
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


WHOLE_SUITE = ("tests",)


def first_tests(patch: Path) -> tuple[str, ...]:
    """Return the tests of the layer `patch` changes: the mirror of its source folder.

    "src/ticket_tools/serve/http.py" gives ("tests/serve",); a module of the core (the
    package root or tools/) gives the root test modules and tests/tools; anything else, or
    a patch over two layers, the whole suite.
    """
    layers = set()
    for line in patch.read_text("utf-8").splitlines():
        if line.startswith("+++ b/src/ticket_tools/"):
            folder = Path(line.removeprefix("+++ b/src/ticket_tools/")).parent
            layers.add("" if folder.parts in ((), ("tools",)) else folder.as_posix())
    if len(layers) != 1:
        return WHOLE_SUITE
    (layer,) = layers
    if not layer:
        root = sorted(path.relative_to(ROOT).as_posix() for path in ROOT.glob("tests/test_*.py"))
        return (*root, "tests/tools")
    mirrored = ROOT / "tests" / layer
    return (f"tests/{layer}",) if mirrored.is_dir() else WHOLE_SUITE


def mutated(tree: Path) -> bool:
    """Return whether a patch has been applied to `tree` (the marker `try_mutant` leaves)."""
    return (tree / ".hand-mutant").exists()


def run_suite(tree: Path, tests: Sequence[str] = WHOLE_SUITE) -> tuple[int, str]:
    """Run `tests` in `tree`, stopping at the first failure; return (status, evidence)."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    # In a mutant's copy its own patch is applied, so that test would fail for every mutant.
    command.append("--ignore=tests/test_hand_mutant_patches.py")
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
        raise SystemExit(f"the suite ran over {SUITE_TIMEOUT_SECONDS}s: no verdict") from None
    lines = done.stdout.splitlines()
    # pytest's -ra summary lines; captured log lines also start with "ERROR", then a space.
    failed = [line for line in lines if line.startswith(("FAILED tests/", "ERROR tests/"))]
    evidence = failed[0] if failed else (lines[-1] if lines else done.stderr.strip()[-200:])
    if done.returncode not in (0, *REJECTED) or not mutated(tree):
        # No mutant to blame: keep pytest's own reasons ("E ..." lines) for the reader.
        evidence = "\n".join([evidence, *(line for line in lines if line.startswith("E "))][:12])
    return done.returncode, evidence


def try_mutant(patch: Path) -> Verdict:
    """Apply `patch` to a fresh copy of the tree and run the suite against it."""
    with tempfile.TemporaryDirectory(prefix="hand-mutant-") as scratch:
        tree = copy_tree(Path(scratch))
        applied = git_apply(patch, tree, check=False)
        if applied.returncode != 0:
            raise SystemExit(f"{patch.name} no longer applies:\n{applied.stderr}")
        (tree / ".hand-mutant").write_text(patch.name, "utf-8")
        started = time.perf_counter()
        status, evidence = run_suite(tree, first_tests(patch))
        if status == 0 and first_tests(patch) != WHOLE_SUITE:
            check_whole_suite()
            status, evidence = run_suite(tree)
        seconds = time.perf_counter() - started
    if status not in (0, *REJECTED):
        raise SystemExit(f"{patch.name}: pytest stopped with status {status}: {evidence}")
    return Verdict(patch.name, status in REJECTED, seconds, evidence)


_whole_suite = threading.Lock()
_whole_suite_passed: list[bool] = []


def check_whole_suite() -> None:
    """Fail loudly unless the unmutated copy passes the whole suite (run once, when needed)."""
    with _whole_suite:
        if _whole_suite_passed:
            return
        with tempfile.TemporaryDirectory(prefix="hand-mutant-") as scratch:
            status, evidence = run_suite(copy_tree(Path(scratch)))
        if status != 0:
            raise SystemExit(f"the suite fails without any mutant: {evidence}")
        _whole_suite_passed.append(True)


def check_baseline(selected: Sequence[Path]) -> None:
    """Fail loudly unless every patch applies and the unmutated copy passes each set of tests.

    The sets are the first tests of each selected patch, each run on its own as the mutants
    will run them; the whole suite is checked so only if a mutant gets past its first tests.
    """
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
        test_sets = {first_tests(patch) for patch in selected} - {WHOLE_SUITE}
        with ThreadPoolExecutor(JOBS) as pool:
            results = list(pool.map(lambda tests: (tests, run_suite(tree, tests)), test_sets))
        for tests, (status, evidence) in results:
            if status != 0:
                named = " ".join(tests) if len(tests) < 3 else "the core's tests"
                raise SystemExit(f"{named} fail without any mutant:\n{evidence}")
    if WHOLE_SUITE in map(first_tests, selected):
        check_whole_suite()


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
    check_baseline(patches)
    verdicts = []
    with ThreadPoolExecutor(JOBS) as pool:
        # In name order as each finishes in turn: map yields the results in submission order.
        for patch, verdict in zip(patches, pool.map(try_mutant, patches), strict=True):
            verdicts.append(verdict)
            mark = "CAUGHT" if verdict.caught else "MISSED"
            print(f"{mark} {patch.stem} ({verdict.seconds:.0f}s): {describe(patch)}", flush=True)
            print(f"       {verdict.evidence}", flush=True)
    caught = sum(verdict.caught for verdict in verdicts)
    print(f"hand mutants: {caught} of {len(verdicts)} caught")
    return 0 if caught == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
