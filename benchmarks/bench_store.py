"""How page latency grows with the store: the dict path, SQLite, and the bare pass over keys.

Sizes 10^3..10^6 tickets over 1,000 tenants (1..1,000 tickets each). "first" is a page
with no cursor; "deep" uses the cursor that returns the tenant's last full page (the
same as the first page while a tenant holds no more than one page). Both paths go
through execute_tool.

Each target is a ratio, measured paired: every round times both sides of the ratio
back to back (in a rotating order), and the ratio is taken round by round. A burst of
load on a shared machine slows one round, both sides of it, rather than one column;
the median of the per-round ratios is judged, and p10..p90 shows their spread.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ticket_tools import execute_tool
from ticket_tools.stores.sqlite.store import SQLiteStore, write_database

SIZES = (10**3, 10**4, 10**5, 10**6)
TENANTS = 1_000
LIMIT = 5
# A timed run lasts at least this long, so that fast calls are timed over many loops.
MIN_RUN_SECONDS = 0.02
# Rounds per measurement: odd, so the median is one round's ratio. Each round times
# every call once, so the whole run stays bounded (about a minute on an idle machine).
ROUNDS = 21
# The targets, judged on the median of the paired per-round ratios.
DICT_TARGET = 1.5  # dict path / bare pass over the keys, at every size
SQLITE_TARGET = 2.0  # SQLite page latency at 10^6 / at 10^3
TITLES = (
    "Login fails after password reset",
    "Settings page shows wrong time zone",
    "CSV export times out",
    "Invoice PDF missing logo",
)
TENANT = f"t{TENANTS // 2:03d}"
CONTEXT = {"tenant": TENANT, "can_read_tickets": True}
FIRST: dict[str, object] = {"limit": LIMIT}
PAGES = ("first", "deep")


@dataclass(frozen=True)
class Spread:
    """The median of some per-round samples and their p10..p90 range."""

    median: float
    p10: float
    p90: float

    @classmethod
    def of(cls, samples: list[float]) -> Spread:
        """Summarise `samples` (at least two)."""
        deciles = statistics.quantiles(samples, n=10, method="inclusive")
        return cls(statistics.median(samples), deciles[0], deciles[-1])

    def ratio(self) -> str:
        """Format as a ratio, e.g. "1.08x (1.02..1.19)"."""
        return f"{self.median:.2f}x ({self.p10:.2f}..{self.p90:.2f})"


def _records(size: int) -> dict[str, dict[str, str]]:
    """`size` tickets, size/TENANTS per tenant, ids spread over TKT-000..TKT-999."""
    per_tenant = size // TENANTS
    records: dict[str, dict[str, str]] = {}
    # Insertion order interleaves tenants, as tickets arrive over time.
    for slot in range(per_tenant):
        ticket_id = f"TKT-{slot * 1000 // per_tenant:03d}"
        for tenant in range(TENANTS):
            records[f"t{tenant:03d}:{ticket_id}"] = {
                "id": ticket_id,
                "title": f"{TITLES[(slot + tenant) % len(TITLES)]} #{slot}",
                "status": "open" if (slot + tenant) % 3 else "closed",
                "internal_note": "not for the model",
            }
    return records


def _paired_rounds(calls: Mapping[str, Callable[[], object]]) -> dict[str, list[float]]:
    """Time every call once per round for ROUNDS rounds; return seconds per call, per round.

    Round r of every list was timed within the same round, so that a ratio of two
    calls can be taken round by round. The order rotates each round, so no call
    always runs right after the same other one.
    """
    loops = {name: _loops(call) for name, call in calls.items()}
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for round_number in range(ROUNDS):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            call = calls[name]
            start = time.perf_counter()
            for _ in range(loops[name]):
                call()
            seconds[name].append((time.perf_counter() - start) / loops[name])
    return seconds


def _loops(call: Callable[[], object]) -> int:
    """Return how many calls make one run last at least MIN_RUN_SECONDS."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            call()
        if time.perf_counter() - start >= MIN_RUN_SECONDS:
            return loops
        loops *= 10


def _per_round(top: list[float], bottom: list[float]) -> Spread:
    """Summarise the ratio top/bottom taken round by round."""
    return Spread.of([a / b for a, b in zip(top, bottom, strict=True)])


def _deep(records: dict[str, dict[str, str]]) -> dict[str, object]:
    """The arguments of the tenant's last full page (the first page if it has no more)."""
    prefix = f"{TENANT}:"
    ids = sorted(ticket["id"] for key, ticket in records.items() if key.startswith(prefix))
    return {"limit": LIMIT, "cursor": ids[-(LIMIT + 1)]} if len(ids) > LIMIT else FIRST


