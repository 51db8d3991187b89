"""Shared fixtures: the stores every contract suite runs against, and hypothesis profiles.

pytest loads this file for tests/brief too, which runs where only pytest is installed
(`make test-brief`): so psycopg and hypothesis are imported here only inside the hook and
fixtures that need them, never at the top.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from testkit.postgres import ThrowawayCluster, find_binaries
from ticket_tools import Records, TicketStore
from ticket_tools.stores.records import record_rows
from ticket_tools.stores.sqlite.store import SQLiteStore

# A shell that starts the suite in the background (`make test &`, nohup) hands it SIGINT
# ignored, and a child inherits that: the tests that press Ctrl-C on a real command
# would then see it ignored. Handled here, SIGINT is back to its default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if TYPE_CHECKING:
    import psycopg


def pytest_configure(config: pytest.Config) -> None:
    """Register and load the hypothesis profiles, where hypothesis is installed."""
    # Absent only in the brief's environment, whose suite has no property test; every other
    # suite imports hypothesis itself, so a missing install still fails there.
    if importlib.util.find_spec("hypothesis") is None:
        return
    from hypothesis import HealthCheck, Phase, settings  # noqa: PLC0415 - optional here

    settings.register_profile("default", max_examples=200, deadline=None)
    # `make fuzz`: the deep run over many generated calls.
    settings.register_profile(
        "deep",
        max_examples=100_000,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # `make mutate`: the default profile's examples, the same every run (so a score can be
    # reproduced), without shrinking: a mutant needs a failing example, not the smallest one.
    settings.register_profile(
        "mutation",
        parent=settings.get_profile("default"),
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Run the async tests and fixtures on asyncio, the MCP SDK's own default."""
    return "asyncio"


StoreFactory = Callable[[Records], Records | TicketStore]

STORE_FACTORIES: dict[str, StoreFactory] = {
    # The contract's own shape: execute_tool wraps the plain dict in a DictStore.
    "dict": lambda records: records,
    # The same records in an in-memory SQLite table (internal fields dropped at import).
    "sqlite": SQLiteStore.from_records,
}


# The same records in a PostgreSQL table, read as the reader role (see `postgres_factory`).
STORE_KINDS = sorted([*STORE_FACTORIES, "postgres"])


@pytest.fixture(params=STORE_KINDS, scope="session")
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """Turn a records dict into each kind of store the contract suites must hold for."""
    if request.param == "postgres":
        factory: StoreFactory = request.getfixturevalue("postgres_factory")
        return factory
    return STORE_FACTORIES[request.param]


# --- PostgreSQL: one throwaway cluster and one database per session ---

OWNER = "ticket_owner"
READER = "ticket_reader"
DATABASE = "tickets"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[ThrowawayCluster]:
    """Start a throwaway cluster (unix socket only, fsync off); stop and remove it at the end."""
    binaries = find_binaries()
    if binaries is None:
        reason = "no PostgreSQL server: install the dev extra or set TICKET_TOOLS_PG_BIN"
        # A green CI must mean the PostgreSQL tests ran.
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; under CI=true the PostgreSQL tests may not skip")
        pytest.skip(reason)
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@dataclass(frozen=True)
class PostgresDatabase:
    """The session's ticket database: its cluster and the DSN of each role."""

    cluster: ThrowawayCluster
    superuser: str
    owner: str
    reader: str


@pytest.fixture(scope="session")
def postgres_database(postgres_cluster: ThrowawayCluster) -> PostgresDatabase:
    """Create the owner and reader roles and a tickets table (empty) as docs/postgres.md does."""
    import psycopg  # noqa: PLC0415 - not in the brief's environment

    from ticket_tools.stores.postgres.importer import import_records  # noqa: PLC0415

    superuser = postgres_cluster.dsn()
    with psycopg.connect(superuser, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {OWNER} LOGIN")
        connection.execute(f"CREATE ROLE {READER} LOGIN")
        connection.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER}")
    owner = postgres_cluster.dsn(OWNER, DATABASE)
    with psycopg.connect(owner) as connection:
        import_records(connection, {}, grant_to=READER)
    return PostgresDatabase(
        postgres_cluster,
        postgres_cluster.dsn(dbname=DATABASE),
        owner,
        postgres_cluster.dsn(READER, DATABASE),
    )


@pytest.fixture(scope="session")
def postgres_factory(postgres_database: PostgresDatabase) -> Iterator[StoreFactory]:
    """Reimport the table as the owner for each records set; read it through one reader store.

    The same store object is returned each time: a store made earlier sees the later
    records, which no contract test notices (each finishes with a store before making
    the next). Importing the same records again is skipped.
    """
    import psycopg  # noqa: PLC0415 - not in the brief's environment

    from ticket_tools.stores.postgres.importer import (  # noqa: PLC0415 - imports psycopg
        import_records,
        nul_free,
    )
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

    store = PostgresStore.open(postgres_database.reader)
    owner: list[psycopg.Connection] = []
    imported: list[object] = [None]

    def reimport(records: Records) -> None:
        if not owner or owner[0].closed:
            owner[:] = [psycopg.connect(postgres_database.owner)]
        with owner[0].transaction():
            owner[0].execute("TRUNCATE tickets, tombstones")
            import_records(owner[0], records)

    def make(records: Records) -> TicketStore:
        rows = list(nul_free(record_rows(records)))
        if rows != imported[0]:
            try:
                reimport(records)
            except psycopg.OperationalError:
                # A fault test restarted the cluster since the last import: reconnect once.
                reimport(records)
            imported[0] = rows
        return store

    try:
        yield make
    finally:
        store.close()
        for connection in owner:
            connection.close()


@pytest.fixture
def scratch(postgres_database: PostgresDatabase) -> Iterator[str]:
    """A new empty database owned by the owner role, dropped afterwards; yields its name."""
    import psycopg  # noqa: PLC0415 - not in the brief's environment

    name = "scratch"
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
    try:
        yield name
    finally:
        with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")
