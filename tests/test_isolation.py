"""Tenant isolation and copies: no argument changes whose tickets are read; nothing leaks out."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import StoreFactory
from expected import ALPHA, BETA, BETA_T104, INVALID, T101, T104, T110
from strategies import CANARY_FIELD, TENANTS, multi_tenant_stores, search_args
from ticket_tools import execute_tool, fixture_records

ALPHABET = {"tenant": "alphabet", "can_read_tickets": True}
PUBLIC_FIELDS = {"id", "title", "status"}


def ticket(ticket_id: str, title: str, status: str = "open") -> dict[str, str]:
    return {"id": ticket_id, "title": title, "status": status}


def page(tickets: list[dict[str, str]], next_cursor: str | None = None) -> dict[str, object]:
    return {"ok": True, "tickets": tickets, "next_cursor": next_cursor}


# Tenants whose names prefix each other, sharing ids with each other.
PREFIX_RECORDS = {
    "alpha:TKT-001": {**ticket("TKT-001", "alpha one"), "internal_note": "a1"},
    "alphabet:TKT-001": {**ticket("TKT-001", "alphabet one"), "internal_note": "ab1"},
    "alphabet:TKT-002": {**ticket("TKT-002", "alphabet two"), "internal_note": "ab2"},
    "alph:TKT-003": {**ticket("TKT-003", "alph three"), "internal_note": "a3"},
}

# Keys a database import refuses (see test_sqlite_store), so only the dict holds them.
MALFORMED_KEY_RECORDS = {
    "alpha:TKT-001": ticket("TKT-001", "alpha one"),
    "alpha:x:TKT-002": ticket("TKT-002", "tenant alpha:x"),
    "alpha::TKT-003": ticket("TKT-003", "tenant alpha:"),
    "TKT-004": ticket("TKT-004", "no tenant at all"),
    ":TKT-005": ticket("TKT-005", "empty tenant"),
}


@pytest.mark.parametrize(
    ("context", "name", "args", "expected"),
    [
        pytest.param(
            ALPHA, "search_tickets", {}, page([ticket("TKT-001", "alpha one")]), id="alpha-search"
        ),
        pytest.param(
            ALPHABET,
            "search_tickets",
            {},
            page([ticket("TKT-001", "alphabet one"), ticket("TKT-002", "alphabet two")]),
            id="alphabet-search",
        ),
        pytest.param(
            {"tenant": "alph", "can_read_tickets": True},
            "search_tickets",
            {},
            page([ticket("TKT-003", "alph three")]),
            id="alph-search",
        ),
        pytest.param(
            ALPHA,
            "get_ticket",
            {"ticket_id": "TKT-001"},
            {"ok": True, "ticket": ticket("TKT-001", "alpha one")},
            id="alpha-get-shared-id",
        ),
        pytest.param(
            ALPHA,
            "get_ticket",
            {"ticket_id": "TKT-002"},
            {"ok": False, "code": "not_found"},
            id="alpha-get-alphabet-only-id",
        ),
        pytest.param(
            ALPHABET,
            "get_ticket",
            {"ticket_id": "TKT-001"},
            {"ok": True, "ticket": ticket("TKT-001", "alphabet one")},
            id="alphabet-get-shared-id",
        ),
        pytest.param(
            {"tenant": "al", "can_read_tickets": True},
            "search_tickets",
            {},
            page([]),
            id="shorter-prefix-sees-nothing",
        ),
    ],
)
def test_prefix_tenants_stay_apart(
    make_store: StoreFactory,
    context: dict[str, object],
    name: str,
    args: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert execute_tool(name, args, context, make_store(copy.deepcopy(PREFIX_RECORDS))) == expected


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        pytest.param(ALPHA, T104, id="alpha"),
        pytest.param(BETA, BETA_T104, id="beta"),
    ],
)
def test_shared_ticket_104_reads_the_sessions_own(
    make_store: StoreFactory, context: dict[str, object], expected: dict[str, str]
) -> None:
    store = make_store(fixture_records())
    assert execute_tool("get_ticket", {"ticket_id": "TKT-104"}, context, store) == {
        "ok": True,
        "ticket": expected,
    }
    result = execute_tool("search_tickets", {"cursor": "TKT-103", "limit": 1}, context, store)
    assert result == page([expected], "TKT-104")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({"tenant": "beta"}, INVALID, id="tenant-argument"),
        pytest.param({"cursor": "beta:TKT-104"}, INVALID, id="cursor-with-tenant"),
        pytest.param({"cursor": "TKT-103", "tenant": "beta"}, INVALID, id="cursor-and-tenant"),
        # Only titles are searched, so a query naming a tenant is just text.
        pytest.param({"query": "beta:"}, page([]), id="query-naming-tenant"),
        # TKT-108 is beta's: as an alpha cursor it is only a position among alpha's ids.
        pytest.param(
            {"cursor": "TKT-108", "limit": 1},
            page([T110], "TKT-110"),
            id="cursor-of-a-beta-id",
        ),
    ],
)
def test_no_argument_reaches_another_tenant(
    make_store: StoreFactory, args: dict[str, object], expected: dict[str, object]
) -> None:
    assert execute_tool("search_tickets", args, ALPHA, make_store(fixture_records())) == expected


def test_beta_changes_do_not_change_alphas_results(make_store: StoreFactory) -> None:
    calls = [
        ("search_tickets", {}),
        ("search_tickets", {"limit": 10}),
        ("search_tickets", {"query": "login"}),
        ("search_tickets", {"cursor": "TKT-103", "limit": 2}),
        ("get_ticket", {"ticket_id": "TKT-104"}),
        ("get_ticket", {"ticket_id": "TKT-108"}),
    ]
    before = [execute_tool(n, a, ALPHA, make_store(fixture_records())) for n, a in calls]
    changed = fixture_records()
    del changed["beta:TKT-103"]
    changed["beta:TKT-104"]["title"] = "Login settings crash"
    changed["beta:TKT-100"] = ticket("TKT-100", "Login everywhere")
    changed["beta:TKT-111"] = ticket("TKT-111", "Login again")
    after = [execute_tool(n, a, ALPHA, make_store(changed)) for n, a in calls]
    assert after == before


@given(
    records=multi_tenant_stores(),
    tenant=st.sampled_from(TENANTS),
    args=search_args(),
    other_changes=multi_tenant_stores(),
)
def test_results_depend_only_on_the_sessions_own_tickets(
    make_store: StoreFactory,
    records: dict[str, dict[str, object]],
    tenant: str,
    args: dict[str, object],
    other_changes: dict[str, dict[str, object]],
) -> None:
    prefix = f"{tenant}:"
    context = {"tenant": tenant, "can_read_tickets": True}
    # Replace every other tenant's tickets with unrelated ones.
    own = {k: v for k, v in records.items() if k.startswith(prefix)}
    others = {k: v for k, v in other_changes.items() if not k.startswith(prefix)}
    result = execute_tool("search_tickets", args, context, make_store(records))
    assert execute_tool("search_tickets", args, context, make_store({**others, **own})) == result
    # Every returned ticket is one of the session's own, with the public fields only.
    assert result["ok"] is True
    for found in result["tickets"]:  # type: ignore[attr-defined]
        stored = own[f"{prefix}{found['id']}"]
        assert found == {field: stored[field] for field in PUBLIC_FIELDS}


def _every_call(
    records: dict[str, dict[str, object]],
) -> list[tuple[dict[str, object], str, dict[str, object]]]:
    calls: list[tuple[dict[str, object], str, dict[str, object]]] = []
    for key in records:
        tenant, _, ticket_id = key.partition(":")
        context = {"tenant": tenant, "can_read_tickets": True}
        calls.append((context, "get_ticket", {"ticket_id": ticket_id}))
        calls.append((context, "search_tickets", {"limit": 10}))
    return calls


@given(records=multi_tenant_stores())
def test_no_internal_field_ever_leaves(
    make_store: StoreFactory, records: dict[str, dict[str, object]]
) -> None:
    store = make_store(records)
    for context, name, args in _every_call(records):
        result = execute_tool(name, args, context, store)
        shown = [result["ticket"]] if name == "get_ticket" else result["tickets"]
        for found in shown:  # type: ignore[attr-defined]
            assert set(found) == PUBLIC_FIELDS
            assert CANARY_FIELD not in found


def test_fixture_internal_notes_never_leave(make_store: StoreFactory) -> None:
    store = make_store(fixture_records())
    results = [
        execute_tool("search_tickets", {"limit": 10}, ALPHA, store),
        execute_tool("search_tickets", {"limit": 10}, BETA, store),
        execute_tool("get_ticket", {"ticket_id": "TKT-101"}, ALPHA, store),
        execute_tool("get_ticket", {"ticket_id": "TKT-110"}, ALPHA, store),
        execute_tool("get_ticket", {"ticket_id": "TKT-108"}, BETA, store),
    ]
    text = repr(results)
    for note in ("internal_note", "Escalated", "Security review", "Refund approved"):
        assert note not in text


@pytest.mark.parametrize(
    ("name", "args", "context"),
    [
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, id="get"),
        pytest.param("get_ticket", {"ticket_id": "TKT-999"}, ALPHA, id="get-not-found"),
        pytest.param("search_tickets", {}, ALPHA, id="search-empty-args"),
        pytest.param(
            "search_tickets",
            {"status": "open", "query": "login", "limit": 2.0, "cursor": "TKT-100"},
            ALPHA,
            id="search-all-args",
        ),
        pytest.param("search_tickets", {"limit": 11, "tenant": "beta"}, ALPHA, id="search-invalid"),
        pytest.param(
            "search_tickets", {}, {"tenant": "alpha", "can_read_tickets": False}, id="forbidden"
        ),
        pytest.param("get_ticket", {"ticket_id": ["TKT-104", {"nested": [1]}]}, ALPHA, id="nested"),
    ],
)
def test_records_and_args_are_never_modified(
    make_store: StoreFactory, name: str, args: dict[str, object], context: dict[str, object]
) -> None:
    records = fixture_records()
    records_copy, args_copy, context_copy = (
        copy.deepcopy(records),
        copy.deepcopy(args),
        copy.deepcopy(context),
    )
    execute_tool(name, args, context, make_store(records))
    assert (records, args, context) == (records_copy, args_copy, context_copy)
    assert list(records) == list(records_copy)  # insertion order too


def test_mutating_a_result_cannot_change_the_store(make_store: StoreFactory) -> None:
    records = fixture_records()
    store = make_store(records)
    got = execute_tool("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, store)
    got["ticket"]["title"] = "Hacked"  # type: ignore[index]
    found = execute_tool("search_tickets", {"limit": 10}, ALPHA, store)
    found["tickets"][0]["status"] = "closed"  # type: ignore[index]
    found["tickets"].append(ticket("TKT-999", "Injected"))  # type: ignore[attr-defined]
    assert records == fixture_records()
    assert execute_tool("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, store) == {
        "ok": True,
        "ticket": T104,
    }
    assert execute_tool("search_tickets", {"limit": 1}, ALPHA, store) == page([T101], "TKT-101")


def test_results_are_fresh_each_call(make_store: StoreFactory) -> None:
    store = make_store(fixture_records())
    first = execute_tool("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, store)
    second = execute_tool("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, store)
    assert first == second
    assert first["ticket"] is not second["ticket"]


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        pytest.param("alpha", page([ticket("TKT-001", "alpha one")]), id="alpha"),
        pytest.param("alpha:x", page([ticket("TKT-002", "tenant alpha:x")]), id="colon-tenant"),
        pytest.param("alpha:", page([ticket("TKT-003", "tenant alpha:")]), id="trailing-colon"),
        pytest.param("alph", page([]), id="prefix-of-alpha"),
    ],
)
def test_a_key_belongs_to_the_tenant_before_its_last_colon(
    tenant: str, expected: dict[str, object]
) -> None:
    # The brief's "key starts with tenant + ':'" made exact: tenant names that
    # contain ':' cannot see each other's tickets.
    context = {"tenant": tenant, "can_read_tickets": True}
    assert execute_tool("search_tickets", {}, context, MALFORMED_KEY_RECORDS) == expected
