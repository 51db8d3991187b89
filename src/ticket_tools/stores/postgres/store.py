"""PostgresStore: the ticket store as a PostgreSQL table, with row-level security as a second wall.

Every call is one read-only transaction on a pooled connection: it first sets
`app.tenant` for that transaction only (`set_config(..., true)`), then runs the same
tenant-qualified keyset query as SQLite. The table's policy shows a connection only the
rows of the tenant it set, so a query that forgot its `tenant = ...` would return
that tenant's rows or none, never another tenant's. Needs the `postgres` extra.

A call has `timeout` seconds in all, waiting for a connection included: its statement's
`statement_timeout` is what is left of them. A host that froze never answers, not even
that timeout, so each connection's waits end `FROZEN_GRACE` later (`deadline.py`); the
connection is then dropped, the pool's idle ones with it, and new connections leave
that host out for a while (`hosts.py`): the next call answers from another host of a
multi-host DSN (docs/postgres.md).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable

import psycopg
from psycopg_pool import ConnectionPool

from ticket_tools.filters import TicketFilter
from ticket_tools.store import TicketStore
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.keyset_sql import PageStatements
from ticket_tools.stores.postgres.deadline import DeadlineConnection
from ticket_tools.stores.postgres.hosts import HostList
from ticket_tools.stores.postgres.schema import (
    check_connection,
    check_schema,
    describe,
    store_error,
)
from ticket_tools.stores.records import is_text
from ticket_tools.tickets import Ticket

# How long one call may take: waiting for a pooled connection, connecting, and the
# statement itself (its statement_timeout). Past it the call fails as "unavailable".
DEFAULT_TIMEOUT = 5.0
# Connections one store may hold; each serves one call at a time.
DEFAULT_MAX_CONNECTIONS = 4
# How long past a call's timeout a server that has not answered is taken as frozen: its
# own statement_timeout ends the call before, on any server that still runs, even a
# loaded one, so a healthy host is never left out for a slow statement.
FROZEN_GRACE = 0.5
# The largest LIMIT PostgreSQL takes (a bigint); a larger limit is no limit.
_MAX_LIMIT = 2**63 - 1

# Transaction-local (the `true`): both settings end with the call's transaction, so
# they cannot leak to the next borrower of the pooled connection.
_SCOPE_SQL = "SELECT set_config('app.tenant', %s, true), set_config('statement_timeout', %s, true)"
_GET_SQL = "SELECT id, title, status FROM tickets WHERE tenant = %s AND id = %s"
# How far the server is behind its primary, from what any role may read (docs/postgres.md,
# "Staleness"): caught up, when not a standby, or when a WAL receiver is connected to the
# primary and everything received is replayed; else the age of the last replayed commit (NULL
# when none since the standby started); and which server instance answered. The receiver's
# status and message times are hidden without pg_read_all_stats, but its row is not, and the
# row shows only once the receiver has connected.
_STALENESS_SQL = """
SELECT NOT pg_is_in_recovery()
           OR coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), false)
              AND EXISTS (SELECT FROM pg_stat_wal_receiver),
       extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8,
       pg_postmaster_start_time()::text
