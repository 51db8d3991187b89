"""Why a store cannot answer: StoreError, which hosts report, and the reason a host branches on."""

from __future__ import annotations

from typing import Literal


class StoreError(Exception):
    """The store cannot answer (an infrastructure failure, never a model mistake).

    Tool results have no code for this, so a store raises it instead of answering,
    and the host (the CLI, a server) reports its one-line message.
    """


FailureReason = Literal["missing", "locked", "schema", "unavailable", "privileged"]
"""Why a store cannot answer: no such database, another process holds a lock, the
file is not a ticket database of this schema version, any other I/O failure, or a
database connection whose role could bypass row-level security (refused)."""


class StoreFailure(StoreError):  # noqa: N818 - a StoreError that names its failure
    """A StoreError from a database store: `reason` says which failure; never parse the text."""

    def __init__(self, reason: FailureReason, message: str) -> None:
        super().__init__(message)
        self.reason: FailureReason = reason
