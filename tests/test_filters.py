"""The one filter value every store answers: its matching rule and the shared arguments."""

from __future__ import annotations

import pytest

from ticket_tools import TicketFilter
from ticket_tools.arguments import ArgError, parse_arguments
from ticket_tools.filters import QUERY_ARG, STATUS_ARG, filter_from, title_contains
from ticket_tools.store import tenant_of

STORED = {"id": "TKT-107", "title": "Login page slow", "status": "open", "internal_note": "x"}


@pytest.mark.parametrize(
    ("title", "text", "contains"),
    [
        pytest.param("Login page slow", "LOGIN", True, id="case-ignored"),
        pytest.param("Login page slow", "page s", True, id="phrase-with-space"),
        pytest.param("Login page slow", " slow ", False, id="spaces-kept"),
        pytest.param("Login page slow", "l%n", False, id="percent-is-literal"),
        pytest.param("Login page slow", "l_gin", False, id="underscore-is-literal"),
        pytest.param("Straße", "STRASSE", False, id="lower-not-casefold"),
        pytest.param("İstanbul", "i̇st", True, id="dotted-capital-i-lowers-to-two-code-points"),
        # Python lowers a word-final capital sigma to the final form \u03c2, not \u03c3.
        pytest.param("ΟΔΟΣ", "\u03bf\u03b4\u03bf\u03c3", False, id="final-sigma-is-not-sigma"),
        pytest.param("ΟΔΟΣ", "ΟΔΟΣ", True, id="final-sigma-both-sides"),
        pytest.param("\u212a stands for Kelvin", "k s", True, id="kelvin-sign-lowers-to-k"),
        pytest.param("Login", "\ud800", False, id="lone-surrogate-matches-nothing"),
    ],
)
def test_title_contains_is_python_lower_and_a_literal_substring(
    title: str, text: str, contains: bool
) -> None:
    assert title_contains(title, text) is contains


@pytest.mark.parametrize(
    ("where", "matches"),
    [
        pytest.param(TicketFilter(), True, id="no-filter"),
        pytest.param(TicketFilter(status="open"), True, id="status-equal"),
        pytest.param(TicketFilter(status="closed"), False, id="status-other"),
        pytest.param(TicketFilter(status="OPEN"), False, id="status-case-sensitive"),
        pytest.param(TicketFilter(text="page"), True, id="text-in-title"),
        pytest.param(TicketFilter(text="x"), False, id="text-never-internal-fields"),
        pytest.param(TicketFilter(after="TKT-106"), True, id="after-below"),
        pytest.param(TicketFilter(after="TKT-107"), False, id="after-equal-is-excluded"),
        pytest.param(TicketFilter(after="TKT-108"), False, id="after-above"),
        pytest.param(TicketFilter("open", "login", "TKT-100"), True, id="all-three"),
        pytest.param(TicketFilter("open", "login", "TKT-107"), False, id="all-but-after"),
    ],
)
def test_a_filter_keeps_a_ticket_only_when_every_set_field_matches(
    where: TicketFilter, matches: bool
) -> None:
    assert where.matches(STORED) is matches


@pytest.mark.parametrize(
    ("key", "tenant"),
    [
        pytest.param("alpha:TKT-101", "alpha", id="plain"),
        pytest.param("alpha:x:TKT-001", "alpha:x", id="colon-in-tenant"),
        pytest.param("alpha::TKT-001", "alpha:", id="trailing-colon-tenant"),
        pytest.param(":TKT-001", "", id="empty-tenant"),
        pytest.param("TKT-001", "", id="no-colon"),
    ],
)
def test_a_key_belongs_to_the_tenant_before_its_last_colon(key: str, tenant: str) -> None:
    assert tenant_of(key) == tenant


@pytest.mark.parametrize(
    ("args", "where"),
    [
        pytest.param({}, TicketFilter(), id="none"),
        pytest.param({"status": "closed"}, TicketFilter(status="closed"), id="status"),
        pytest.param({"query": "Login"}, TicketFilter(text="Login"), id="query-as-given"),
        pytest.param(
            {"status": "open", "query": " a "},
            TicketFilter(status="open", text=" a "),
            id="both",
        ),
    ],
)
def test_filter_from_reads_the_shared_arguments(
    args: dict[str, object], where: TicketFilter
) -> None:
    parsed = parse_arguments((STATUS_ARG, QUERY_ARG), args)
    assert not isinstance(parsed, ArgError)
    assert filter_from(parsed) == where
    assert filter_from(parsed, after="TKT-104") == TicketFilter(where.status, where.text, "TKT-104")
