"""How a batch of writes changes the title index: the containers and counts to edit, once.

A writer knows, per key it wrote, the title and status stored before and after (None: no
ticket). Only the grams one has and the other has not change (`grams.ticket_grams`): its
offset joins or leaves that gram's container in the ticket's bucket, and the gram's
count moves by one. A status changed alone is two edits; a title kept alone, none. Both
SQL writers turn these edits into statements; the index stays exactly what a build from
the tickets would make (tested), so no garbage piles up and no rebuild is ever due.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from ticket_tools.stores.feed import Change, Key
from ticket_tools.stores.grams import (
    BUCKET_BITS,
    BUCKET_SIZE,
    decode,
    encode,
    id_number,
    ticket_grams,
)

# A tenant gets an index once it holds this many tickets: below it a scan of the whole
# tenant costs about what the index's reads would, and a feed over many small tenants
# (the brief's IDs hold 1,000 a tenant at most) pays nothing for an index it never needs.
# A tenant keeps its index while it shrinks; a rebuild (import --replace) decides afresh.
INDEX_MIN_TICKETS = 1024


class Indexed(NamedTuple):
    """What the index holds of a ticket: its title and its status."""

    title: str
    status: str


class TicketChange(NamedTuple):
    """A key a batch wrote: its ticket before and after (None where there is none)."""

    tenant: str
    id: str
    old: Indexed | None
    new: Indexed | None


ContainerKey = tuple[str, str, int]
"""(tenant, gram, bucket): one container of the index."""


@dataclass
class ContainerEdit:
    """The offsets a batch adds to and removes from one container."""

    added: set[int] = field(default_factory=set)
    removed: set[int] = field(default_factory=set)

    def applied(self, container: bytes | None) -> bytes:
        """Return the container after the edit (b"": it holds nothing, and goes).

        Each offset is put in or taken out at its place (a memmove, in C), so a full
        container costs about what a copy of it does, whatever few offsets change.
        """
        offsets = decode(container or b"")
        for offset in self.removed:
            at = bisect.bisect_left(offsets, offset)
            if at < len(offsets) and offsets[at] == offset:
                del offsets[at]
        for offset in sorted(self.added):
            at = bisect.bisect_left(offsets, offset)
            if at == len(offsets) or offsets[at] != offset:
                offsets.insert(at, offset)
        return encode(offsets)


@dataclass
class IndexEdits:
    """Everything a batch changes in the index: per container, and per gram's count."""

    containers: dict[ContainerKey, ContainerEdit] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, change: TicketChange) -> None:
        """Take one key's change."""
        if change.old == change.new:
            return
        before = set() if change.old is None else ticket_grams(*change.old)
        after = set() if change.new is None else ticket_grams(*change.new)
        number = id_number(change.id)
        bucket, offset = number >> BUCKET_BITS, number & (BUCKET_SIZE - 1)
        tenant, containers, counts = change.tenant, self.containers, self.counts
        for grams, sign in ((after - before, 1), (before - after, -1)):
            for gram in grams:
                edit = containers.get((tenant, gram, bucket))
                if edit is None:
                    edit = containers[(tenant, gram, bucket)] = ContainerEdit()
                (edit.added if sign > 0 else edit.removed).add(offset)
                counts[(tenant, gram)] = counts.get((tenant, gram), 0) + sign


def index_edits(changes: Iterable[TicketChange]) -> IndexEdits:
    """Return the edits of a batch's changes (each key once)."""
    edits = IndexEdits()
    for change in changes:
        edits.add(change)
    return edits


def ticket_changes(
    winners: Iterable[Change], titles: dict[Key, Indexed], indexed: Collection[str]
) -> list[TicketChange]:
    """Return the winners of `indexed` tenants, each with its ticket before and after.

    `titles`: the stored ticket of each key that has one (of the indexed tenants).
    """
    return [
        TicketChange(
            change.tenant,
            change.id,
            titles.get(change.key),
            Indexed(change.title, change.status) if change.op == "upsert" else None,
        )
        for change in winners
        if change.tenant in indexed
    ]


def size_steps(winners: Iterable[Change], alive: Collection[Key]) -> dict[str, int]:
    """Return, per tenant whose size the winners change, the tickets made less those removed.

    `alive`: the keys stored as tickets before the batch.
    """
    steps: dict[str, int] = {}
    for change in winners:
        step = (change.op == "upsert") - (change.key in alive)
        if step:
            steps[change.tenant] = steps.get(change.tenant, 0) + step
    return steps
