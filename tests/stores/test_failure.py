"""A store failure (src/ticket_tools/stores/failure.py): StoreError, and one with a reason."""

from __future__ import annotations

from ticket_tools.stores import StoreError, StoreFailure


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


def test_a_store_error_is_its_one_line_message() -> None:
    # Hosts print the message as is (docs/stores.md): it must survive unchanged.
    error = StoreError("tickets.db is locked by another process")
    assert (str(error), error.args) == (
        "tickets.db is locked by another process",
        ("tickets.db is locked by another process",),
    )