"""
_STALENESS_TENANT = ""  # the staleness reads no ticket: scoped to a tenant no ticket has
_now = time.monotonic  # the clock of the caught-up memory (a test sets its own)


# One fixed statement per filter combination, each read along the primary key.
# `id > cursor` is written `id >= _lower_bound(cursor)`: the bound is storable text
# even when the cursor is not. The text filter is a literal substring of
# Python-lowered text: no wildcards, no PostgreSQL lower().
_PAGE = PageStatements(
    tenant="tenant = %s",
    after="id >= %s",
    status="status = %s",
    text="strpos(title_lower, %s) > 0",
    limit="%s",
)


class PostgresStore(TicketStore):
    """Tickets in a PostgreSQL table, read through a bounded pool; safe to share across threads.

    Open it with `open(dsn)` as the reader role; close it with `close()` or a `with`
    block (it also closes when collected). A call that loses its connection is tried
    once more on a fresh one, so the first call after the server comes back answers.
    """

    _caught_up: tuple[str, float] | None = None
    """The server instance last seen caught up by `staleness_seconds`, and when (`_now`)."""

    def __init__(
        self, pool: ConnectionPool[DeadlineConnection], source: str, *, timeout: float
    ) -> None:
        """Wrap an open pool whose connections `check_connection` has configured."""
        self._pool = pool
        self._source = source
        self._timeout = timeout
        self._close = weakref.finalize(self, pool.close)

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        id_format: IdFormat = ID_FORMAT,
    ) -> PostgresStore:
        """Connect as the reader role; refuse a role that could bypass the policy.

        Raises StoreFailure: "privileged" for a superuser, BYPASSRLS or owner role,
        "schema" for a database without this schema version's table and policy, or
        whose table was made for IDs of another width than `id_format`,
        "unavailable" for any other failure (no server, no such database or role).
        """
        source = describe(dsn)
        # libpq takes whole seconds, and reads 1 as 2.
        connect_timeout = max(2, math.ceil(timeout))
        try:
            with psycopg.connect(dsn, connect_timeout=connect_timeout) as connection:
                check_connection(connection, source)
                check_schema(connection, source, id_format)
        except psycopg.Error as error:
            raise store_error(error, source, "connect to") from None
        hosts = HostList(dsn)
        pool: ConnectionPool[DeadlineConnection] = ConnectionPool(
            # Asked at each new connection: the DSN less the hosts found frozen lately.
            hosts.conninfo,
            connection_class=DeadlineConnection,
            kwargs={"connect_timeout": connect_timeout},
            min_size=1,
            max_size=max_connections,
            open=False,
            # Every new connection is checked again: a role changed since `open` never serves.
            configure=lambda connection: _configure(connection, source, timeout, frozen),
            timeout=timeout,
            # Give up a failing reconnect soon: the next call then connects at once,
            # instead of waiting out an exponential backoff that grew during an outage.
            reconnect_timeout=timeout,
            name="ticket-tools",
        )

        def frozen(host: str, port: int) -> None:
            # Told before the frozen connection goes back to the pool, so that its
            # replacement already leaves the host out; its idle siblings would hang too.
            hosts.suspect(host, port)
            pool.drain()

        pool.open()
        return cls(pool, source, timeout=timeout)

    def close(self) -> None:
        """Close the pool; later calls raise StoreFailure."""
        self._close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of one of `tenant`'s tickets, or None."""
        if not (_storable(tenant) and _storable(ticket_id)):
            return None  # no stored key holds text PostgreSQL cannot store
        rows = self._select(tenant, _GET_SQL, (tenant, ticket_id))
        return _ticket(rows[0]) if rows else None

    def find(self, tenant: str, where: TicketFilter, *, limit: int | None) -> list[Ticket]:
        """Return the first `limit` (None: all) of `tenant`'s tickets matching `where`, by id.

        One range read of the primary key from (tenant, after) onwards, filtered as
        it goes and stopped after `limit` rows, as in SQLite.
        """
        values = (tenant, where.status, where.text)
        if (limit is not None and limit <= 0) or not all(
            value is None or _storable(value) for value in values
        ):
            # Nothing stored holds NUL or a lone surrogate, so such a value matches nothing.
            return []
        statement, params = _PAGE.query(
            tenant,
            after=None if where.after is None else _lower_bound(where.after),
            status=where.status,
            text=None if where.text is None else where.text.lower(),
            limit=None if limit is None or limit > _MAX_LIMIT else limit,
        )
        return [_ticket(row) for row in self._select(tenant, statement, params)]

    def staleness_seconds(self) -> float:
        """Return how many seconds the server read is behind its primary (0: caught up).

        0 on a primary, and on a standby whose WAL receiver is connected and has nothing
        left to replay, however long the primary has been idle. Otherwise an upper bound:
        the least of the age of the last replayed commit and the time since this store last
        saw the same server caught up (a receiver reconnecting after a primary restart is
        then seconds behind, not the primary's idle time); math.inf when neither is known.
        Raises StoreFailure as a read does.
        """
        rows = self._select(_STALENESS_TENANT, _STALENESS_SQL, ())
        caught_up, replay_age, server = rows[0]
        now = _now()
        if caught_up:
            self._caught_up = (str(server), now)
            return 0.0
        # NULL: no commit replayed since the start. Below 0: the hosts' clocks disagree.
        bounds = [max(0.0, replay_age)] if isinstance(replay_age, float) else []
        last = self._caught_up
        if last is not None and last[0] == server:
            bounds.append(now - last[1])
        return min(bounds, default=math.inf)

    def _select(
        self,
        tenant: str,
        statement: str,
        params: tuple[object, ...],
        *,
        deadline: float | None = None,
    ) -> list[tuple[object, ...]]:
        """Run one statement in a read-only transaction scoped to `tenant`, by `deadline`."""
        retry = deadline is None
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        connection: DeadlineConnection | None = None
        try:
            with self._pool.connection(deadline - time.monotonic()) as connection:
                connection.deadline = deadline + FROZEN_GRACE
                try:
                    with connection.pipeline():
                        # Pipelined: BEGIN, the scope, the query and COMMIT go out together,
                        # one round trip to the server instead of four.
                        left = _milliseconds(deadline - time.monotonic())
                        connection.execute(_SCOPE_SQL, (tenant, left))
                        cursor = connection.execute(statement, params)
                        connection.commit()
                        return cursor.fetchall()
                finally:
                    connection.deadline = None
        except psycopg.Error as error:
            # A pooled connection may have died while idle (a restart, a dropped
            # link), and so may its idle siblings: drop every dead one, then try the
            # read (safe to repeat) once more, on a live or a new connection, in the
            # time left. (A frozen one was closed, not broken: no time is left.)
            if retry and connection is not None and connection.broken:
                self._pool.check()
                return self._select(tenant, statement, params, deadline=deadline)
            raise store_error(error, self._source, "read") from None


