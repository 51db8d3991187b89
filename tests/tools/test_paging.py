"""The page walk: following next_cursor from any start returns each match once, in id order."""

from __future__ import annotations

from typing import cast

from hypothesis import given
from hypothesis import strategies as st

from conftest import StoreFactory
from strategies import TENANTS, multi_tenant_stores, search_filters, ticket_ids
from ticket_tools import TicketFilter, execute_tool
from ticket_tools.store import tenant_of

PUBLIC_FIELDS = ("id", "title", "status")


def expected_matches(
    records: dict[str, dict[str, object]],
    tenant: str,
    filters: dict[str, object],
    after: str | None,
) -> list[dict[str, object]]:
    """The contract's five steps, written the slow, obvious way, with the one filter rule."""
    own = [t for key, t in records.items() if tenant_of(key) == tenant]
    own.sort(key=lambda t: str(t["id"]))
    where = TicketFilter(
        status=cast("str | None", filters.get("status")),
        text=cast("str | None", filters.get("query")),
        after=after,
    )
    return [{field: t[field] for field in PUBLIC_FIELDS} for t in own if where.matches(t)]


@st.composite
def starting_cursors(draw: st.DrawFn, records: dict[str, dict[str, object]]) -> str | None:
    """No cursor, an existing id (equal), or any id (before, between or after the stored ones)."""
    existing = sorted({str(t["id"]) for t in records.values()})
    choices: list[st.SearchStrategy[str | None]] = [st.none(), ticket_ids]
    if existing:
        choices.append(st.sampled_from(existing))
    cursor: str | None = draw(st.one_of(*choices))
    return cursor


@given(data=st.data(), records=multi_tenant_stores(), filters=search_filters())
def test_page_walk_returns_every_match_once_in_id_order(
    make_store: StoreFactory,
    data: st.DataObject,
    records: dict[str, dict[str, object]],
    filters: dict[str, object],
) -> None:
    tenant = data.draw(st.sampled_from(TENANTS), label="tenant")
    limit = data.draw(st.integers(min_value=1, max_value=10), label="limit")
    start = data.draw(starting_cursors(records), label="start")
    context = {"tenant": tenant, "can_read_tickets": True}
    store = make_store(records)
    expected = expected_matches(records, tenant, filters, start)

    walked: list[dict[str, object]] = []
    cursor = start
    for _ in range(len(expected) + 1):  # a bound: the walk must end within it
        args = {**filters, "limit": limit, **({} if cursor is None else {"cursor": cursor})}
        result = execute_tool("search_tickets", args, context, store)
        assert set(result) == {"ok", "tickets", "next_cursor"}
        assert result["ok"] is True
        tickets = result["tickets"]
        assert isinstance(tickets, list)
        remaining = len(expected) - len(walked)
        # A full page while more remain; the rest on the last page.
        assert len(tickets) == min(limit, remaining)
        walked.extend(tickets)
        if result["next_cursor"] is None:
            break
        # next_cursor is the last returned id, set only when more matches remain.
        assert result["next_cursor"] == tickets[-1]["id"]
        assert len(walked) < len(expected)
        cursor = str(result["next_cursor"])
    assert walked == expected
    assert result["next_cursor"] is None


@given(records=multi_tenant_stores(), tenant=st.sampled_from(TENANTS), filters=search_filters())
def test_every_cursor_is_a_position(
    make_store: StoreFactory,
    records: dict[str, dict[str, object]],
    tenant: str,
    filters: dict[str, object],
) -> None:
    # Any id works as a cursor, stored or not: the page is the matches after it.
    store = make_store(records)
    context = {"tenant": tenant, "can_read_tickets": True}
    for number in (0, 1, 500, 998, 999):
        cursor = f"TKT-{number:03d}"
        result = execute_tool(
            "search_tickets", {**filters, "limit": 10, "cursor": cursor}, context, store
        )
        matches = expected_matches(records, tenant, filters, cursor)
        assert result == {
            "ok": True,
            "tickets": matches[:10],
            "next_cursor": matches[9]["id"] if len(matches) > 10 else None,
        }
