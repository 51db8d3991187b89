"""Print the brief's 13 acceptance calls, each with its result and PASS or FAIL: `make run`.

Python alone runs it (`PYTHONPATH=src python tests/brief/print_acceptance.py`); the expected
results are brief_table.py's, and each call goes through brief_calls.call as in the tests.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TextIO

from brief_calls import Records, call
from brief_table import ACCEPTANCE


def run(out: TextIO, records: Records | None = None) -> int:
    """Print each call, its result and a mark, then the counts; return how many failed."""
    failures = 0
    for row in ACCEPTANCE:
        result = call(row.name, row.args, row.context, records)
        passed = result == row.expected
        failures += not passed
        out.write(
            f"{'PASS' if passed else 'FAIL'} {row.label:<3} [{_session(row.context)}] "
            f"{row.name} {json.dumps(row.args)} -> {json.dumps(result)}\n"
        )
        if not passed:
            out.write(f"         expected {json.dumps(row.expected)}\n")
    out.write(f"{len(ACCEPTANCE) - failures} passed, {failures} failed\n")
    return failures


def _session(context: Mapping[str, object]) -> str:
    permission = "can read" if context["can_read_tickets"] else "cannot read"
    return f"{context['tenant']}, {permission}"


if __name__ == "__main__":
    sys.exit(1 if run(sys.stdout) else 0)