def _configure(
    connection: DeadlineConnection,
    source: str,
    timeout: float,
    on_frozen: Callable[[str, int], None],
) -> None:
    """Check a new pooled connection, make its transactions read-only, bound its waits."""
    connection.wait_limit = timeout + FROZEN_GRACE
    connection.on_frozen = on_frozen
    try:
        check_connection(connection, source)
    except StoreFailure:
        connection.close()  # the pool then tries again later
        raise
    connection.rollback()  # the pool takes only idle connections
    connection.read_only = True


def _milliseconds(seconds: float) -> str:
    """Return `seconds` as a statement_timeout, at least 1 ms (0 would be no timeout)."""
    return str(max(1, math.ceil(seconds * 1000)))


def _storable(text: str) -> bool:
    """Return whether PostgreSQL text can hold `text` (a UTF-8 form, no NUL)."""
    return is_text(text) and "\x00" not in text


def _lower_bound(after: str) -> str:
    """Return the storable text that stored ids greater than `after` are at least.

    No stored id holds NUL or a lone surrogate (PostgreSQL text cannot), so for every
    stored id, `id > after` exactly when `id >= _lower_bound(after)`, in code-point
    order: "TKT-104" -> "TKT-104\x01" (the least longer text); "TKT-1\x00..." -> "TKT-1\x01";
    "TKT-\ud800..." -> "TKT-\ue000" (the least character above the surrogates).
    """
    for position, char in enumerate(after):
        if char == "\x00":
            return after[:position] + "\x01"
        if "\ud800" <= char <= "\udfff":
            return after[:position] + "\ue000"
    return after + "\x01"


def _ticket(row: tuple[object, ...]) -> Ticket:
    return {"id": str(row[0]), "title": str(row[1]), "status": str(row[2])}
