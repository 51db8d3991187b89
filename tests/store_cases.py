"""Generated and hand-made stores shared by the SQLite and PostgreSQL suites."""

from __future__ import annotations

from hypothesis import strategies as st

from ticket_tools.filters import TicketFilter

TRAP_RECORDS = {
    f"alpha:{ticket_id}": {"id": ticket_id, "title": title, "status": "open"}
    for ticket_id, title in [
        ("TKT-101", "100% done"),
        ("TKT-102", "1000 done"),
        ("TKT-103", "snake_case name"),
        ("TKT-104", "snakeXcase name"),
        ("TKT-105", "C:\\temp\\new"),
        ("TKT-106", "ÉCOLE fermée"),
        ("TKT-107", "École"),
        ("TKT-108", "İstanbul office"),
        ("TKT-109", "Straße closed"),
        ("TKT-110", "STRASSE open"),
        ("TKT-111", "5 \u212a probe"),  # KELVIN SIGN, lowercases to ASCII "k"
        ("TKT-112", "ΟΔΟΣ works"),
    ]
}


# Characters where a database's text handling parts from Python's: LIKE wildcards
# (% _) and escape (\), letters whose lowercase is non-ASCII or longer (É İ ẞ Σ) or
# ASCII from non-ASCII (the Kelvin sign), one that lower() does not fold to "ss" (ß),
# and NUL. Look-alikes of Latin letters (Kelvin sign; Greek capital, small and final
# sigma) are written as escapes.
STORE_TRAP_TEXT = "aAbB %_\\ÉéİiIßsSẞKk\u212a\u03a3\u03c3\u03c2\x00"
STORE_TENANTS = ("alpha", "beta", "a", "É")
# Tenants that hold nothing: a prefix of a real tenant, and one shaped like a key.
STORE_ABSENT_TENANTS = ("alph", "delta", "alpha:TKT-001")
# A limit above any store's ticket count: every match. (The SQL stores also read None so;
# the dict store, the brief's, takes an int only.)
EVERY = 2**63 - 1
# A stored status is "open" or "closed" (the records rules); a filter may still ask for
# "Open", which no store may match to "open".
STORED_STATUSES = ("open", "closed")
STORE_STATUSES = (*STORED_STATUSES, "Open")

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
                st.sampled_from(STORED_STATUSES),
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


store_find_requests = st.tuples(
    st.sampled_from(STORE_TENANTS + STORE_ABSENT_TENANTS),
    st.builds(
        TicketFilter,
        status=st.none() | st.sampled_from(STORE_STATUSES),
        text=st.none() | st.text(alphabet=STORE_TRAP_TEXT, min_size=1, max_size=3),
        after=st.none() | store_ticket_ids,
    ),
    st.integers(min_value=0, max_value=12) | st.just(EVERY),
)
"""(tenant, filter, limit) for TicketStore.find, including limits the tools never send."""

store_search_args = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(("open", "closed")),
        "query": st.text(alphabet=STORE_TRAP_TEXT, min_size=1, max_size=3),
        "limit": st.integers(min_value=1, max_value=10),
    },
)
"""Valid search_tickets arguments without a cursor (a page walk supplies it)."""


# What a tenant, status, text or cursor can hold: the generated stores' own values, and
# lone surrogates around them (a "\ud800" JSON escape, a non-UTF-8 --tenant byte).
_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_ODD_TEXT = st.text(
    alphabet=st.one_of(st.sampled_from("aTK-0123É:"), _SURROGATES, st.sampled_from("\ue000\uffff")),
    max_size=8,
)
odd_requests = st.fixed_dictionaries(
    {
        "tenant": st.sampled_from(STORE_TENANTS) | _ODD_TEXT,
        "status": st.none() | st.sampled_from(STORE_STATUSES) | _ODD_TEXT,
        "text": st.none() | _ODD_TEXT,
        "after": st.none() | store_ticket_ids | _ODD_TEXT,
        "limit": st.integers(min_value=-1, max_value=12) | st.just(EVERY) | st.just(2**70),
    }
)
