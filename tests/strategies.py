"""Hypothesis strategies shared by the test modules (one self-contained block per topic)."""

from __future__ import annotations

from hypothesis import strategies as st

# --- Multi-tenant stores and page requests, for the dict-vs-SQLite differential test ---

# Characters where a database's text handling parts from Python's: LIKE wildcards
# (% _) and escape (\), letters whose lowercase is non-ASCII or longer (É İ ẞ Σ) or
# ASCII from non-ASCII (the Kelvin sign), one that lower() does not fold to "ss" (ß),
# and NUL. Look-alikes of Latin letters (Kelvin sign; Greek capital, small and final
# sigma) are written as escapes.
STORE_TRAP_TEXT = "aAbB %_\\ÉéİiIßsSẞKk\u212a\u03a3\u03c3\u03c2\x00"
STORE_TENANTS = ("alpha", "beta", "a", "É")
# Tenants that hold nothing: a prefix of a real tenant, and one shaped like a key.
STORE_ABSENT_TENANTS = ("alph", "delta", "alpha:TKT-001")
STORE_STATUSES = ("open", "closed", "Open")

store_ticket_ids = st.integers(min_value=0, max_value=30).map(lambda n: f"TKT-{n:03d}")


@st.composite
def multi_tenant_records(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    """A records dict over a few tenants whose ids collide and interleave."""
    rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from(STORE_TENANTS),
                store_ticket_ids,
                st.text(alphabet=STORE_TRAP_TEXT, max_size=10),
                st.sampled_from(STORE_STATUSES),
                st.booleans(),
            ),
            max_size=40,
        )
    )
    records: dict[str, dict[str, str]] = {}
    for tenant, ticket_id, title, status, internal in rows:
        stored = {"id": ticket_id, "title": title, "status": status}
        if internal:
            stored["internal_note"] = "never shown"
        records[f"{tenant}:{ticket_id}"] = stored
    return records


store_page_requests = st.fixed_dictionaries(
    {
        "tenant": st.sampled_from(STORE_TENANTS + STORE_ABSENT_TENANTS),
        "status": st.none() | st.sampled_from(STORE_STATUSES),
        "query": st.none() | st.text(alphabet=STORE_TRAP_TEXT, min_size=1, max_size=3),
        "after": st.none() | store_ticket_ids,
        "count": st.integers(min_value=0, max_value=12),
    }
)
"""Keyword arguments for TicketStore.page, including counts the tools never send (0, 1)."""

store_search_args = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(("open", "closed")),
        "query": st.text(alphabet=STORE_TRAP_TEXT, min_size=1, max_size=3),
        "limit": st.integers(min_value=1, max_value=10),
    },
)
"""Valid search_tickets arguments without a cursor (a page walk supplies it)."""
