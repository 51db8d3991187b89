"""A phase's calls checked and counted, the printed table, and build/load-report.json."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from load.checker import (
    INTERNAL_ERROR,
    UNAVAILABLE,
    Observation,
    Tally,
    Verdict,
    WalkCheck,
    check,
    check_walk,
    oracle_walk,
)
from load.client import Client
from load.records import tenant_records
from load.stats import Latency
from load.workload import Call, Walk


@dataclass(frozen=True)
class WalkTotals:
    """The page walks of a phase against the oracle's walks."""

    checked: int = 0
    complete: int = 0
    crossed: int = 0
    """Walks answered by two replicas (they went on after a switch)."""
    crossed_complete: int = 0
    skipped: int = 0
    repeated: int = 0
    out_of_order: int = 0


@dataclass(frozen=True)
class Usage:
    """CPU seconds spent during a phase, by whom."""

    replicas: float
    postgres: float
    generator: float
    """The load generator and checker process (checks run after the phase, not in it)."""
    machine_busy: float
    """Every process on the machine, other sessions' included."""
    machine_total: float
    """Wall seconds times cores."""


@dataclass
class PhaseResult:
    """One phase: its load, latency, correctness counts, CPU use and fault figures."""

    name: str
    clients: int
    seconds: float
    calls: int
    calls_per_second: float
    latency: Latency
    wrong: int
    cross_tenant: int
    errors: dict[str, int]
    codes: dict[str, int]
    walks: WalkTotals
    usage: Usage | None = None
    fault: dict[str, Any] = field(default_factory=dict)
    rss_kib: list[tuple[float, int, int]] = field(default_factory=list)
    """(seconds into the phase, replica, RSS in KiB) samples."""

    @property
    def store_reads(self) -> int:
        """Return the correct calls answered from the store (a ticket, a page, not_found)."""
        return self.codes.get("ok", 0) + self.codes.get("not_found", 0)

    @property
    def calls_per_replica_core_second(self) -> float | None:
        """Return calls served per CPU second the replicas used (None without usage)."""
        if self.usage is None or self.usage.replicas <= 0:
            return None
        return self.calls / self.usage.replicas


CallJudge = Callable[[Call, Observation], Verdict]
"""Say whether one call's answer was right."""
WalkJudge = Callable[[Walk], WalkCheck]
"""Say whether one page walk skipped, repeated or went out of order."""


def check_phase(
    name: str, clients: Sequence[Client], seconds: float, per_tenant: int
) -> PhaseResult:
    """Check every call and walk of a phase's clients against the records as imported."""

    def judges(client: Client) -> tuple[CallJudge, WalkJudge]:
        context = {"tenant": client.plan.tenant, "can_read_tickets": client.can_read}
        records = tenant_records(client.tenant_index, per_tenant)
        return (
            lambda call, seen: check(call, context, records, seen),
            lambda walk: check_walk(walk, oracle_walk(walk, context, records)),
        )

    return tally_phase(name, clients, seconds, judges)


def tally_phase(
    name: str,
    clients: Sequence[Client],
    seconds: float,
    judges: Callable[[Client], tuple[CallJudge, WalkJudge]],
) -> PhaseResult:
    """Judge every call and walk of a phase's clients with each client's judges; count them."""
    tally = Tally()
    latencies: list[float] = []
    walks = _Walks()
    for client in clients:
        judge_call, judge_walk = judges(client)
        for record in client.records:
            tally.add(judge_call(record.call, record.seen))
            if record.seen.failure is None:
                latencies.append(record.ended - record.started)
        for walk in client.plan.walks:
            if walk.refused or not (walk.pages or walk.done):
                continue
            walks.add(judge_walk(walk))
    return PhaseResult(
        name=name,
        clients=len(clients),
        seconds=seconds,
        calls=tally.calls,
        calls_per_second=tally.calls / seconds if seconds > 0 else 0.0,
        latency=Latency.of(latencies),
        wrong=tally.wrong,
        cross_tenant=tally.cross_tenant,
        errors=dict(sorted(tally.errors.items())),
        codes=dict(sorted(tally.codes.items())),
        walks=walks.totals(),
    )


class _Walks:
    def __init__(self) -> None:
        self.counts = dict.fromkeys(WalkTotals.__dataclass_fields__, 0)

    def add(self, walk: WalkCheck) -> None:
        counts = self.counts
        counts["checked"] += 1
        counts["complete"] += walk.complete
        counts["crossed"] += walk.replicas > 1
        counts["crossed_complete"] += walk.replicas > 1 and walk.complete
        counts["skipped"] += walk.skipped
        counts["repeated"] += walk.repeated
        counts["out_of_order"] += not walk.in_order

    def totals(self) -> WalkTotals:
        return WalkTotals(**self.counts)


def first_pages_ms(
    clients: Sequence[Client], since: float, *, any_answer: bool = False, sent_after: bool = False
) -> tuple[float | None, float | None]:
    """Return the ms from `since` to the first page or ticket served, and to the slowest client's.

    A success is a call that ended after `since` (with `sent_after`: that was sent after
    it) with an "ok": true result (with `any_answer`, any tool result at all). The second
    figure is None when some client never got one.
    """
    firsts: list[float] = []
    for client in clients:
        ended = [
            record.ended
            for record in client.records
            if (record.started if sent_after else record.ended) >= since
            and record.seen.result is not None
            and (any_answer or record.seen.result.get("ok") is True)
        ]
        if ended:
            firsts.append(min(ended))
    if not firsts:
        return None, None
    slowest = (max(firsts) - since) * 1000 if len(firsts) == len(clients) else None
    return (min(firsts) - since) * 1000, slowest


