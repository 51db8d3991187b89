"""The brief's thirteen acceptance calls, A1-A13, each against its whole expected result.

Also proves that `ticket_tools.fixture_records()` is the brief's fixture table, row by row
in insertion order, and that the table `make run` prints (`ticket_tools.acceptance`) is
this one: the expected results are written once, in `brief_table.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from brief_calls import call
from brief_table import ACCEPTANCE, FIXTURE_ROWS
from ticket_tools import fixture_records
from ticket_tools.acceptance import CALLS


@pytest.mark.parametrize(
    ("context", "name", "args", "expected"),
    [
        pytest.param(row.context, row.name, row.args, row.expected, id=row.label)
        for row in ACCEPTANCE
    ],
)
def test_acceptance_call(
    context: Mapping[str, object], name: str, args: dict[str, object], expected: dict[str, object]
) -> None:
    assert call(name, args, context) == expected


def test_the_table_has_the_briefs_thirteen_calls() -> None:
    assert [row.label for row in ACCEPTANCE] == [f"A{n}" for n in range(1, 14)]


def test_make_run_checks_this_same_table() -> None:
    rows = [(c.label, c.context, c.name, c.args, c.expected) for c in CALLS]
    assert rows == [tuple(row) for row in ACCEPTANCE]


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
