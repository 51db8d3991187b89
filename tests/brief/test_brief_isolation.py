"""Tenant isolation with the shared TKT-104, and copies: nothing leaks in, nothing leaks out.

Alpha and beta both store a TKT-104; each context sees only its own, by get_ticket and by
search. Beyond the tests here, `brief_calls.call` checks on every call this suite makes
that each returned ticket is the caller's own and that no other tenant's title appears
(the first test below shows that check failing on a leak). Permission is exactly True and
the tenant a non-empty string, or the call is forbidden. Records and args are never
modified (deep copies compared after calls), and every result is a fresh dict: changing
one changes neither the store nor a later result. A tenant whose name runs on from another's
("alphabet", "alpha:x") and "alpha" never see each other's keys.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import pytest

from brief_calls import call, check_only_own_tickets
from brief_table import (
    ALPHA,
    ALPHA_NO_READ,
    ALPHA_TICKETS,
    BETA,
    BETA_T103,
    BETA_T104,
    INTERNAL_NOTES,
    T101,
    T102,
    T104,
    T107,
    T110,
    fail,
    page,
)
from ticket_tools import fixture_records


@pytest.mark.parametrize(
    "leak",
    [
        pytest.param(page(BETA_T104, next_cursor=None), id="beta-ticket-in-a-page"),
        pytest.param({"ok": True, "ticket": BETA_T104}, id="beta-ticket-from-get"),
        pytest.param(
            page({**T104, "title": "Private billing issue"}, next_cursor=None),
            id="beta-title-on-alpha-id",
        ),
        pytest.param(page({**T104, "internal_note": "x"}, next_cursor=None), id="extra-field"),
    ],
)
def test_the_check_on_every_call_fails_on_a_leak(leak: dict[str, object]) -> None:
    with pytest.raises(AssertionError):
        check_only_own_tickets(leak, ALPHA, fixture_records())


@pytest.mark.parametrize(
    ("context", "own_104"),
    [
        pytest.param(ALPHA, T104, id="alpha"),
        pytest.param(BETA, BETA_T104, id="beta"),
    ],
)
def test_each_context_sees_only_its_own_tkt_104(
    context: Mapping[str, object], own_104: dict[str, str]
) -> None:
    assert call("get_ticket", {"ticket_id": "TKT-104"}, context) == {"ok": True, "ticket": own_104}
    assert call("search_tickets", {"cursor": "TKT-103", "limit": 1}, context) == page(
        own_104, next_cursor="TKT-104"
    )
    assert call("search_tickets", {"query": "TKT-104"}, context) == page(next_cursor=None)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, id="get"),
        pytest.param("search_tickets", {}, id="search"),
    ],
)
@pytest.mark.parametrize(
    "context",
    [
        # Where the brief says only "false": permission is exactly True, or forbidden
        # (the README's "Permission fails closed").
        pytest.param({"tenant": "alpha", "can_read_tickets": 1}, id="permission-1"),
        pytest.param({"tenant": "alpha", "can_read_tickets": "true"}, id="permission-string"),
        pytest.param({"tenant": "alpha"}, id="permission-missing"),
        pytest.param({"tenant": "", "can_read_tickets": True}, id="tenant-empty"),
        pytest.param({"tenant": None, "can_read_tickets": True}, id="tenant-null"),
        pytest.param({"can_read_tickets": True}, id="tenant-missing"),
    ],
)
def test_an_odd_context_is_forbidden(
    name: str, args: dict[str, object], context: Mapping[str, object]
) -> None:
    assert call(name, args, context) == fail("forbidden")


@pytest.mark.parametrize(
    ("context", "ticket_id"),
    [
        pytest.param(ALPHA, "TKT-103", id="alpha-asks-beta-103"),
        pytest.param(ALPHA, "TKT-108", id="alpha-asks-beta-108"),
        *(
            pytest.param(BETA, f"TKT-{n}", id=f"beta-asks-alpha-{n}")
            for n in (101, 102, 107, 110, 112, 115)
        ),
    ],
)
def test_another_tenants_id_is_not_found(context: Mapping[str, object], ticket_id: str) -> None:
    assert call("get_ticket", {"ticket_id": ticket_id}, context) == fail("not_found")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({"tenant": "beta"}, fail("invalid_arguments"), id="tenant-argument"),
        pytest.param(
            {"cursor": "beta:TKT-104"}, fail("invalid_arguments"), id="cursor-with-a-tenant"
        ),
        # Only titles are searched, so a query naming the other tenant is text.
        pytest.param({"query": "beta"}, page(next_cursor=None), id="query-naming-beta"),
        # Beta's TKT-103 as alpha's cursor is a position among alpha's ids.
        pytest.param(
            {"cursor": "TKT-103", "limit": 2},
            page(T104, T107, next_cursor="TKT-107"),
            id="beta-id-as-cursor",
        ),
        pytest.param(
            {"cursor": "TKT-108", "limit": 1},
            page(T110, next_cursor="TKT-110"),
            id="beta-only-id-as-cursor",
        ),
    ],
)
def test_no_argument_reaches_another_tenant(
    args: dict[str, object], expected: dict[str, object]
) -> None:
    assert call("search_tickets", args, ALPHA) == expected


# Tenants whose names run on from alpha's: "alphabet" starts with "alpha" (the key's ":"
# is part of the prefix), and "alpha:x" starts with "alpha:". A key belongs to the tenant
# before its last ":", so neither is alpha's (README, "Deviation from the brief").
ALPHABET_T001 = {"id": "TKT-001", "title": "Alphabet order lost", "status": "open"}
ALPHA_X_T002 = {"id": "TKT-002", "title": "Colon tenant export", "status": "open"}


def neighbour_records() -> dict[str, dict[str, str]]:
    return {
        **fixture_records(),
        "alphabet:TKT-001": dict(ALPHABET_T001),
        "alpha:x:TKT-002": dict(ALPHA_X_T002),
    }


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        pytest.param("alpha", page(*ALPHA_TICKETS, next_cursor=None), id="alpha"),
        pytest.param("alphabet", page(ALPHABET_T001, next_cursor=None), id="alphabet"),
        pytest.param("alpha:x", page(ALPHA_X_T002, next_cursor=None), id="alpha-colon-x"),
        pytest.param("alph", page(next_cursor=None), id="alph"),
    ],
)
def test_a_tenant_sees_no_key_of_a_tenant_whose_name_extends_its_own(
    tenant: str, expected: dict[str, object]
) -> None:
    context = {"tenant": tenant, "can_read_tickets": True}
    assert call("search_tickets", {"limit": 10}, context, neighbour_records()) == expected


@pytest.mark.parametrize(
    ("tenant", "ticket_id", "expected"),
    [
        pytest.param("alpha", "TKT-001", fail("not_found"), id="alpha-asks-alphabet-001"),
        pytest.param("alpha", "TKT-002", fail("not_found"), id="alpha-asks-alpha-x-002"),
        pytest.param("alphabet", "TKT-001", {"ok": True, "ticket": ALPHABET_T001}, id="alphabet"),
        pytest.param("alpha:x", "TKT-002", {"ok": True, "ticket": ALPHA_X_T002}, id="alpha-x"),
    ],
)
def test_get_ticket_reads_only_the_exact_key(
    tenant: str, ticket_id: str, expected: dict[str, object]
) -> None:
    context = {"tenant": tenant, "can_read_tickets": True}
    args = {"ticket_id": ticket_id}
    assert call("get_ticket", args, context, neighbour_records()) == expected


def test_no_internal_field_leaves() -> None:
    results = [
        call("search_tickets", {"limit": 10}, ALPHA),
        call("search_tickets", {"limit": 10}, BETA),
        *(call("get_ticket", {"ticket_id": i}, ALPHA) for i in ("TKT-101", "TKT-110")),
        call("get_ticket", {"ticket_id": "TKT-108"}, BETA),
    ]
    text = repr(results)
    assert [note for note in (*INTERNAL_NOTES, "internal_note") if note in text] == []


@pytest.mark.parametrize(
    ("name", "args", "context"),
    [
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, id="get"),
        pytest.param("get_ticket", {"ticket_id": "TKT-105"}, ALPHA, id="get-not-found"),
        pytest.param("get_ticket", {"ticket_id": ["TKT-104", {"x": [1]}]}, ALPHA, id="get-nested"),
        pytest.param("search_tickets", {}, ALPHA, id="search-empty"),
        pytest.param(
            "search_tickets",
            {"status": "open", "query": "login", "limit": 2, "cursor": "TKT-100"},
            ALPHA,
            id="search-all-four",
        ),
        pytest.param("search_tickets", {"limit": 11, "tenant": "beta"}, ALPHA, id="invalid"),
        pytest.param("search_tickets", {}, ALPHA_NO_READ, id="forbidden"),
        pytest.param("list_tickets", {"ticket_id": "TKT-104"}, ALPHA, id="unknown-tool"),
    ],
)
def test_records_args_and_context_are_never_modified(
    name: str, args: dict[str, object], context: Mapping[str, object]
) -> None:
    records = fixture_records()
    kept = copy.deepcopy((records, args, context))
    call(name, args, context, records)
    assert (records, args, context) == kept
    assert list(records) == list(kept[0])


def test_changing_a_result_changes_nothing() -> None:
    records = fixture_records()
    got = call("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, records)
    got["ticket"]["title"] = "Changed"  # type: ignore[index]
    found = call("search_tickets", {"limit": 2}, ALPHA, records)
    found["tickets"][0]["status"] = "closed"  # type: ignore[index]
    found["tickets"].append(BETA_T103)  # type: ignore[attr-defined]
    found["next_cursor"] = None
    assert list(records.items()) == list(fixture_records().items())
    assert call("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, records) == {
        "ok": True,
        "ticket": T104,
    }
    assert call("search_tickets", {"limit": 2}, ALPHA, records) == page(
        T101, T102, next_cursor="TKT-102"
    )
