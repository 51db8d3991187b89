"""The few hypothesis strategies several suites share: multi-tenant stores and search arguments.

Used by test_isolation.py and test_paging.py. A strategy one suite alone uses lives
beside that suite: in its own module (test_never_raises.py, test_sqlite_store.py), or,
when large, in a module named for it (argument_edges.py, fuzz_cases.py).
"""

from __future__ import annotations

from hypothesis import strategies as st

# Every stored ticket carries this internal field: it must never reach a result.
CANARY_FIELD = "internal_note"
CANARY_VALUE = "CANARY: internal only"

# Tenant names that share prefixes ("alpha" / "alphabet" / "alp") and one unrelated name.
TENANTS = ("alpha", "alphabet", "alp", "beta")

# Few title words, so that generated queries often match and often do not.
TITLE_WORDS = ("Login", "login", "LOGIN", "Settings", "refund", "crash", "Ünïcode", "😀")

ticket_numbers = st.integers(min_value=0, max_value=999)
ticket_ids = ticket_numbers.map(lambda n: f"TKT-{n:03d}")
"""Any valid ticket ID: before, between, equal to or after the stored ones."""

statuses = st.sampled_from(("open", "closed"))
titles = st.lists(st.sampled_from(TITLE_WORDS), min_size=1, max_size=4).map(" ".join)


@st.composite
def multi_tenant_stores(draw: st.DrawFn) -> dict[str, dict[str, object]]:
    """Draw a records dict over several prefix-sharing tenants, with a canary in every ticket.

    Tenants often share ids, keys arrive in no particular order, and every stored
    ticket has an internal field beside id, title and status.
    """
    records: dict[str, dict[str, object]] = {}
    entries = draw(
        st.lists(
            st.tuples(st.sampled_from(TENANTS), ticket_ids, titles, statuses),
            max_size=40,
            unique_by=lambda entry: (entry[0], entry[1]),
        )
    )
    for tenant, ticket_id, title, status in entries:
        records[f"{tenant}:{ticket_id}"] = {
            "id": ticket_id,
            "title": title,
            "status": status,
            CANARY_FIELD: CANARY_VALUE,
        }
    return records


@st.composite
def search_filters(draw: st.DrawFn) -> dict[str, object]:
    """Draw valid search_tickets filters (status and query), each possibly absent."""
    filters: dict[str, object] = {}
    if draw(st.booleans()):
        filters["status"] = draw(statuses)
    if draw(st.booleans()):
        filters["query"] = draw(st.sampled_from((*TITLE_WORDS, "in", "o", "gin S", "xyz")))
    return filters


@st.composite
def search_args(draw: st.DrawFn) -> dict[str, object]:
    """Draw valid search_tickets arguments: filters, a limit and a cursor, each possibly absent."""
    args = draw(search_filters())
    if draw(st.booleans()):
        args["limit"] = draw(st.integers(min_value=1, max_value=10))
    if draw(st.booleans()):
        args["cursor"] = draw(ticket_ids)
    return args
