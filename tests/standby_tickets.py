"""A primary and hot standbys holding tickets, set up as every replication test needs them.

The owner role owns the `tickets` database, the records are imported into it on the
primary (granted to the reader role, if any), and `testkit.postgres.replicated` copies the
whole cluster, roles and forced row-level security included, to each standby.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from conftest import OWNER, READER
from testkit.postgres import ReplicatedClusters, ThrowawayCluster, create_tickets, replicated
from ticket_tools import Records


def replicated_tickets(
    records: Records, *, standbys: int = 1, reader: str | None = READER
) -> AbstractContextManager[ReplicatedClusters]:
    """Return a block holding a primary with `records` imported and `standbys` standbys."""

    def setup(primary: ThrowawayCluster) -> None:
        create_tickets(primary, records, owner=OWNER, reader=reader)

    return replicated(standbys, setup)
