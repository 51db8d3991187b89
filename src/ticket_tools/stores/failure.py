"""Why a database store cannot answer: the reason a host branches on, beside the message."""

from __future__ import annotations

from typing import Literal

from ticket_tools.store import StoreError

FailureReason = Literal["missing", "locked", "schema", "unavailable", "privileged"]
"""Why a store cannot answer: no such database, another process holds a lock, the
file is not a ticket database of this schema version, any other I/O failure, or a
database connection whose role could bypass row-level security (refused)."""


class StoreFailure(StoreError):  # noqa: N818 - a StoreError that names its failure
    """A StoreError from a database store: `reason` says which failure; never parse the text."""

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason: FailureReason = reason
