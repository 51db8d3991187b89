"""A search through the title index: the plan both SQL stores follow, written once.

The query's terms (`grams.query_terms`, and the status's gram if a status is given) are
looked up: their counts, and (PostgreSQL) every container of those few tickets have. A
term no ticket has: nothing matches. If the rarest term is common enough that a page is
in the first rows, the tenant is read in id order from the cursor, SCAN_ROWS_PER_TICKET
times `limit` rows, as the plain scan always did: a word in a quarter of the titles, or
the common status, is found at once. Otherwise (or from the last row that read), the
rarest term's containers name the buckets worth reading; in each, its offsets are kept
where the next rarest terms have them too, and each candidate, in id order, is read and
accepted by the contract's rules or not. The scan costs a constant before the index; the
index costs at most a few reads per bucket where the rarest term appears, and reads no
ticket the terms rule out: so neither plan loses to the other by more than a constant
factor. A tenant without an index (fewer tickets than a store indexes) is scanned by the
store's own filtered statement, as before.

Worked example, limit 3 (the tool asks for limit + 1 = 4), query "kerberos", a tenant of
10^6 tickets with "kerberos" in TKT-0001234 and TKT-0770001:

    counts: "ker" 30211, "erb" 8120, "rbe" 2, "ber" 90120, ... -> rarest "rbe": not common
    containers of "rbe" from bucket 0: buckets 0 and 187; of "erb", "ker" there too
    bucket 0: offsets {1234} & "erb" & "ker" -> candidate TKT-0001234
    bucket 187: offset 4049 -> candidate TKT-0770001 (187 * 4096 + 4049)
    read both, the rule accepts both: [TKT-0001234, TKT-0770001]

The store holds the reads in one snapshot (a transaction), so a page is consistent.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ticket_tools.filters import TicketFilter, title_contains
from ticket_tools.stores.grams import (
    BUCKET_BITS,
    BUCKET_SIZE,
    Term,
    decode,
    first_number_after,
    id_number,
    query_terms,
    status_gram,
)
from ticket_tools.stores.ids import ID_PREFIX, MAX_ID_DIGITS
from ticket_tools.tickets import Ticket

# Rows read in id order, per ticket asked for, before the index is consulted, when the
# rarest term is common enough to be found in them.
SCAN_ROWS_PER_TICKET = 8
# And at least this many, so a page of one still gives the scan its chance.
MIN_SCAN_ROWS = 32
# No tenant holds more tickets (an id has at most MAX_ID_DIGITS digits): a larger limit
# is every match, read as None, so the scan's rows stay within a LIMIT either database takes.
MAX_TENANT_TICKETS = 10**MAX_ID_DIGITS
# A store may read, with the look, every container of each term this few tickets have
# (PostgreSQL does, in its first round trip): a rare word's candidates are then known
# without a round trip more, and the next one reads their tickets.
PROBE_TICKETS = 64
# How many of the rarest terms are intersected in a bucket; the rule checks the rest.
INTERSECT_TERMS = 3
# Buckets of the rarest term read at first: as many as its count says hold the tickets
# wanted, within these bounds; then four times as many each time.
MAX_FIRST_BUCKETS = 64
BUCKETS_GROWTH = 4
# Candidates read per statement: the tickets still wanted at first (the rarest terms
# mostly name only titles that match), doubling up to MAX_CHECKED; every candidate left
# when `limit` is None.
MAX_CHECKED = 512
# An other term's offsets are bisected, not made a set, where they number more than this
# many times the driver's offsets that probe them (a set costs about a bisection per 16).
BISECT_RATIO = 16


@dataclass(frozen=True)
class Look:
    """What the index says of a tenant and a query."""

    indexed: bool
    """Whether the tenant has an index (a tenant with few tickets has none)."""
    tickets: int = 0
    """How many tickets the tenant holds (0 if not indexed)."""
    counts: tuple[int, ...] = ()
    """Per term, how many of the tenant's tickets have each gram of it, summed (empty if not
    indexed): the rarest term has the lowest."""
    small: Mapping[Term, Sequence[tuple[int, bytes]]] | None = None
    """Every (bucket, container) of each term at most PROBE_TICKETS tickets have, where the
    store read them with the look (PostgreSQL, in its round trip); None where it did not."""


Row = Sequence[object]
"""A ticket as a store reads it: (id, title, status), made a Ticket (`IndexSession.ticket`)
only when it is returned."""


@dataclass(frozen=True)
class Start:
    """The first reads of a search: the index's look, and the scan's rows when wanted."""

    look: Look
    rows: Callable[[], Iterable[Row]]
    """Up to the scan's row count of the tenant's tickets after the cursor, by id."""


@dataclass(frozen=True)
class Bucket:
    """One bucket where the rarest term has a gram: its containers and the other terms'."""

    bucket: int
    driver: Sequence[bytes]
    """The rarest term's containers in this bucket (one per gram of the term)."""
    others: Sequence[Sequence[bytes]]
    """Each other term's containers in this bucket, in the order asked (empty: none)."""