def problems(phases: Sequence[PhaseResult], leftovers: Sequence[int]) -> list[str]:
    """Return every way the run failed its targets (empty: all met)."""
    found: list[str] = []
    for phase in phases:
        if phase.wrong:
            found.append(f"{phase.name}: {phase.wrong} wrong results")
        if phase.cross_tenant:
            found.append(f"{phase.name}: {phase.cross_tenant} cross-tenant tickets")
        walks = phase.walks
        if walks.skipped or walks.repeated or walks.out_of_order:
            found.append(
                f"{phase.name}: page walks skipped {walks.skipped}, repeated {walks.repeated}, "
                f"out of order {walks.out_of_order}"
            )
        allowed = _allowed_errors(phase.name)
        unexpected = {kind: n for kind, n in phase.errors.items() if not allowed(kind)}
        if unexpected:
            found.append(f"{phase.name}: unexpected errors {unexpected}")
        if phase.fault.get("replicas_alive_after") is False:
            found.append(f"{phase.name}: a replica died that was not killed")
        if phase.fault.get("feed_as_expected") is False:
            found.append(f"{phase.name}: the feed's apply did not end as expected")
        found += _failover_problems(phase)
    if leftovers:
        found.append(f"processes left behind: {list(leftovers)}")
    return found


def _failover_problems(phase: PhaseResult) -> list[str]:
    """What the failover phase's figures must show (load/failover.py), when it ran."""
    fault = phase.fault
    found: list[str] = []
    if "end_state_as_oracle" not in fault:
        return found
    if fault["end_state_as_oracle"] is not True:
        found.append(f"{phase.name}: the end state differs from the oracle's")
    if fault.get("replay_as_expected") is not True:
        found.append(f"{phase.name}: the replay did not count every change once")
    for key in ("first_good_read_s", "all_clients_read_after_s", "first_good_write_s"):
        if fault.get(key) is None:
            found.append(f"{phase.name}: no {key.removesuffix('_s').replace('_', ' ')}")
    return found


def _allowed_errors(phase: str) -> Callable[[str], bool]:
    if phase == "replica-loss":
        return lambda kind: kind.startswith("transport:")
    if phase == "db-restart":
        return lambda kind: kind in (INTERNAL_ERROR, UNAVAILABLE)
    if phase == "failover":  # retryable only: the replicas themselves never go
        return lambda kind: kind == UNAVAILABLE
    return lambda kind: False


def render_table(phases: Sequence[PhaseResult]) -> str:
    """Return the phases as a plain-text table, one row each, then each fault's figures."""
    header = (
        f"{'phase':<13}{'clients':>8}{'secs':>6}{'calls':>8}{'calls/s':>9}{'p50 ms':>8}"
        f"{'p95 ms':>8}{'p99 ms':>8}{'wrong':>6}{'cross':>6}{'walks':>7}{'skip/rep':>9}"
        f"{'calls/core-s':>13}  errors"
    )
    lines = [header, "-" * len(header)]
    for p in phases:
        per_core = p.calls_per_replica_core_second
        errors = ", ".join(f"{kind} {n}" for kind, n in p.errors.items()) or "none"
        lines.append(
            f"{p.name:<13}{p.clients:>8}{p.seconds:>6.0f}{p.calls:>8}{p.calls_per_second:>9.1f}"
            f"{_ms(p.latency.p50)}{_ms(p.latency.p95)}{_ms(p.latency.p99)}"
            f"{p.wrong:>6}{p.cross_tenant:>6}{p.walks.checked:>7}"
            f"{f'{p.walks.skipped}/{p.walks.repeated}':>9}"
            f"{'-' if per_core is None else f'{per_core:.0f}':>13}  {errors}"
        )
    lines += ["", _cpu_header(), "-" * len(_cpu_header())]
    lines += [_cpu_row(p, p.usage) for p in phases if p.usage is not None]
    for p in phases:
        if p.fault:
            figures = ", ".join(f"{key} {_plain(value)}" for key, value in p.fault.items())
            lines.append(f"{p.name}: {figures}")
    return "\n".join(lines)


def _cpu_header() -> str:
    return (
        f"{'CPU per call':<13}{'replica ms':>11}{'pg ms/read':>11}{'client ms':>10}"
        f"{'this run %':>11}{'machine %':>10}"
    )


def _cpu_row(p: PhaseResult, usage: Usage) -> str:
    """CPU milliseconds per call by whom, and the share of the machine the run and all used."""
    ours = usage.replicas + usage.postgres + usage.generator
    total = usage.machine_total or 1.0
    return (
        f"{p.name:<13}{_per(usage.replicas, p.calls):>11}{_per(usage.postgres, p.store_reads):>11}"
        f"{_per(usage.generator, p.calls):>10}{ours * 100 / total:>11.0f}"
        f"{usage.machine_busy * 100 / total:>10.0f}"
    )


def _per(seconds: float, count: int) -> str:
    return "-" if count == 0 else f"{seconds * 1000 / count:.2f}"


def _ms(value: float | None) -> str:
    return f"{'-' if value is None else f'{value:.1f}':>8}"


def _plain(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return str(value)


def phase_json(phase: PhaseResult) -> dict[str, Any]:
    """Return a phase as JSON-ready data (the report file's "phases" entries)."""
    data = asdict(phase)
    data["calls_per_replica_core_second"] = phase.calls_per_replica_core_second
    data["store_reads"] = phase.store_reads
    data["rss_kib"] = [list(sample) for sample in phase.rss_kib]
    return data


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Write the whole report as indented JSON, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def median_or_none(values: Sequence[float]) -> float | None:
    """Return the median of `values`, or None if there are none."""
    return statistics.median(values) if values else None
