"""The store interface's own rules (src/ticket_tools/store.py), apart from any store."""

from __future__ import annotations

from ticket_tools import fixture_records
from ticket_tools.store import DictStore, StoreError
from ticket_tools.stores.sqlite.store import SQLiteStore


def test_a_store_error_is_its_one_line_message() -> None:
    # Hosts print the message as is (docs/stores.md): it must survive unchanged.
    error = StoreError("tickets.db is locked by another process")
    assert (str(error), error.args) == (
        "tickets.db is locked by another process",
        ("tickets.db is locked by another process",),
    )


def test_a_store_that_reads_what_its_writers_write_is_never_behind() -> None:
    # The mapping and the SQLite file are their writers' own data: no replica to lag.
    sqlite = SQLiteStore.from_records(fixture_records())
    assert (DictStore(fixture_records()).staleness_seconds(), sqlite.staleness_seconds()) == (
        0.0,
        0.0,
    )
