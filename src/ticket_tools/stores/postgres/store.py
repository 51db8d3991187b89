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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ticket_tools.filters import TicketFilter
from ticket_tools.store import TicketStore
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.index_search import find_with_index
from ticket_tools.stores.keyset_sql import PageStatements
from ticket_tools.stores.postgres.deadline import DeadlineConnection
from ticket_tools.stores.postgres.hosts import HostList
from ticket_tools.stores.postgres.schema import (
    check_connection,
    check_schema,
    describe,
    store_error,
)
from ticket_tools.stores.postgres.title_index import BOUNDS_PREFIX, GENERIC, PostgresSession
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
# A text search's: its statements planned generically too (`title_index._BOUNDS_SQL`).
_SEARCH_SCOPE_SQL = (
    "SELECT set_config('app.tenant', %s, true), set_config('statement_timeout', %s, true), "
    f"set_config('plan_cache_mode', '{GENERIC}', true)"
)
_GET_SQL = "SELECT id, title, status FROM tickets WHERE tenant = %s AND id = %s"
# A text search's statements (the index, then the tickets) read one snapshot. Its tables
# are locked first, before the snapshot is taken (at the first SELECT): a swap by
# `import --replace` committed meanwhile has then either happened before it, whole, or
# waits for the search, as it waits for any reader's statement. A lock taken after the
# snapshot would find the new tables, their rows committed after it: an empty page.
_SNAPSHOT_LOCK = "LOCK TABLE tickets, title_grams, gram_counts, tenant_sizes IN ACCESS SHARE MODE"
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
# What this backend has read of each table of a search and not yet reported to the
# statistics (the current transaction's reads and recent ones'): a search's are the
# difference before and after it.
_READS_SQL = """
SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0)
FROM pg_stat_xact_user_tables
WHERE relname IN ('tickets', 'title_grams', 'gram_counts', 'tenant_sizes')
ORDER BY relname
"""


@dataclass(frozen=True)
class SearchPlans:
    """What a text search read (`PostgresStore.search_plans`), and how."""

    reads: dict[str, tuple[int, ...]]
    """Per table it read: sequential scans, rows they read, index scans, rows they fetched."""
    plans: list[str]
    """EXPLAIN ANALYZE of each statement it ran, in order."""


