"""Hypothesis strategies shared by the property suites.

Each strategy is self-contained so other suites can add their own beside it.
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


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(),  # NaN and the infinities included
    st.text(),
    st.sampled_from(("TKT-104", "TKT-١٠٤", "TKT-104\n", "open", "5", "", "😀" * 41)),
)
"""JSON-like scalars, including the values that trap Python code."""

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=12), children, max_size=4),
    ),
    max_leaves=20,
)
"""Arbitrary JSON-like values: scalars, lists and string-keyed dicts, nested."""


@st.composite
def tool_args(draw: st.DrawFn) -> object:
    """Draw untrusted tool arguments: any JSON value, or a dict using the real argument names."""
    real_keys = st.sampled_from(("ticket_id", "status", "query", "limit", "cursor", "tenant"))
    return draw(
        st.one_of(
            json_values,
            st.dictionaries(real_keys, json_values, max_size=5),
            st.dictionaries(real_keys, json_scalars, max_size=5),
        )
    )


@st.composite
def search_args(draw: st.DrawFn) -> dict[str, object]:
    """Draw valid search_tickets arguments: filters, a limit and a cursor, each possibly absent."""
    args = draw(search_filters())
    if draw(st.booleans()):
        args["limit"] = draw(st.integers(min_value=1, max_value=10))
    if draw(st.booleans()):
        args["cursor"] = draw(ticket_ids)
    return args
