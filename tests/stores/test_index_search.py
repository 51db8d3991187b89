"""index_search: the plan both SQL stores follow, on an in-memory session, against the dict store.

The session below answers each read from the records themselves (an index built by
`build_rows`), so the plan alone is under test, over many generated stores: every
branch (the scan first or not, the look's small terms or the buckets' reads, batches of
buckets and of candidates growing) gives the dict store's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store_cases import EVERY
from ticket_tools import DictStore, TicketFilter
from ticket_tools.stores import index_search
from ticket_tools.stores.grams import (
    BUCKET_SIZE,
    Term,
    build_rows,
    encode,
    id_number,
    ticket_grams,
)
from ticket_tools.stores.index_search import Bucket, Look, Row, Start, find_with_index
from ticket_tools.tickets import Ticket

WIDTH = 6


class MemorySession:
    """An IndexSession over records of one tenant, read by the contract's own rules."""

    width = WIDTH

    def __init__(self, records: dict[str, dict[str, str]], tenant: str, *, small: bool) -> None:
        self._tickets = sorted(
            (ticket["id"], ticket["title"], ticket["status"])
            for key, ticket in records.items()
            if key.rpartition(":")[0] == tenant
        )
        self._rows = list(build_rows(tenant, self._tickets))
        self._small = small
        self.reads: list[str] = []
        """Which reads the plan made, in order."""

    def _grams(self, term: Term) -> list[tuple[str, int, bytes]]:
        return [
            (r.gram, r.bucket, r.container) for r in self._rows if term.low <= r.gram <= term.high
        ]

    def _count(self, term: Term) -> int:
        return sum(
            1
            for _, title, status in self._tickets
            for gram in ticket_grams(title, status)
            if term.low <= gram <= term.high
        )

    def start(self, after: str | None, rows: int, terms: Sequence[Term]) -> Start:
        self.reads.append("start")
        counts = tuple(self._count(term) for term in terms)
        small = None
        if self._small:
            small = {
                term: [(bucket, container) for _, bucket, container in self._grams(term)]
                for term, count in zip(terms, counts, strict=True)
                if 0 < count <= index_search.PROBE_TICKETS
            }
        look = Look(
            indexed=bool(self._tickets), tickets=len(self._tickets), counts=counts, small=small
        )

        def scan() -> Iterable[Row]:
            self.reads.append("scan")
            return [t for t in self._tickets if (after is None or t[0] > after)][:rows]

        return Start(look if self._tickets else Look(indexed=False), scan)

    def filtered_scan(
        self, status: str | None, text: str | None, after: str | None, limit: int | None
    ) -> list[Ticket]:
        self.reads.append("filtered_scan")
        where = TicketFilter(status, text, after)
        found: list[Ticket] = [
            {"id": i, "title": t, "status": s}
            for i, t, s in self._tickets
            if where.matches({"id": i, "title": t, "status": s})
        ]
        return found[:limit] if limit is not None else found

    def buckets(self, driver: Term, others: Sequence[Term], first: int, count: int) -> list[Bucket]:
        self.reads.append(f"buckets {first} {count}")
        chosen = sorted({bucket for _, bucket, _ in self._grams(driver) if bucket >= first})[:count]

        def held(term: Term, bucket: int) -> list[bytes]:
            return [c for _, b, c in self._grams(term) if b == bucket]

        return [Bucket(b, held(driver, b), [held(term, b) for term in others]) for b in chosen]

    def tickets(self, ids: Sequence[str], status: str | None) -> Sequence[Row]:
        self.reads.append(f"tickets {len(ids)}")
        wanted = set(ids)
        return [t for t in self._tickets if t[0] in wanted and (status is None or t[2] == status)]

    def ticket(self, row: Row) -> Ticket:
        return {"id": str(row[0]), "title": str(row[1]), "status": str(row[2])}


ALPHABET = "ab kéİß票%_\\"
numbers = st.integers(0, 3 * BUCKET_SIZE) | st.sampled_from((0, BUCKET_SIZE - 1, BUCKET_SIZE))


