"""The churn phase: `ticket-tools apply` writes a feed into the served store while clients walk.

The design makes the oracle exact. The churned keys are known before the phase: in each
tenant a client of the phase reads, every ticket whose number is CHURN_EVERY-th
(TKT-001, TKT-005, ...: `churned_numbers`). Each gets exactly one change, at version 1
(above import's 0): four in five an upsert to `after_ticket` (a new title that still names
its tenant, the status flipped), one in five a delete. The feed is shuffled and written to
a FIFO that `apply` reads, spread over the first FEED_SHARE of the phase. So at any moment a
churned key is in one of two known states, before or after, and every other ticket is as
imported. A call is then correct when:

- a search page (an "ok" answer): its ids strictly increase, all after the cursor; each
  ticket is exactly a state of its key that matches the filter (an unchurned key: its one
  state); every key that matches in all its states (every unchurned match, and a churned key
  matching both before and after) between the cursor and the page's last id is on the page,
  and past it too when next_cursor is null; a non-null next_cursor is the last id of a
  full page;
- any other call: exactly what `execute_tool` answers on the records before the feed, or on
  the records after it (a churned `get_ticket` sees one or the other; invalid calls the same).

A walk neither skips nor repeats: its ids strictly increase over all its pages, none twice,
and every key that matches in all its states from its start up to its last id (to the end
when it is complete) appears. A churned key whose two states do not both match may or may
not appear: it changed, at a moment the harness does not know, during the walk.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread

from load.checker import Observation, Verdict, WalkCheck, check
from load.client import Client
from load.records import tenant_name, tenant_records, ticket
from load.report import CallJudge, PhaseResult, WalkJudge, tally_phase
from load.stage import Phase, Stage
from load.workload import Call, Walk
from ticket_tools import Context, Records
from ticket_tools.filters import TicketFilter

CHURN_CLIENTS = 16
CHURN_SECONDS = 40.0
CHURN_EVERY = 4  # TKT-001, TKT-005, ... of each churned tenant change
DELETE_EVERY = 5  # one churned key in five is deleted, the rest upserted
FEED_SHARE = 0.75  # the feed is written over the first three quarters of the phase
DEFAULT_LIMIT = 5  # search_tickets' default page size
PUBLIC = ("id", "title", "status")
PublicTicket = dict[str, str]


def run(stage: Stage) -> None:
    """Run the churn phase: `apply` writes the feed into the served store while clients walk.

    After the others: it changes the store, which they check as imported.
    """
    feed = ChurnFeed(stage.writer_args, stage.per_tenant, str(stage.seed))
    stage.phase("churn", CHURN_CLIENTS, CHURN_SECONDS, fault=feed, check=check_phase)


def churned_numbers(per_tenant: int) -> range:
    """Return the ticket numbers that change in a churned tenant."""
    return range(1, per_tenant, CHURN_EVERY)


def after_ticket(tenant_index: int, number: int) -> dict[str, str] | None:
    """Return ticket `number` of a churned tenant after its change; None if it is deleted.

    >>> after_ticket(3, 1)["title"]
    'Churned ticket 1 [t003]'
    """
    if number not in churned_numbers(number + 1):
        raise ValueError(f"TKT-{number:03d} is not churned")
    if (number // CHURN_EVERY) % DELETE_EVERY == DELETE_EVERY - 1:
        return None
    before = ticket(tenant_index, number)
    flipped = "open" if before["status"] == "closed" else "closed"
    return {
        "id": f"TKT-{number:03d}",
        "title": f"Churned ticket {number} [{tenant_name(tenant_index)}]",
        "status": flipped,
    }


@lru_cache(maxsize=256)
def after_records(tenant_index: int, per_tenant: int) -> dict[str, dict[str, str]]:
    """Return one tenant's slice once every churned key has changed. Callers must not modify it."""
    records = dict(tenant_records(tenant_index, per_tenant))
    tenant = tenant_name(tenant_index)
    for number in churned_numbers(per_tenant):
        key = f"{tenant}:TKT-{number:03d}"
        changed = after_ticket(tenant_index, number)
        if changed is None:
            del records[key]
        else:
            records[key] = changed
    return records


