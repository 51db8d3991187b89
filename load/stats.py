"""Latency percentiles, by the nearest-rank rule (no interpolation: every figure was measured)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank `q`-th percentile of an ascending sequence; None if empty.

    [10, 20, 30, 40] -> p50 is 20 (rank ceil(0.5 * 4) = 2), p95 is 40 (rank 4).
    """
    if not 0 < q <= 100:
        raise ValueError("q must be in (0, 100]")
    if not ordered:
        return None
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Latency:
    """Percentiles of a set of call latencies, in milliseconds."""

    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        """Summarise latencies given in seconds."""
        ordered = sorted(s * 1000 for s in seconds)
        return cls(
            p50=percentile(ordered, 50),
            p95=percentile(ordered, 95),
            p99=percentile(ordered, 99),
            max=ordered[-1] if ordered else None,
        )


def ms(times: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank q-th percentile of `times` (seconds) in milliseconds."""
    value = percentile(sorted(times), q)
    return None if value is None else round(value * 1000, 1)


def ratio(after: float | None, before: float | None) -> float | None:
    """Return after / before, or None when either is missing."""
    if after is None or not before:
        return None
    return round(after / before, 2)