@st.composite
def tenants(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    chosen = draw(st.sets(numbers, max_size=60))
    records = {}
    for number in sorted(chosen):
        ticket_id = f"TKT-{number:0{WIDTH}d}"
        title = draw(st.text(ALPHABET, max_size=8))
        records[f"alpha:{ticket_id}"] = {
            "id": ticket_id,
            "title": title,
            "status": draw(st.sampled_from(("open", "open", "closed"))),
        }
    return records


@settings(max_examples=500)
@given(
    records=tenants(),
    text=st.none() | st.text(ALPHABET, min_size=1, max_size=5),
    status=st.none() | st.sampled_from(("open", "closed", "pending")),
    after=st.none() | numbers.map(lambda n: f"TKT-{n:0{WIDTH}d}") | st.text("TK-09x", max_size=6),
    limit=st.none() | st.integers(1, 8) | st.just(2**70),
    small=st.booleans(),
    scan_rows=st.sampled_from((1, 8)),
    bisect_ratio=st.sampled_from((0, index_search.BISECT_RATIO, 10**9)),
)
def test_the_plan_gives_the_dict_stores_answer(  # noqa: PLR0917 - hypothesis's arguments
    records: dict[str, dict[str, str]],
    text: str | None,
    status: str | None,
    after: str | None,
    limit: int | None,
    small: bool,
    scan_rows: int,
    bisect_ratio: int,
) -> None:
    if text is None and status is None:
        status = "open"
    where = TicketFilter(status, text, after)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_search, "MIN_SCAN_ROWS", scan_rows)
        patch.setattr(index_search, "SCAN_ROWS_PER_TICKET", scan_rows)
        patch.setattr(index_search, "MAX_FIRST_BUCKETS", 1)  # the batches grow, in three buckets
        # The other terms' offsets bisected always (0), as shipped, or made a set always.
        patch.setattr(index_search, "BISECT_RATIO", bisect_ratio)
        found = find_with_index(MemorySession(records, "alpha", small=small), where, limit)
    oracle = DictStore(records).find("alpha", where, limit=EVERY if limit is None else limit)
    assert found == oracle


def _records(titles: dict[int, str]) -> dict[str, dict[str, str]]:
    return {
        f"alpha:TKT-{n:06d}": {"id": f"TKT-{n:06d}", "title": title, "status": "open"}
        for n, title in titles.items()
    }


def test_a_search_needs_a_text_or_a_status() -> None:
    with pytest.raises(ValueError, match="find_with_index needs a text or a status"):
        find_with_index(MemorySession({}, "alpha", small=False), TicketFilter(), 5)


@pytest.mark.parametrize(
    ("titles", "text", "limit", "reads"),
    [
        pytest.param({}, "x", 5, ["start", "filtered_scan"], id="a-tenant-without-an-index"),
        pytest.param({1: "ab"}, "   ", 5, ["start", "filtered_scan"], id="a-query-of-spaces"),
        pytest.param({1: "ab"}, "zz", 5, ["start"], id="a-term-no-title-has"),
        pytest.param(
            dict.fromkeys(range(40), "login"), "login", 5, ["start", "scan"], id="a-common-word"
        ),
        pytest.param(
            {1: "login", 2: "noise", 3: "login"},
            "login",
            5,
            ["start", "scan"],
            id="a-common-word-the-scan-reads-the-whole-tenant",
        ),
        pytest.param(
            {**dict.fromkeys(range(40), "noise"), **dict.fromkeys(range(40, 80), "login")},
            "login",
            5,
            ["start", "scan", "buckets 0 1", "tickets 5"],
            id="a-common-word-past-the-scan-then-the-index",
        ),
        pytest.param(
            {**dict.fromkeys(range(40), "noise"), 7: "kerberos", 5000: "kerberos"},
            "kerberos",
            5,
            # One bucket first (the count says the page is in it), then four more.
            ["start", "buckets 0 1", "buckets 1 4", "tickets 2"],
            id="a-rare-word-in-two-buckets",
        ),
        pytest.param(
            # "kerberos" in bucket 0, "kerber os" sharing the rarest grams in 1 and 2:
            # candidates the rule refuses, read in batches that double.
            {
                **dict.fromkeys(range(40), "noise"),
                **{BUCKET_SIZE + n: "kerb eros" for n in range(20)},
                3: "kerberos",
            },
            "kerberos",
            1,
            ["start", "buckets 0 1", "tickets 1"],
            id="a-first-match-in-the-first-bucket",
        ),
    ],
)
def test_the_reads_each_case_makes(
    titles: dict[int, str], text: str, limit: int, reads: list[str]
) -> None:
    session = MemorySession(_records(titles), "alpha", small=False)
    found = find_with_index(session, TicketFilter(text=text), limit)
    records = _records(titles)
    assert found == DictStore(records).find("alpha", TicketFilter(text=text), limit=limit)
    assert session.reads == reads