class IndexSession(Protocol):
    """One search's reads of one tenant, in one snapshot: what a store provides the plan."""

    width: int
    """How many digits every ticket id of the store has."""

    def start(self, after: str | None, rows: int, terms: Sequence[Term]) -> Start:
        """Look the terms up; read, if wanted, up to `rows` tickets after `after` (any status).

        A store may read the small terms' containers too (`Look.small`).
        """

    def filtered_scan(
        self, status: str | None, text: str | None, after: str | None, limit: int | None
    ) -> list[Ticket]:
        """Return the first `limit` tickets after `after` that match, by id: a plain scan."""

    def buckets(self, driver: Term, others: Sequence[Term], first: int, count: int) -> list[Bucket]:
        """Return the first `count` buckets from `first` on where `driver` has a gram."""

    def tickets(self, ids: Sequence[str], status: str | None) -> Sequence[Row]:
        """Return the tickets with these ids (ascending) and `status`, by id."""

    def ticket(self, row: Row) -> Ticket:
        """Return a row as the ticket a search returns (raises StoreFailure for a bad row)."""


def find_with_index(session: IndexSession, where: TicketFilter, limit: int | None) -> list[Ticket]:
    """Return the first `limit` (None: all) tickets matching `where`: a text, a status, or both.

    The status is one term more (`grams.status_gram`), read as the text's are.
    """
    text, status = where.text, where.status
    if text is None and status is None:
        raise ValueError("find_with_index needs a text or a status")
    if limit is not None and limit > MAX_TENANT_TICKETS:
        limit = None
    terms = query_terms(text) if text is not None else ()
    if status is not None:
        terms = (*terms, Term(status_gram(status), status_gram(status)))
    rows = MIN_SCAN_ROWS if limit is None else max(MIN_SCAN_ROWS, SCAN_ROWS_PER_TICKET * limit)
    start = session.start(where.after, rows, terms)
    look = start.look
    if not (look.indexed and terms):
        return session.filtered_scan(status, text, where.after, limit)
    ranked = sorted(range(len(terms)), key=look.counts.__getitem__)
    rarest = look.counts[ranked[0]]
    if rarest == 0:
        return []
    found: list[Ticket] = []
    if limit is not None and rarest * rows >= limit * look.tickets:
        # Common enough to be found in the first rows: read them (every status: the read
        # is bounded by the rows, not by the matches), as the plain scan always did.
        found, lowest = _scan(session, start.rows(), rows, text=text, status=status, limit=limit)
    else:
        lowest = first_number_after(where.after, session.width)
    if lowest is None:
        return found
    wanted = None if limit is None else limit - len(found)
    driver, others = terms[ranked[0]], [terms[index] for index in ranked[1:INTERSECT_TERMS]]
    if look.small is not None and driver in look.small:
        candidates = _local(look.small, driver, others, lowest, session.width)
    else:
        # The buckets the wanted tickets fill, if the rarest term's are spread evenly.
        spread = look.tickets if wanted is None else wanted * look.tickets
        buckets = min(MAX_FIRST_BUCKETS, spread // (rarest * BUCKET_SIZE) + 1)
        candidates = _candidates(session, driver, others, lowest, buckets)
    return found + _checked(session, candidates, status, text, wanted)


def _scan(
    session: IndexSession,
    taken: Iterable[Row],
    rows: int,
    *,
    text: str | None,
    status: str | None,
    limit: int,
) -> tuple[list[Ticket], int | None]:
    """Keep the matches of the first `rows` rows; return them and the number to go on from.

    None: nothing more to read (`limit` found, or the tenant's last ticket read).
    """
    found: list[Ticket] = []
    read, last = 0, None
    for row in taken:
        read, last = read + 1, row[0]
        if _accepts(row, text, status):
            found.append(session.ticket(row))
            if len(found) == limit:
                return found, None
    if read < rows or type(last) is not str:  # the scan reached the tenant's last ticket
        return found, None
    return found, id_number(last) + 1


def _accepts(row: Row, text: str | None, status: str | None = None) -> bool:
    """Apply the contract's rules to a row (a title or status that is not text matches nothing)."""
    title = row[1]
    if status is not None and row[2] != status:
        return False
    return text is None or (type(title) is str and title_contains(title, text))


def _candidates(
    session: IndexSession, driver: Term, others: list[Term], lowest: int, count: int
) -> Iterator[str]:
    """Yield, ascending, the ids from number `lowest` on with a gram of every term given.

    The driver's buckets are read `count` at a time at first, then more each time.
    """
    width = session.width
    first = lowest >> BUCKET_BITS
    while True:
        buckets = session.buckets(driver, others, first, count)
        for found in buckets:
            base = found.bucket << BUCKET_BITS
            for offset in _intersection(found, lowest - base):
                yield f"{ID_PREFIX}{base + offset:0{width}d}"
        if len(buckets) < count:
            return
        first = buckets[-1].bucket + 1
        count *= BUCKETS_GROWTH


def _local(
    small: Mapping[Term, Sequence[tuple[int, bytes]]],
    driver: Term,
    others: list[Term],
    lowest: int,
    width: int,
) -> Iterator[str]:
    """Yield the candidates of a driver whose every container the look read, ascending.

    Intersected with the other terms whose containers it read too (the rule checks the rest).
    """
    held = [term for term in others if term in small]
    by_bucket = [_by_bucket(small[term]) for term in (driver, *held)]
    for number in sorted(by_bucket[0]):
        found = Bucket(
            number, by_bucket[0][number], [term.get(number, []) for term in by_bucket[1:]]
        )
        base = number << BUCKET_BITS
        for offset in _intersection(found, lowest - base):
            yield f"{ID_PREFIX}{base + offset:0{width}d}"


def _by_bucket(containers: Sequence[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    grouped: dict[int, list[bytes]] = {}
    for bucket, container in containers:
        grouped.setdefault(bucket, []).append(container)
    return grouped


def _intersection(bucket: Bucket, lowest: int) -> Iterator[int]:
    """Yield the offsets from `lowest` on in the driver's containers and every other term's."""
    if not all(bucket.others):
        return
    driver = _union(bucket.driver)
    chosen = driver[bisect.bisect_left(driver, lowest) :]
    others = [_members(term, len(chosen)) for term in bucket.others]
    for offset in chosen:
        if all(offset in members for members in others):
            yield offset


class _Sorted:
    """A term's offsets in a bucket, as its sorted containers: `in` is a bisection in each."""

    __slots__ = ("_containers",)

    def __init__(self, containers: list[array[int]]) -> None:
        self._containers = containers

    def __contains__(self, offset: int) -> bool:
        for offsets in self._containers:
            at = bisect.bisect_left(offsets, offset)
            if at < len(offsets) and offsets[at] == offset:
                return True
        return False


def _members(containers: Sequence[bytes], probes: int) -> _Sorted | set[int]:
    """Return a term's offsets in a bucket, for `probes` lookups: a set, or bisections.

    A rare driver (the rare status) beside a common term probes a few of its thousands of
    offsets: bisecting is cheaper then than making them a set (which cost 14x the plain
    page on SQLite for the rare status and a common word).
    """
    decoded = [decode(container) for container in containers]
    if probes * BISECT_RATIO < sum(map(len, decoded)):
        return _Sorted(decoded)
    return set().union(*decoded)


def _union(containers: Sequence[bytes]) -> Sequence[int]:
    if len(containers) == 1:
        return decode(containers[0])
    return sorted(set().union(*map(decode, containers)))


def _checked(
    session: IndexSession,
    candidates: Iterator[str],
    status: str | None,
    text: str | None,
    wanted: int | None,
) -> list[Ticket]:
    """Read the candidates in id order, a batch at a time; keep the first `wanted` that match."""
    found: list[Ticket] = []
    size = MAX_CHECKED if wanted is None else min(wanted, MAX_CHECKED)
    while True:
        ids = list(itertools.islice(candidates, size))
        if not ids:
            return found
        for row in session.tickets(ids, status):
            if _accepts(row, text):
                found.append(session.ticket(row))
                if len(found) == wanted:
                    return found
        size = min(2 * size, MAX_CHECKED)
