"""The page walk on the fixture store, from every start position, against the brief's steps.

For each tenant, each filter the brief uses (status none, open or closed, by query none or a
few values, case variants included), each limit 1-10 and each start position, following
next_cursor must give exactly the pages the brief's search steps give: each matching
ticket once, in id order, next_cursor the last id of every page but the last, where it is
null. The expected pages come from `brief_search`, the brief's five steps written plainly
over the records dict in this module, never from the code under test.

Why these start positions. Step 4 uses the cursor only to compare it with stored ids, so
two cursors give the same answer unless a stored id lies above the lower one and at or
below the higher one. Every stored id of either tenant lies in TKT-101..TKT-115, so
START_POSITIONS (no cursor, TKT-000, every id TKT-100..TKT-116, TKT-999) holds every stored
id, both neighbours of each, every gap and both ends of the format: a cursor from every
such class, and each edge where an inclusive or off-by-one comparison would show. The
whole cross product (2 tenants, 30 filters, 10 limits, 20 starts) runs on those. Beyond
the argument, every one of the 1,000 ids TKT-000..TKT-999 is also walked as a start, at
the default limit without filters (the full product over all 1,000 would be 50 times as
many walks for no class not already covered). Last, a ticket added during a walk: seen
ahead of the cursor, not behind it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from brief_calls import Records, call
from brief_table import ALPHA, BETA, T101, T102, T104, page
from ticket_tools import fixture_records

STATUSES = (None, "open", "closed")
QUERIES = (None, "login", "LOGIN", "Login", "settings", "SETTINGS", "reset", "refund", "e", "zzz")
LIMITS = range(1, 11)
START_POSITIONS: tuple[str | None, ...] = (
    None,
    "TKT-000",
    *(f"TKT-{n}" for n in range(100, 117)),
    "TKT-999",
)
ALL_IDS = tuple(f"TKT-{n:03d}" for n in range(1000))
DEFAULT_LIMIT = 5  # the brief: limit "When absent: 5"


def brief_search(
    records: Records,
    tenant: str,
    status: str | None,
    query: str | None,
    cursor: str | None,
) -> list[dict[str, str]]:
    """Return every ticket the brief's search steps 1-4 keep; step 5 cuts it into pages."""
    # 1. Only the trusted tenant's tickets: the keys whose part before the last ":" is the
    #    tenant. Step 1 says "starts with the tenant followed by :"; on these records the
    #    two agree, and where they do not, this is the rule (README, "Deviation from the brief").
    tickets = [ticket for key, ticket in records.items() if key.rpartition(":")[0] == tenant]
    # 2. Sorted by id, ascending.
    tickets.sort(key=lambda ticket: ticket["id"])
    # 3. Status, then the title lowercased containing the query lowercased.
    if status is not None:
        tickets = [ticket for ticket in tickets if ticket["status"] == status]
    if query is not None:
        tickets = [ticket for ticket in tickets if query.lower() in ticket["title"].lower()]
    # 4. Only the ids greater than the cursor.
    if cursor is not None:
        tickets = [ticket for ticket in tickets if ticket["id"] > cursor]
    return [{"id": t["id"], "title": t["title"], "status": t["status"]} for t in tickets]


def expected_pages(matches: list[dict[str, str]], limit: int) -> list[dict[str, object]]:
    """Step 5 page after page: `limit` tickets each; next_cursor set while more remain."""
    chunks = [matches[start : start + limit] for start in range(0, len(matches), limit)] or [[]]
    last = len(chunks) - 1
    return [
        page(*chunk, next_cursor=None if number == last else chunk[-1]["id"])
        for number, chunk in enumerate(chunks)
    ]


def walk(
    records: Records,
    context: Mapping[str, object],
    filters: dict[str, object],
    start: str | None,
) -> list[dict[str, object]]:
    """Follow next_cursor from `start` until it is null; return every page."""
    pages: list[dict[str, object]] = []
    cursor = start
    for _ in range(len(records) + 1):  # a bound: no tenant has more pages than records
        args = filters if cursor is None else {**filters, "cursor": cursor}
        result = call("search_tickets", args, context, records)
        pages.append(result)
        if result.get("next_cursor") is None:
            return pages
        cursor = str(result["next_cursor"])
    pytest.fail(f"the walk from {start} did not end: {pages}")


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: f"query-{q}")
@pytest.mark.parametrize("status", STATUSES, ids=lambda s: f"status-{s}")
@pytest.mark.parametrize("context", [ALPHA, BETA], ids=lambda c: str(c["tenant"]))
def test_walk_from_every_start_with_every_limit(
    context: Mapping[str, object], status: str | None, query: str | None
) -> None:
    records = fixture_records()
    tenant = str(context["tenant"])
    filters: dict[str, object] = {
        key: value for key, value in (("status", status), ("query", query)) if value is not None
    }
    for limit in LIMITS:
        for start in START_POSITIONS:
            matches = brief_search(records, tenant, status, query, start)
            pages = walk(records, context, {**filters, "limit": limit}, start)
            assert pages == expected_pages(matches, limit), f"limit {limit}, start {start}"


@pytest.mark.parametrize("context", [ALPHA, BETA], ids=lambda c: str(c["tenant"]))
def test_walk_from_every_id_at_the_default_limit(context: Mapping[str, object]) -> None:
    records = fixture_records()
    tenant = str(context["tenant"])
    for start in ALL_IDS:
        matches = brief_search(records, tenant, None, None, start)
        pages = walk(records, context, {}, start)
        assert pages == expected_pages(matches, DEFAULT_LIMIT), f"start {start}"


def test_a_walk_sees_a_ticket_added_ahead_of_its_cursor_and_not_one_behind() -> None:
    # Pages are read at call time, by position: nothing repeats, nothing behind is revisited.
    records = fixture_records()
    first = call("search_tickets", {"limit": 2}, ALPHA, records)
    assert first == page(T101, T102, next_cursor="TKT-102")
    records["alpha:TKT-100"] = {"id": "TKT-100", "title": "Added behind", "status": "open"}
    records["alpha:TKT-103"] = {"id": "TKT-103", "title": "Added ahead", "status": "open"}
    added = {"id": "TKT-103", "title": "Added ahead", "status": "open"}
    assert call("search_tickets", {"limit": 2, "cursor": "TKT-102"}, ALPHA, records) == page(
        added, T104, next_cursor="TKT-104"
    )