def test_candidates_the_rule_refuses_are_read_in_growing_batches() -> None:
    # Forty titles have the three grams, none the whole word: each batch of candidates
    # doubles (1, 2, 4, ...) until none is left.
    titles = dict.fromkeys(range(40), "abcd bcde") | dict.fromkeys(range(40, 2040), "noise")
    session = MemorySession(_records(titles), "alpha", small=False)
    assert find_with_index(session, TicketFilter(text="abcde"), 1) == []
    assert [read for read in session.reads if read.startswith("tickets")] == [
        "tickets 1",
        "tickets 2",
        "tickets 4",
        "tickets 8",
        "tickets 16",
        "tickets 9",
    ]


@pytest.mark.parametrize(
    ("driver", "others", "lowest", "offsets"),
    [
        pytest.param([[1, 2, 9]], [[[2, 9]], [[9], [2]]], 0, [2, 9], id="in-every-term"),
        pytest.param([[1, 2, 9]], [[[2, 9]]], 3, [9], id="from-lowest-on"),
        pytest.param([[1], [1, 2]], [[[1, 2]]], 0, [1, 2], id="a-range-driver-its-union"),
        pytest.param([[1]], [[], [[1]]], 0, [], id="a-term-without-a-container-here"),
    ],
)
def test_intersection(
    driver: list[list[int]], others: list[list[list[int]]], lowest: int, offsets: list[int]
) -> None:
    bucket = Bucket(0, [encode(c) for c in driver], [[encode(c) for c in term] for term in others])
    assert list(index_search._intersection(bucket, lowest)) == offsets


def test_id_numbers_of_the_candidates() -> None:
    assert id_number("TKT-004097") == BUCKET_SIZE + 1


@pytest.mark.parametrize(
    ("closed", "status", "text", "reads"),
    [
        pytest.param(
            {7, 5000},
            "closed",
            None,
            ["start", "buckets 0 1", "buckets 1 4", "tickets 2"],
            id="the-rare-status",
        ),
        pytest.param({7, 5000}, "open", None, ["start", "scan"], id="the-common-status"),
        pytest.param(
            {7, 5000},
            "closed",
            "noise",
            ["start", "buckets 0 1", "buckets 1 4", "tickets 2"],
            id="a-common-word-of-the-rare-status",
        ),
        pytest.param({7, 5000}, "pending", None, ["start"], id="a-status-no-ticket-has"),
    ],
)
def test_a_status_is_a_term(
    closed: set[int], status: str, text: str | None, reads: list[str]
) -> None:
    records = _records({**dict.fromkeys(range(40), "noise"), 5000: "noise"})
    for number in closed:
        records[f"alpha:TKT-{number:06d}"]["status"] = "closed"
    session = MemorySession(records, "alpha", small=False)
    where = TicketFilter(status, text)
    assert find_with_index(session, where, 5) == DictStore(records).find("alpha", where, limit=5)
    assert session.reads == reads