T = TypeVar("T")
Work = Callable[[DeadlineConnection, float], Callable[[], T]]
"""A call's statements, given its connection (its transaction scoped) and deadline; returns
what reads their results, called once the transaction is committed (in the same pipeline)."""


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
        self,
        pool: ConnectionPool[DeadlineConnection],
        source: str,
        *,
        timeout: float,
        id_digits: int = ID_FORMAT.digits,
    ) -> None:
        """Wrap an open pool whose connections `check_connection` has configured.

        `id_digits`: the width of the tables' ids (`open` checked it).
        """
        self._pool = pool
        self._source = source
        self._timeout = timeout
        self._id_digits = id_digits
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
        return cls(pool, source, timeout=timeout, id_digits=id_format.digits)

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

        Without a text or a status, one range read of the primary key from (tenant,
        after) onwards, stopped after `limit` rows, as in SQLite. With either, the plan of
        `index_search`, in the call's one transaction (one snapshot, REPEATABLE READ): the
        title index (statuses too), or a short scan first where the terms are common,
        every statement one the planner can run along an index under the forced policy.
        """
        values = (tenant, where.status, where.text)
        if (limit is not None and limit <= 0) or not all(
            value is None or _storable(value) for value in values
        ):
            # Nothing stored holds NUL or a lone surrogate, so such a value matches nothing.
            return []
        limit = None if limit is None or limit > _MAX_LIMIT else limit
        if where.text is None and where.status is None:
            statement, params = _page_query(tenant, None, None, where.after, limit)
            return [_ticket(row) for row in self._select(tenant, statement, params)]

        def search(connection: DeadlineConnection, deadline: float) -> Callable[[], list[Ticket]]:
            found = find_with_index(self._session(connection, tenant, deadline), where, limit)
            return lambda: found

        return self._read(tenant, search, snapshot=True)

    def search_plans(self, tenant: str, where: TicketFilter, *, limit: int | None) -> SearchPlans:
        """Run the text search of `where`; return what it read, and each statement's plan.

        As `find` runs it: the reader's transaction, scoped to `tenant`, under the policy.
        The reads are this transaction's counts from pg_stat_xact_user_tables, taken
        before the plans are made: the statements as they ran (generic plans, prepared).
        """

        def explain(connection: DeadlineConnection, deadline: float) -> Callable[[], SearchPlans]:
            session = self._session(connection, tenant, deadline)
            session.statements = []
            before = _reads(connection)
            find_with_index(session, where, limit)
            after = _reads(connection)
            reads = {
                table: tuple(
                    now - then
                    for now, then in zip(counts, before.get(table, (0,) * 4), strict=True)
                )
                for table, counts in after.items()
            }
            plans = [
                "\n".join(
                    str(line[0])
                    for line in connection.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", params)
                )
                for sql, params in session.statements
                if not sql.startswith(BOUNDS_PREFIX)
            ]
            return lambda: SearchPlans(reads, plans)

        return self._read(tenant, explain, snapshot=True)

    def _session(
        self, connection: DeadlineConnection, tenant: str, deadline: float
    ) -> PostgresSession:
        """Return the session of one text search on `connection`, whose call ends by `deadline`."""
        return PostgresSession(
            connection,
            tenant,
            width=self._id_digits,
            deadline=deadline,
            page=lambda status, text, after, rows: _page_query(tenant, status, text, after, rows),
            ticket=_ticket,
        )

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
        self, tenant: str, statement: str, params: tuple[object, ...]
    ) -> list[tuple[object, ...]]:
        """Run one statement in a read-only transaction scoped to `tenant`."""

        def run(
            connection: DeadlineConnection, deadline: float
        ) -> Callable[[], list[tuple[object, ...]]]:
            return connection.execute(statement, params).fetchall

        return self._read(tenant, run)

    def _read(
        self,
        tenant: str,
        work: Work[T],
        *,
        snapshot: bool = False,
        deadline: float | None = None,
    ) -> T:
        """Run `work` in a read-only transaction scoped to `tenant`, by `deadline`.

        `snapshot`: REPEATABLE READ, its tables locked first (_SNAPSHOT_LOCK), for work of
        several statements; else READ COMMITTED, each statement its own snapshot.
        """
        retry = deadline is None
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        connection: DeadlineConnection | None = None
        try:
            with self._pool.connection(deadline - time.monotonic()) as connection:
                connection.deadline = deadline + FROZEN_GRACE
                if snapshot:  # psycopg's BEGIN then says it
                    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                try:
                    with connection.pipeline():
                        # Pipelined: BEGIN, the scope, the statements and COMMIT go out
                        # together, one round trip for a page instead of four.
                        left = _milliseconds(deadline - time.monotonic())
                        if snapshot:
                            # The lock's wait is bounded too (a swap in progress).
                            connection.execute(f"SET LOCAL statement_timeout = {left}")
                            connection.execute(_SNAPSHOT_LOCK)
                        connection.execute(
                            _SEARCH_SCOPE_SQL if snapshot else _SCOPE_SQL, (tenant, left)
                        )
                        results = work(connection, deadline)
                        connection.commit()
                        return results()
                finally:
                    connection.deadline = None
                    if snapshot and not connection.closed:
                        connection.isolation_level = None
        except psycopg.Error as error:
            # A pooled connection may have died while idle (a restart, a dropped
            # link), and so may its idle siblings: drop every dead one, then try the
            # read (safe to repeat) once more, on a live or a new connection, in the
            # time left. (A frozen one was closed, not broken: no time is left.)
            if retry and connection is not None and connection.broken:
                self._pool.check()
                return self._read(tenant, work, snapshot=snapshot, deadline=deadline)
            raise store_error(error, self._source, "read") from None


def _reads(connection: DeadlineConnection) -> dict[str, tuple[int, ...]]:
    """Return what this backend has read of a search's tables and not yet reported (_READS_SQL)."""
    return {
        str(table): tuple(int(count) for count in counts)
        for table, *counts in connection.execute(_READS_SQL).fetchall()
    }


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


def _ticket(row: Sequence[object]) -> Ticket:
    return {"id": str(row[0]), "title": str(row[1]), "status": str(row[2])}


def _page_query(
    tenant: str, status: str | None, text: str | None, after: str | None, limit: int | None
) -> tuple[str, tuple[object, ...]]:
    """Return the page statement of these filters (`after`, any text; `text`, lowered here)."""
    return _PAGE.query(
        tenant,
        after=None if after is None else _lower_bound(after),
        status=status,
        text=None if text is None else text.lower(),
        limit=limit,
    )
