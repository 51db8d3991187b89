"""The store interface's own rules (src/ticket_tools/store.py), apart from any store."""

from __future__ import annotations

from ticket_tools import fixture_records
from ticket_tools.store import DictStore
from ticket_tools.stores.sqlite.store import SQLiteStore


def test_a_store_that_reads_what_its_writers_write_is_never_behind() -> None:
    # The mapping and the SQLite file are their writers' own data: no replica to lag.
    sqlite = SQLiteStore.from_records(fixture_records())
    assert (DictStore(fixture_records()).staleness_seconds(), sqlite.staleness_seconds()) == (
        0.0,
        0.0,
    )
