"""The title index's rows as a store holds them, and as a build from the tickets makes them.

Shared by the index's tests on both stores: after any write, the one must equal the other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

import psycopg

from testkit import titles
from ticket_tools import Records
from ticket_tools.stores.grams import build_rows, ticket_grams

IndexRows = dict[str, set[tuple[object, ...]]]


def index_rows(
    connection: sqlite3.Connection | psycopg.Connection,
) -> IndexRows:
    """Return the rows of the index's three tables, read by `connection` (as the owner)."""
    return {
        "title_grams": {
            (tenant, gram, int(bucket), bytes(offsets))
            for tenant, gram, bucket, offsets in connection.execute("SELECT * FROM title_grams")
        },
        "gram_counts": {
            (tenant, gram, int(count))
            for tenant, gram, count in connection.execute("SELECT * FROM gram_counts")
        },
        "tenant_sizes": {
            (tenant, int(count), bool(indexed))
            for tenant, count, indexed in connection.execute("SELECT * FROM tenant_sizes")
            if count  # a tenant emptied by a feed keeps its row; a build makes none
        },
    }


def expected_index(records: Records, indexed: Collection[str] | None = None) -> IndexRows:
    """The index rows a build makes from `records`: of the `indexed` tenants (None: all).

    Every tenant's size is kept; only the indexed ones' grams.
    """
    every: dict[str, list[tuple[str, str, str]]] = {}
    for key, ticket in sorted(records.items()):
        every.setdefault(key.rpartition(":")[0], []).append(
            (str(ticket["id"]), str(ticket["title"]), str(ticket["status"]))
        )
    by_tenant = {
        tenant: tickets for tenant, tickets in every.items() if indexed is None or tenant in indexed
    }
    grams = {
        tuple(row) for tenant, tickets in by_tenant.items() for row in build_rows(tenant, tickets)
    }
    counts: dict[tuple[str, str], int] = {}
    for tenant, tickets in by_tenant.items():
        for _, title, status in tickets:
            for gram in ticket_grams(title, status):
                counts[(tenant, gram)] = counts.get((tenant, gram), 0) + 1
    return {
        "title_grams": grams,
        "gram_counts": {(*key, count) for key, count in counts.items()},
        "tenant_sizes": {
            (tenant, len(tickets), tenant in by_tenant) for tenant, tickets in every.items()
        },
    }


def big_and_small(big: int) -> Records:
    """Tenant `big` with `big` tickets of testkit's titles and `small` with 50, 6-digit IDs."""
    return {
        f"{tenant}:{ticket_id}": {"id": ticket_id, "title": title, "status": status}
        for tenant, count, seed in (("big", big, "big tenant"), ("small", 50, "small"))
        for ticket_id, title, status in titles.tickets(count, width=6, seed=seed)
    }
