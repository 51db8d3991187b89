"""The soak phase of `make load`: 32 clients for `--soak-seconds`, each replica's RSS sampled.

The figure is each replica's resident memory growth from minute 1 (or halfway, in a soak
shorter than two minutes) to the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from load.stage import Phase, Stage

CLIENTS = 32
DEFAULT_SECONDS = 120.0
BASELINE_SECONDS = 60.0  # "growth from minute 1 to the end"


def run(stage: Stage, seconds: float) -> None:
    """Run the soak."""
    stage.phase("soak", CLIENTS, seconds, fault=soak_figures)


async def soak_figures(phase: Phase) -> None:
    """After the soak, each replica's RSS growth from minute 1 (or halfway) to the end."""
    await phase.ended.wait()
    long_enough = phase.seconds >= 2 * BASELINE_SECONDS
    baseline = BASELINE_SECONDS if long_enough else phase.seconds / 2
    phase.figures["rss"] = rss_growth(phase.rss, baseline)


def rss_growth(samples: Sequence[tuple[float, int, int]], baseline_at: float) -> dict[str, Any]:
    """Return each replica's RSS at the sample nearest `baseline_at` and at the end, and growth.

    Samples are (seconds into the phase, replica, KiB).
    """
    growth: dict[str, Any] = {}
    for replica in sorted({sample[1] for sample in samples}):
        own = [(at, kib) for at, number, kib in samples if number == replica]
        start = min(own, key=lambda sample: abs(sample[0] - baseline_at))
        end = own[-1]
        growth[f"replica-{replica}"] = {
            "baseline_at_s": round(start[0], 1),
            "baseline_mib": round(start[1] / 1024, 1),
            "end_at_s": round(end[0], 1),
            "end_mib": round(end[1] / 1024, 1),
            "growth_mib": round((end[1] - start[1]) / 1024, 1),
            "growth_percent": round((end[1] - start[1]) * 100 / start[1], 1),
        }
    return growth
