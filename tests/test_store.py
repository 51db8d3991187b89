"""The store interface's own rules (src/ticket_tools/store.py), apart from any store."""

from __future__ import annotations

from ticket_tools.store import StoreError


def test_a_store_error_carries_its_reason_and_its_message() -> None:
    # Hosts branch on `reason` and print the message as is (docs/stores.md): both must survive.
    error = StoreError("locked", "tickets.db is locked by another process")
    assert (error.reason, str(error), error.args) == (
        "locked",
        "tickets.db is locked by another process",
        ("tickets.db is locked by another process",),
    )