def _measure_dict(size: int, database: Path) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Time the dict path and the bare pass at `size`; write the same tickets to `database`."""
    records = _records(size)
    deep = _deep(records)
    prefix = f"{TENANT}:"
    seconds = _paired_rounds(
        {
            "dict first": lambda: execute_tool("search_tickets", FIRST, CONTEXT, records),
            "dict deep": lambda: execute_tool("search_tickets", deep, CONTEXT, records),
            "bare pass": lambda: sum(1 for key in records if key.startswith(prefix)),
        }
    )
    write_database(database, records)
    return seconds, deep


def _measure_sqlite(
    databases: Mapping[int, Path], deep: Mapping[int, dict[str, object]]
) -> dict[str, list[float]]:
    """Time the first and deep page of every size's database, all sizes in every round."""
    calls: dict[str, Callable[[], object]] = {}
    with ExitStack() as stack:
        for size, path in databases.items():
            store = stack.enter_context(SQLiteStore.open(path))
            if execute_tool("search_tickets", deep[size], CONTEXT, store)["ok"] is not True:
                raise RuntimeError("the benchmark's page call failed")
            calls[f"sqlite first {size}"] = _page_call(FIRST, store)
            calls[f"sqlite deep {size}"] = _page_call(deep[size], store)
        return _paired_rounds(calls)


def _page_call(args: dict[str, object], store: SQLiteStore) -> Callable[[], object]:
    return lambda: execute_tool("search_tickets", args, CONTEXT, store)


def main() -> None:
    """Print page latency, the paired per-round ratios, and whether each target was met."""
    dict_seconds: dict[int, dict[str, list[float]]] = {}
    deep: dict[int, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as folder:
        databases = {size: Path(folder) / f"tickets-{size}.sqlite" for size in SIZES}
        for size in SIZES:
            dict_seconds[size], deep[size] = _measure_dict(size, databases[size])
        sqlite_seconds = _measure_sqlite(databases, deep)
    smallest = SIZES[0]

    print(f"page latency, microseconds per call, median of {ROUNDS} rounds; limit {LIMIT}")
    columns = ("dict first", "dict deep", "bare pass", "sqlite first", "sqlite deep")
    header = f"{'tickets':>9} | {'per tenant':>10} | " + " | ".join(f"{c:>12}" for c in columns)
    print(header)
    print("-" * len(header))
    for size in SIZES:
        seconds = {
            **dict_seconds[size],
            "sqlite first": sqlite_seconds[f"sqlite first {size}"],
            "sqlite deep": sqlite_seconds[f"sqlite deep {size}"],
        }
        cells = " | ".join(f"{statistics.median(seconds[c]) * 1e6:>12.1f}" for c in columns)
        print(f"{size:>9,} | {size // TENANTS:>10,} | {cells}")

    print(f"\npaired ratios, per round: median (p10..p90) of {ROUNDS} rounds")
    labels = ("dict/bare first", "dict/bare deep", "sqlite first/10^3", "sqlite deep/10^3")
    header = f"{'tickets':>9} | " + " | ".join(f"{label:>20}" for label in labels)
    print(header)
    print("-" * len(header))
    dict_ratios: list[Spread] = []
    growth: dict[int, list[Spread]] = {}
    for size in SIZES:
        row = dict_seconds[size]
        to_bare = [_per_round(row[f"dict {page}"], row["bare pass"]) for page in PAGES]
        dict_ratios += to_bare
        growth[size] = [
            _per_round(
                sqlite_seconds[f"sqlite {page} {size}"], sqlite_seconds[f"sqlite {page} {smallest}"]
            )
            for page in PAGES
        ]
        shown = [spread.ratio() for spread in to_bare]
        shown += ["(the baseline)"] * 2 if size == smallest else [s.ratio() for s in growth[size]]
        cells = " | ".join(f"{cell:>20}" for cell in shown)
        print(f"{size:>9,} | {cells}")

    worst_dict = max(dict_ratios, key=lambda spread: spread.median)
    worst_growth = max(growth[SIZES[-1]], key=lambda spread: spread.median)
    print(
        f"\ntarget: dict path within {DICT_TARGET}x of the bare pass at every size: "
        f"worst median {worst_dict.ratio()}, "
        f"{'met' if worst_dict.median <= DICT_TARGET else 'NOT met'}"
    )
    print(
        f"target: SQLite page latency grows <= {SQLITE_TARGET:g}x from 10^3 to 10^6: "
        f"worst median {worst_growth.ratio()}, "
        f"{'met' if worst_growth.median <= SQLITE_TARGET else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
