"""A primary and hot standbys holding tickets, set up as every replication test needs them.

The owner role owns the `tickets` database, the records are imported into it on the
primary (granted to the reader role, if any), and `testkit.postgres.replicated` copies the
whole cluster, roles and forced row-level security included, to each standby.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import psycopg

from conftest import OWNER, READER
from testkit.postgres import ReplicatedClusters, ThrowawayCluster, replicated
from ticket_tools import Records
from ticket_tools.stores.postgres.importer import import_records


def replicated_tickets(
    records: Records, *, standbys: int = 1, reader: str | None = READER
) -> AbstractContextManager[ReplicatedClusters]:
    """Return a block holding a primary with `records` imported and `standbys` standbys."""

    def setup(primary: ThrowawayCluster) -> None:
        with psycopg.connect(primary.dsn(), autocommit=True) as connection:
            connection.execute(f"CREATE ROLE {OWNER} LOGIN")
            if reader is not None:
                connection.execute(f"CREATE ROLE {reader} LOGIN")
            connection.execute(f"CREATE DATABASE tickets OWNER {OWNER}")
        with psycopg.connect(primary.dsn(OWNER, "tickets")) as connection:
            import_records(connection, records, grant_to=reader)

    return replicated(standbys, setup)
