"""The store interface's own rules (src/ticket_tools/store.py), apart from any store."""

from __future__ import annotations

from ticket_tools.store import StoreError


def test_a_store_error_is_its_one_line_message() -> None:
    # Hosts print the message as is (docs/stores.md): it must survive unchanged.
    error = StoreError("tickets.db is locked by another process")
    assert (str(error), error.args) == (
        "tickets.db is locked by another process",
        ("tickets.db is locked by another process",),
    )
