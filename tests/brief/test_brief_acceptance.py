"""The brief's thirteen acceptance calls, A1-A13, each against its whole expected result.

Also proves that `ticket_tools.fixture_records()` is the brief's fixture table, row by row
in insertion order, and that `make run` (print_acceptance.py) prints each of the 13 calls
against the same expected results, written once in `brief_table.py`.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import pytest

from brief_calls import call
from brief_table import ACCEPTANCE, FIXTURE_ROWS
from print_acceptance import run
from ticket_tools import fixture_records


@pytest.mark.parametrize("through_store", [False, True], ids=["records", "dict-store"])
@pytest.mark.parametrize(
    ("context", "name", "args", "expected"),
    [
        pytest.param(row.context, row.name, row.args, row.expected, id=row.label)
        for row in ACCEPTANCE
    ],
)
def test_acceptance_call(
    context: Mapping[str, object],
    name: str,
    args: dict[str, object],
    expected: dict[str, object],
    through_store: bool,
) -> None:
    # On the records dict, as the brief calls it, and through the TicketStore interface
    # that a database store would implement instead.
    assert call(name, args, context, through_store=through_store) == expected


def test_the_table_has_the_briefs_thirteen_calls() -> None:
    assert [row.label for row in ACCEPTANCE] == [f"A{n}" for n in range(1, 14)]


A1_LINE = (
    'PASS A1  [alpha, can read] get_ticket {"ticket_id": "TKT-104"} -> '
    '{"ok": true, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}}'
)
A11_LINE = 'PASS A11 [alpha, cannot read] search_tickets {} -> {"ok": false, "code": "forbidden"}'


def test_make_run_prints_thirteen_passes() -> None:
    out = io.StringIO()
    assert run(out) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:13]] == [["PASS", row.label] for row in ACCEPTANCE]
    assert (lines[0], lines[10], lines[13:]) == (A1_LINE, A11_LINE, ["13 passed, 0 failed"])


def test_make_run_prints_what_was_expected_of_a_call_that_fails() -> None:
    records = fixture_records()
    records["alpha:TKT-104"]["title"] = "Changed"
    out = io.StringIO()
    assert run(out, records) == 2
    lines = out.getvalue().splitlines()
    assert lines[:2] == [
        A1_LINE.replace("Settings crash", "Changed").replace("PASS", "FAIL"),
        '         expected {"ok": true, "ticket": '
        '{"id": "TKT-104", "title": "Settings crash", "status": "open"}}',
    ]
    assert lines[-1] == "11 passed, 2 failed"  # A2 shows TKT-104 too


def test_the_fixture_store_is_the_briefs_table() -> None:
    records = fixture_records()
    assert list(records.items()) == list(FIXTURE_ROWS)
    # Each stored ticket reads id, title, status, then any internal field.
    assert [list(ticket) for ticket in records.values()] == [
        list(ticket) for _, ticket in FIXTURE_ROWS
    ]


def test_each_fixture_store_is_a_fresh_copy() -> None:
    first = fixture_records()
    first["alpha:TKT-104"]["title"] = "Changed"
    del first["beta:TKT-104"]
    assert list(fixture_records().items()) == list(FIXTURE_ROWS)
