"""get_ticket: the starting adapter's six checks, in order, on its own two fixtures."""

from __future__ import annotations

import copy

import pytest

from brief_table import STARTING_ROWS
from conftest import StoreFactory
from expected import (
    ALPHA,
    ALPHA_NO_READ,
    BETA,
    BETA_T104,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    T104,
    UNKNOWN,
)
from ticket_tools import execute_tool, fixture_records

# The starting adapter's fixtures: the brief's first two rows.
STARTING_RECORDS = dict(STARTING_ROWS)
ALPHA_104 = {"ok": True, "ticket": T104}
BETA_104 = {"ok": True, "ticket": BETA_T104}


@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        # Success: a fresh copy of exactly id, title, status.
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, ALPHA_104, id="ok-alpha"),
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, BETA, BETA_104, id="ok-beta"),
        # 1. unknown_tool: the name is not exactly a registered name.
        pytest.param("Get_Ticket", {"ticket_id": "TKT-104"}, ALPHA, UNKNOWN, id="1-case"),
        pytest.param("get_ticket ", {"ticket_id": "TKT-104"}, ALPHA, UNKNOWN, id="1-space"),
        pytest.param("get_tickets", {"ticket_id": "TKT-104"}, ALPHA, UNKNOWN, id="1-plural"),
        # 2. invalid_arguments: args is not a plain object.
        pytest.param("get_ticket", None, ALPHA, INVALID, id="2-null"),
        pytest.param("get_ticket", ["TKT-104"], ALPHA, INVALID, id="2-array"),
        pytest.param("get_ticket", "TKT-104", ALPHA, INVALID, id="2-string"),
        pytest.param("get_ticket", 104, ALPHA, INVALID, id="2-number"),
        pytest.param("get_ticket", 1.5, ALPHA, INVALID, id="2-float"),
        pytest.param("get_ticket", True, ALPHA, INVALID, id="2-boolean"),
        pytest.param("get_ticket", ("ticket_id", "TKT-104"), ALPHA, INVALID, id="2-tuple"),
        # 3. invalid_arguments: a key other than ticket_id, or no ticket_id.
        pytest.param("get_ticket", {}, ALPHA, INVALID, id="3-empty"),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104", "tenant": "alpha"},
            ALPHA,
            INVALID,
            id="3-tenant-matching-trusted",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104", "tenant": "beta"},
            ALPHA,
            INVALID,
            id="3-tenant-other",
        ),
        pytest.param("get_ticket", {"id": "TKT-104"}, ALPHA, INVALID, id="3-wrong-key"),
        pytest.param("get_ticket", {"Ticket_Id": "TKT-104"}, ALPHA, INVALID, id="3-key-case"),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-104", "limit": 5}, ALPHA, INVALID, id="3-extra"
        ),
        # 4. invalid_arguments: ticket_id is not TKT- and exactly three digits 0-9.
        pytest.param("get_ticket", {"ticket_id": None}, ALPHA, INVALID, id="4-null"),
        pytest.param("get_ticket", {"ticket_id": 104}, ALPHA, INVALID, id="4-number"),
        pytest.param("get_ticket", {"ticket_id": ["TKT-104"]}, ALPHA, INVALID, id="4-list"),
        pytest.param("get_ticket", {"ticket_id": ""}, ALPHA, INVALID, id="4-empty"),
        pytest.param("get_ticket", {"ticket_id": "TKT-10"}, ALPHA, INVALID, id="4-6-chars"),
        pytest.param("get_ticket", {"ticket_id": "TKT-1040"}, ALPHA, INVALID, id="4-8-chars"),
        pytest.param("get_ticket", {"ticket_id": "tkt-104"}, ALPHA, INVALID, id="4-lowercase"),
        pytest.param("get_ticket", {"ticket_id": "TKT104"}, ALPHA, INVALID, id="4-no-dash"),
        pytest.param("get_ticket", {"ticket_id": "TKT-10a"}, ALPHA, INVALID, id="4-letter"),
        pytest.param("get_ticket", {"ticket_id": " TKT-104"}, ALPHA, INVALID, id="4-lead-space"),
        pytest.param("get_ticket", {"ticket_id": "TKT-104\n"}, ALPHA, INVALID, id="4-newline"),
        pytest.param("get_ticket", {"ticket_id": "TKT-١٠٤"}, ALPHA, INVALID, id="4-arabic"),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-\uff11\uff10\uff14"}, ALPHA, INVALID, id="4-fullwidth"
        ),
        pytest.param(
            "get_ticket", {"ticket_id": "alpha:TKT-104"}, BETA, INVALID, id="4-key-smuggle"
        ),
        # 5. forbidden: the session may not read tickets.
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, ALPHA_NO_READ, FORBIDDEN, id="5"),
        # 6. not_found: no record under tenant + ":" + ticket_id.
        pytest.param("get_ticket", {"ticket_id": "TKT-105"}, ALPHA, NOT_FOUND, id="6-missing"),
        pytest.param("get_ticket", {"ticket_id": "TKT-000"}, BETA, NOT_FOUND, id="6-lowest"),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104"},
            {"tenant": "gamma", "can_read_tickets": True},
            NOT_FOUND,
            id="6-tenant-without-tickets",
        ),
    ],
)
def test_get_ticket_rules(
    make_store: StoreFactory,
    name: str,
    args: object,
    context: dict[str, object],
    expected: dict[str, object],
) -> None:
    records = copy.deepcopy(STARTING_RECORDS)
    assert execute_tool(name, args, context, make_store(records)) == expected
    assert records == STARTING_RECORDS


@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        pytest.param("list_tickets", None, ALPHA_NO_READ, UNKNOWN, id="unknown-before-invalid"),
        pytest.param("get_ticket", None, ALPHA_NO_READ, INVALID, id="not-object-before-forbidden"),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104", "tenant": "alpha"},
            ALPHA_NO_READ,
            INVALID,
            id="extra-key-before-forbidden",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-1"},
            ALPHA_NO_READ,
            INVALID,
            id="bad-id-before-forbidden",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-105"},
            ALPHA_NO_READ,
            FORBIDDEN,
            id="missing-ticket-without-permission-is-forbidden",
        ),
        pytest.param("get_ticket", {"ticket_id": "TKT-105"}, ALPHA, NOT_FOUND, id="not-found-last"),
    ],
)
def test_get_ticket_check_order(
    make_store: StoreFactory,
    name: str,
    args: object,
    context: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert execute_tool(name, args, context, make_store(fixture_records())) == expected


@pytest.mark.parametrize(
    ("context", "ticket_id", "expected"),
    [
        pytest.param(ALPHA, "TKT-101", "Login fails after password reset", id="alpha-internal"),
        pytest.param(BETA, "TKT-108", "Login fails after SSO change", id="beta-internal"),
    ],
)
def test_get_ticket_never_returns_internal_fields(
    make_store: StoreFactory, context: dict[str, object], ticket_id: str, expected: str
) -> None:
    result = execute_tool(
        "get_ticket", {"ticket_id": ticket_id}, context, make_store(fixture_records())
    )
    assert result == {
        "ok": True,
        "ticket": {"id": ticket_id, "title": expected, "status": "open"},
    }


def test_another_tenants_ticket_is_not_found(make_store: StoreFactory) -> None:
    # TKT-108 exists only in beta: alpha is told nothing about it.
    result = execute_tool(
        "get_ticket", {"ticket_id": "TKT-108"}, ALPHA, make_store(fixture_records())
    )
    assert result == NOT_FOUND
