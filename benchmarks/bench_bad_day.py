"""One `serve http` replica on PostgreSQL on a bad day: `make load`'s bad-day phase, alone.

The phase itself (a noisy neighbour, slow bodies, the table locked, the database stopped,
one token's session flood and burst, SIGTERM during a stall) is `load/bad_day.py`; this
runs it on a throwaway cluster of its own, without the rest of `make load`:

    PYTHONPATH=. .venv/bin/python benchmarks/bench_bad_day.py [REPORT.json]

The table goes to stdout; docs/scale.md quotes a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from load.bad_day import run_alone


def main(argv: list[str] | None = None) -> int:
    """Run the bad-day phase alone; print its table; 0 if nothing went wrong."""
    args = sys.argv[1:] if argv is None else argv
    return run_alone(Path(args[0]) if args else None)


if __name__ == "__main__":
    sys.exit(main())
