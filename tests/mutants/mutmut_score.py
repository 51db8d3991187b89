"""Print mutmut's score and check that every surviving mutant is explained (`make mutate`).

Run after `mutmut run` and `mutmut export-cicd-stats`, from the project root. A mutant the
suite did not kill (survived, or no test reaches it) must be named in docs/mutation.md
with the reason it is equivalent; the exit status is 1 when one is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATS = ROOT / "mutants" / "mutmut-cicd-stats.json"
EXPLAINED = ROOT / "docs" / "mutation.md"
# mutmut's words for a mutant the suite let through.
NOT_KILLED = ("survived", "no tests")


def survivors() -> list[str]:
    """Return the names of the mutants the suite did not kill, as `mutmut results` lists them."""
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "mutmut"), "results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    names = []
    for line in listed.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if status in NOT_KILLED:
            names.append(name)
    return names


def main() -> int:
    """Print the score and the unexplained survivors; return 1 if there are any."""
    stats = json.loads(STATS.read_text("utf-8"))
    tested = stats["total"] - stats["skipped"]
    killed = stats["killed"] + stats["timeout"]
    print(
        f"mutmut: {killed} of {tested} mutants killed ({100 * killed / tested:.1f}%); "
        f"survived {stats['survived']}, no tests {stats['no_tests']}, "
        f"suspicious {stats['suspicious']}, not checked {stats['total'] - sum_checked(stats)}"
    )
    explained = EXPLAINED.read_text("utf-8") if EXPLAINED.exists() else ""
    unexplained = [name for name in survivors() if f"`{name}`" not in explained]
    for name in unexplained:
        print(f"UNEXPLAINED {name}  (mutmut show {name})")
    if unexplained:
        print(f"mutmut: {len(unexplained)} surviving mutants are not explained in {EXPLAINED}")
        return 1
    print(f"mutmut: every surviving mutant is explained in {EXPLAINED.relative_to(ROOT)}")
    return 0


def sum_checked(stats: dict[str, int]) -> int:
    """Return how many mutants got a verdict of any kind."""
    verdicts = ("killed", "survived", "no_tests", "skipped", "suspicious", "timeout", "segfault")
    return sum(stats[name] for name in verdicts) + stats["check_was_interrupted_by_user"]


if __name__ == "__main__":
    sys.exit(main())