def feed_lines(tenant_indexes: Sequence[int], per_tenant: int, seed: str) -> list[bytes]:
    """Return the churn feed for `tenant_indexes`: one change per churned key, shuffled."""
    lines = []
    for tenant_index in sorted(set(tenant_indexes)):
        tenant = tenant_name(tenant_index)
        for number in churned_numbers(per_tenant):
            ticket_id = f"TKT-{number:03d}"
            key = f"{tenant}:{ticket_id}"
            changed = after_ticket(tenant_index, number)
            line: dict[str, object] = {"op": "delete", "key": key, "version": 1}
            if changed is not None:
                line = {"op": "upsert", "key": key, "version": 1, "ticket": changed}
            lines.append(json.dumps(line).encode() + b"\n")
    random.Random(seed).shuffle(lines)  # noqa: S311 - a workload, not a secret
    return lines


def expected_summary(lines: Sequence[bytes]) -> str:
    """Return the counts `apply` must print for a churn feed applied once to the imported store."""
    deleted = sum(1 for line in lines if line.startswith(b'{"op": "delete"'))
    return f"{len(lines) - deleted} upserted, {deleted} deleted, 0 stale"


@dataclass
class Oracle:
    """One tenant's two states: as imported, and after the churn feed."""

    context: Context
    before: Records
    after: Records
    _tables: dict[tuple[object, object], dict[str, tuple[list[PublicTicket], bool]]] = field(
        default_factory=dict
    )

    def matching(self, filters: dict[str, object]) -> dict[str, tuple[list[PublicTicket], bool]]:
        """Return, by id in order, the states that match `filters` and whether every state does.

        An id none of whose states matches is left out. By the library's own rule
        (`TicketFilter.matches`); a churned key deleted afterwards has one state only, so it
        is never required.
        """
        marker = (filters.get("status"), filters.get("query"))
        table = self._tables.get(marker)
        if table is None:
            where = TicketFilter(status=_text(marker[0]), text=_text(marker[1]))
            tenant = f"{self.context['tenant']}:"
            table = {}
            for key in sorted({*self.before, *self.after}):
                states = [
                    cast(PublicTicket, {name: records[key][name] for name in PUBLIC})
                    for records in (self.before, self.after)
                    if key in records
                ]
                if len(states) == 2 and states[0] == states[1]:
                    states = states[:1]
                hits = [state for state in states if where.matches(state)]
                churned = self.before.get(key) != self.after.get(key)
                every = bool(hits) and len(hits) == len(states) and (not churned or len(hits) == 2)
                if hits:
                    table[key.removeprefix(tenant)] = (hits, every)
            self._tables[marker] = table
        return table

    def required(self, filters: dict[str, object], after: str | None, upto: str | None) -> set[str]:
        """Return the ids after `after` and up to `upto` (None: the end) that must appear."""
        return {
            ticket_id
            for ticket_id, (_, every) in self.matching(filters).items()
            if every
            and (after is None or ticket_id > after)
            and (upto is None or ticket_id <= upto)
        }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def check_page(call: Call, result: dict[str, Any], oracle: Oracle) -> bool:
    """Return whether an "ok" search page is one the store may answer during the churn."""
    tickets = result.get("tickets")
    if set(result) != {"ok", "tickets", "next_cursor"} or not isinstance(tickets, list):
        return False
    filters = {name: value for name, value in call.args.items() if name in ("status", "query")}
    after = _text(call.args.get("cursor"))
    limit = call.args.get("limit", DEFAULT_LIMIT)
    table = oracle.matching(filters)
    ids: list[str] = []
    for shown in tickets:
        ticket_id = shown.get("id") if isinstance(shown, dict) else None
        if not isinstance(ticket_id, str) or shown not in table.get(ticket_id, ([], False))[0]:
            return False  # not a state of its key that matches the filter
        ids.append(ticket_id)
    if ids != sorted(set(ids)) or (after is not None and ids and ids[0] <= after):
        return False
    if not isinstance(limit, int) or len(ids) > limit:
        return False
    next_cursor = result["next_cursor"]
    if next_cursor is not None and (len(ids) != limit or next_cursor != ids[-1]):
        return False
    upto = None if next_cursor is None else ids[-1]
    return oracle.required(filters, after, upto) <= set(ids)


