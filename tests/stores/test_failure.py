"""A database store's failure (src/ticket_tools/stores/failure.py): a StoreError with a reason."""

from __future__ import annotations

from ticket_tools.store import StoreError
from ticket_tools.stores import StoreFailure


def test_a_store_failure_carries_its_reason_and_its_message() -> None:
    # Hosts branch on `reason` and print the message as is (docs/stores.md): both must
    # survive, and every host that catches StoreError (the CLI) catches it too.
    error = StoreFailure("locked", "tickets.db is locked by another process")
    assert (isinstance(error, StoreError), error.reason, str(error), error.args) == (
        True,
        "locked",
        "tickets.db is locked by another process",
        ("tickets.db is locked by another process",),
    )
