"""The scale phases of `make load`: a warm-up, then 1, 8, 32 and 64 concurrent clients.

No fault: each phase is its clients alone for `--phase-seconds`, checked against the
records as imported; the warm-up (connections, caches) is run and not kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from load.stage import Stage

CLIENT_COUNTS = (1, 8, 32, 64)  # 1: the latency floor; 8, 32, 64: the loads
DEFAULT_PHASE_SECONDS = 20.0
WARMUP_SECONDS = 5.0
WARMUP_CLIENTS = 8


def run(stage: Stage, counts: Sequence[int], seconds: float) -> None:
    """Warm up, then one phase of `seconds` per client count."""
    stage.phase("warm-up", WARMUP_CLIENTS, WARMUP_SECONDS, keep=False)
    for count in counts:
        stage.phase(f"load-{count}", count, seconds)


def seconds(counts: Sequence[int], phase_seconds: float) -> list[float]:
    """Return the lengths of the phases `run` runs (for the run's budget)."""
    return [WARMUP_SECONDS] + [phase_seconds] * len(counts)