def check_call(call: Call, oracle: Oracle, seen: Observation) -> Verdict:
    """Return the verdict of one call of the churn phase.

    Exactly the answer on the records before the feed or after it; else, for an "ok"
    search page, a page `check_page` accepts, sent as the adapter sends a page.
    """
    verdict = check(call, oracle.context, oracle.before, seen)
    if verdict.outcome != "wrong":
        return verdict
    verdict = check(call, oracle.context, oracle.after, seen)
    result = seen.result
    if verdict.outcome != "wrong" or call.name != "search_tickets" or result is None:
        return verdict
    right = (
        result.get("ok") is True
        and seen.protocol_code is None
        and not seen.is_error
        and seen.text == json.dumps(result, ensure_ascii=False)
        and check_page(call, result, oracle)
    )
    return Verdict("correct" if right else "wrong", None, verdict.cross_tenant, True, "ok")


def check_walk(walk: Walk, oracle: Oracle) -> WalkCheck:
    """Compare a walk's ids with the keys that had to appear, from its start to its last id."""
    seen = [ticket_id for page in walk.pages for ticket_id in page]
    if walk.done:
        required = oracle.required(walk.filters, walk.start, None)
    elif seen:
        required = oracle.required(walk.filters, walk.start, max(seen))
    else:
        required = set()
    received = set(seen)
    return WalkCheck(
        seen=len(seen),
        skipped=len(required - received),
        repeated=len(seen) - len(received),
        in_order=all(a < b for a, b in itertools.pairwise(seen)),
        complete=walk.done,
        replicas=len(walk.replicas),
    )


def check_phase(
    name: str, clients: Sequence[Client], seconds: float, per_tenant: int
) -> PhaseResult:
    """Check the churn phase's calls and walks against the two states of each tenant."""

    def judges(client: Client) -> tuple[CallJudge, WalkJudge]:
        context: Context = {"tenant": client.plan.tenant, "can_read_tickets": client.can_read}
        oracle = Oracle(
            context,
            tenant_records(client.tenant_index, per_tenant),
            after_records(client.tenant_index, per_tenant),
        )
        return (
            lambda call, seen: check_call(call, oracle, seen),
            lambda walk: check_walk(walk, oracle),
        )

    return tally_phase(name, clients, seconds, judges)


class ChurnFeed:
    """The phase's fault: `ticket-tools apply FIFO` on the served store, fed during the phase."""

    def __init__(self, writer_args: Sequence[str], per_tenant: int, seed: str) -> None:
        self._writer_args = list(writer_args)
        self._per_tenant = per_tenant
        self._seed = seed

    async def __call__(self, phase: Phase) -> None:
        """Start apply, write the feed over FEED_SHARE of the phase, wait for apply's summary."""
        supervisor = phase.supervisor
        lines = feed_lines([c.tenant_index for c in phase.clients], self._per_tenant, self._seed)
        fifo = supervisor.folder / "churn.fifo"
        os.mkfifo(fifo)
        log = supervisor.folder / "churn-apply.log"
        args = [sys.executable, "-m", "ticket_tools.cli", "apply", str(fifo), *self._writer_args]
        process = supervisor.start(args, log=log)
        started = time.monotonic()
        spread = phase.seconds * FEED_SHARE
        await anyio.to_thread.run_sync(write_paced, fifo, lines, spread, abandon_on_cancel=True)
        written = time.monotonic() - started
        status = await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
        summary = log.read_text().strip().splitlines()[-1:] or [""]
        expected = expected_summary(lines)
        phase.figures |= {
            "churned_keys": len(lines),
            "feed_written_s": round(written, 1),
            "apply_status": status,
            "apply_summary": summary[0],
            "feed_as_expected": status == 0 and summary[0].endswith(": " + expected),
        }


def write_paced(
    fifo: Path, lines: Sequence[bytes], seconds: float, stop: threading.Event | None = None
) -> int:
    """Write `lines` to `fifo` evenly over `seconds`, then close it (apply then ends).

    Return how many lines were written: all of them, unless `stop` was set or the reader
    went away (its `apply` exited) first.
    """
    stop = threading.Event() if stop is None else stop
    written = 0
    try:
        with fifo.open("wb") as out:
            started = time.monotonic()
            for sent, chunk in _chunks(lines, max(1, len(lines) // max(1, int(seconds * 20)))):
                if stop.is_set():
                    break
                out.write(b"".join(chunk))
                out.flush()
                written = sent
                stop.wait(max(0.0, started + seconds * sent / len(lines) - time.monotonic()))
    except BrokenPipeError:
        pass  # the reader is gone: what it read is what was written
    return written


def _chunks(lines: Sequence[bytes], size: int) -> Iterator[tuple[int, Sequence[bytes]]]:
    for start in range(0, len(lines), size):
        chunk = lines[start : start + size]
        yield start + len(chunk), chunk
