"""How far behind its source a store reads: what `/readyz` compares with `--max-staleness`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ReadsReplica(Protocol):
    """A store that can read behind its source: PostgresStore, on a hot standby."""

    def staleness_seconds(self) -> float:
        """Return how many seconds what this store reads is behind (math.inf: cannot tell)."""
        ...


def staleness_seconds(store: object) -> float:
    """Return how many seconds `store` reads behind its source (0: not at all).

    A store that reads a replica says so itself (`ReadsReplica`). Any other store reads
    the very data its writers write (a mapping, an SQLite file), so is never behind: 0.
    """
    return store.staleness_seconds() if isinstance(store, ReadsReplica) else 0.0
