"""How far behind a store reads (src/ticket_tools/stores/staleness.py), apart from PostgreSQL.

A standby's own figure is tested on a real one (tests/stores/postgres/test_standby_staleness.py).
"""

from __future__ import annotations

import math

import pytest

from ticket_tools import DictStore, fixture_records
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.staleness import ReadsReplica, staleness_seconds


class _Behind(DictStore):
    """A store that says how far behind it reads: whatever the test set."""

    def __init__(self, behind: float) -> None:
        super().__init__(fixture_records())
        self.behind = behind

    def staleness_seconds(self) -> float:
        return self.behind


def test_a_store_that_reads_what_its_writers_write_is_never_behind() -> None:
    # The mapping and the SQLite file are their writers' own data: no replica to lag.
    with SQLiteStore.from_records(fixture_records()) as sqlite:
        stores = [DictStore(fixture_records()), sqlite, fixture_records()]
        assert [staleness_seconds(store) for store in stores] == [0.0, 0.0, 0.0]
        assert [isinstance(store, ReadsReplica) for store in stores] == [False, False, False]


@pytest.mark.parametrize("behind", [0.0, 2.5, math.inf])
def test_a_store_that_reads_a_replica_says_how_far_behind(behind: float) -> None:
    assert staleness_seconds(_Behind(behind)) == behind
