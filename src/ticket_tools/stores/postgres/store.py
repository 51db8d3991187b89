"""PostgresStore: the ticket store as a PostgreSQL table, with row-level security as a second wall.

Every call is one read-only transaction on a pooled connection: it first sets
`app.tenant` for that transaction only (`set_config(..., true)`), then runs the same
tenant-qualified keyset query as SQLite. The table's policy shows a connection only the
rows of the tenant it set, so a query that forgot its `tenant = ...` would return
that tenant's rows or none, never another tenant's. Needs the `postgres` extra.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ticket_tools.filters import TicketFilter
from ticket_tools.store import Records, StoreError, TicketStore
from ticket_tools.stores.keyset_sql import PageStatements
from ticket_tools.stores.records import RecordsError, StoredRow, is_text, record_rows
from ticket_tools.tickets import Ticket

SCHEMA_VERSION = 1
# How long one call may take: waiting for a pooled connection, connecting, and the
# statement itself (its statement_timeout). Past it the call fails as "unavailable".
DEFAULT_TIMEOUT = 5.0
# Connections one store may hold; each serves one call at a time.
DEFAULT_MAX_CONNECTIONS = 4
# Rows per progress report during an import.
IMPORT_BATCH = 10_000
# The largest LIMIT PostgreSQL takes (a bigint); a larger limit is no limit.
_MAX_LIMIT = 2**63 - 1

# The table comment is the schema's version stamp, read back by `open`.
_COMMENT = f"ticket-tools tickets, schema version {SCHEMA_VERSION}"
# COLLATE "C" compares text by code point, exactly as Python compares str: the key
# order, `id > cursor` and ORDER BY id all agree with the dict store. `title_lower` holds
# Python's title.lower(), computed at import: PostgreSQL's lower() differs from it
# ('İ', final sigma), so the text filter never calls it. Only the public fields are
# stored: internal fields are dropped at import.
_CREATE_TABLE = """
CREATE TABLE tickets (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    title text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL,
    title_lower text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, id)
)
"""
_POLICY = "tickets_tenant"
_CREATE_POLICY = (
    f"CREATE POLICY {_POLICY} ON tickets USING (tenant = current_setting('app.tenant', true))"
)
_CREATE_SCHEMA = (
    _CREATE_TABLE,
    "ALTER TABLE tickets ENABLE ROW LEVEL SECURITY",
    _CREATE_POLICY,
    f"COMMENT ON TABLE tickets IS '{_COMMENT}'",
)

# One row describing the table as the catalog sees it, or no row without a table.
_SCHEMA_SQL = """
SELECT
    obj_description(c.oid, 'pg_class'),
    c.relrowsecurity,
    c.relforcerowsecurity,
    ARRAY(
        SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' '
            || coalesce(co.collname, '') || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
        FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum
    ),
    ARRAY(
        SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k
        WHERE k.conrelid = c.oid ORDER BY k.conname
    ),
    ARRAY(
        SELECT p.polname || ' ' || p.polcmd::text || ' ' || p.polpermissive::text || ' '
            || p.polroles::text || ' ' || pg_get_expr(p.polqual, p.polrelid)
        FROM pg_policy p WHERE p.polrelid = c.oid ORDER BY p.polname
    )
FROM pg_class c
WHERE c.oid = to_regclass('tickets')
"""
_COLUMNS = [
    f"{name} text C NOT NULL" for name in ("tenant", "id", "title", "status", "title_lower")
]
_CONSTRAINTS = ["PRIMARY KEY (tenant, id)"]
# Exactly one policy, for every command and every role: another permissive policy
# would widen what a connection sees, so any other set of policies is refused.
_POLICIES = [f"{_POLICY} * true {{0}} (tenant = current_setting('app.tenant'::text, true))"]

# Whether the connection's roles could skip the policy: a superuser, a BYPASSRLS role,
# or the table's owner, or a member of any of these (who could SET ROLE to it). Both
# the current and the session user are asked: either could run the next statement.
_ROLE_SQL = """
SELECT
    EXISTS (
        SELECT FROM pg_roles r, (VALUES (current_user), (session_user)) AS u (name)
        WHERE r.rolsuper AND pg_has_role(u.name, r.oid, 'MEMBER')
    ),
    EXISTS (
        SELECT FROM pg_roles r, (VALUES (current_user), (session_user)) AS u (name)
        WHERE r.rolbypassrls AND pg_has_role(u.name, r.oid, 'MEMBER')
    ),
    EXISTS (
        SELECT FROM pg_class c, (VALUES (current_user), (session_user)) AS u (name)
        WHERE c.oid = to_regclass('tickets') AND pg_has_role(u.name, c.relowner, 'MEMBER')
    )
"""
_ROLE_REFUSALS = (
    "a superuser role (or a member of one)",
    "a role with BYPASSRLS (or a member of one)",
    "the owner of the tickets table (or a member of its role)",
)

# Transaction-local (the `true`): both settings end with the call's transaction, so
# they cannot leak to the next borrower of the pooled connection.
_SCOPE_SQL = "SELECT set_config('app.tenant', %s, true), set_config('statement_timeout', %s, true)"
_GET_SQL = "SELECT id, title, status FROM tickets WHERE tenant = %s AND id = %s"


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


class TableNotEmptyError(Exception):
    """An import into a tickets table that already holds tickets (imports never merge)."""


class PostgresStore(TicketStore):
    """Tickets in a PostgreSQL table, read through a bounded pool; safe to share across threads.

    Open it with `open(dsn)` as the reader role; close it with `close()` or a `with`
    block (it also closes when collected). A call that loses its connection is tried
    once more on a fresh one, so the first call after the server comes back answers.
    """

    def __init__(self, pool: ConnectionPool, source: str, *, timeout: float) -> None:
        """Wrap an open pool whose connections `check_connection` has configured."""
        self._pool = pool
        self._source = source
        self._timeout_ms = str(max(1, math.ceil(timeout * 1000)))
        self._close = weakref.finalize(self, pool.close)

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> PostgresStore:
        """Connect as the reader role; refuse a role that could bypass the policy.

        Raises StoreError: "privileged" for a superuser, BYPASSRLS or owner role,
        "schema" for a database without this schema version's table and policy,
        "unavailable" for any other failure (no server, no such database or role).
        """
        source = describe(dsn)
        # libpq takes whole seconds, and reads 1 as 2.
        connect_timeout = max(2, math.ceil(timeout))
        try:
            with psycopg.connect(dsn, connect_timeout=connect_timeout) as connection:
                check_connection(connection, source)
                check_schema(connection, source)
        except psycopg.Error as error:
            raise _store_error(error, source, "connect to") from None
        pool: ConnectionPool = ConnectionPool(
            dsn,
            kwargs={"connect_timeout": connect_timeout},
            min_size=1,
            max_size=max_connections,
            open=True,
            # Every new connection is checked again: a role changed since `open` never serves.
            configure=lambda connection: _configure(connection, source),
            timeout=timeout,
            # Give up a failing reconnect soon: the next call then connects at once,
            # instead of waiting out an exponential backoff that grew during an outage.
            reconnect_timeout=timeout,
            name="ticket-tools",
        )
        return cls(pool, source, timeout=timeout)

    def close(self) -> None:
        """Close the pool; later calls raise StoreError."""
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

    def _select(
        self, tenant: str, statement: str, params: tuple[object, ...], *, retry: bool = True
    ) -> list[tuple[object, ...]]:
        """Run one statement in a read-only transaction scoped to `tenant`."""
        connection: psycopg.Connection | None = None
        try:
            with self._pool.connection() as connection, connection.pipeline():
                # Pipelined: BEGIN, the scope, the query and COMMIT go out together,
                # one round trip to the server instead of four.
                connection.execute(_SCOPE_SQL, (tenant, self._timeout_ms))
                cursor = connection.execute(statement, params)
                connection.commit()
                return cursor.fetchall()
        except psycopg.Error as error:
            # A pooled connection may have died while idle (a restart, a dropped
            # link), and so may its idle siblings: drop every dead one, then try the
            # read (safe to repeat) once more, on a live or a new connection.
            if retry and connection is not None and connection.broken:
                self._pool.check()
                return self._select(tenant, statement, params, retry=False)
            raise _store_error(error, self._source, "read") from None


def check_connection(connection: psycopg.Connection, source: str) -> None:
    """Raise StoreError("privileged") if the connection's roles could bypass the policy."""
    [flags] = connection.execute(_ROLE_SQL).fetchall()  # one row of three booleans
    for flag, refusal in zip(flags, _ROLE_REFUSALS, strict=True):
        if flag:
            raise StoreError(
                "privileged",
                f"{source} connects as {refusal}, which row-level security does not "
                "restrict; connect as the reader role",
            )


def check_schema(connection: psycopg.Connection, source: str) -> None:
    """Raise StoreError("schema") unless `tickets` is this schema version, policy forced."""
    found = connection.execute(_SCHEMA_SQL).fetchone()
    expected = (_COMMENT, True, True, _COLUMNS, _CONSTRAINTS, _POLICIES)
    if found != expected:
        raise StoreError(
            "schema",
            f"{source} has no ticket-tools tickets table (schema version {SCHEMA_VERSION}) "
            "with its row-level security forced",
        )


def _configure(connection: psycopg.Connection, source: str) -> None:
    """Check a new pooled connection and make its transactions read-only."""
    try:
        check_connection(connection, source)
    except StoreError:
        connection.close()  # the pool then tries again later
        raise
    connection.rollback()  # the pool takes only idle connections
    connection.read_only = True


# --- Import ---


def import_records(
    connection: psycopg.Connection,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Copy `records` into an empty `tickets` table (created if absent); return the count.

    Run as the table's owner. Everything happens in one transaction (a savepoint if
    one is open): on any failure nothing is written. `grant_to` names the reader role
    to give SELECT on the table. Raises RecordsError, TableNotEmptyError, psycopg.Error.
    """
    rows = postgres_rows(records)
    with connection.transaction():
        if connection.execute("SELECT to_regclass('tickets') IS NULL").fetchone() == (True,):
            for statement in _CREATE_SCHEMA:
                connection.execute(statement)
        else:
            check_schema(connection, _describe(connection.info.get_parameters()))
        # Under FORCE the owner, too, sees only app.tenant's rows and may insert no
        # other: lift it for this transaction only. ALTER TABLE holds an ACCESS
        # EXCLUSIVE lock until commit, so no other session ever sees the table unforced.
        connection.execute("ALTER TABLE tickets NO FORCE ROW LEVEL SECURITY")
        if connection.execute("SELECT EXISTS (SELECT FROM tickets)").fetchone() == (True,):
            raise TableNotEmptyError("the tickets table already holds tickets")
        with connection.cursor().copy(
            "COPY tickets (tenant, id, title, status, title_lower) FROM STDIN"
        ) as copy:
            for done, (tenant, ticket_id, title, status) in enumerate(rows, start=1):
                copy.write_row((tenant, ticket_id, title, status, title.lower()))
                if on_progress is not None and (done % IMPORT_BATCH == 0 or done == len(rows)):
                    on_progress(done, len(rows))
        connection.execute("ALTER TABLE tickets FORCE ROW LEVEL SECURITY")
        connection.execute("ANALYZE tickets")
        if grant_to is not None:
            grant = sql.SQL("GRANT SELECT ON tickets TO {}").format(sql.Identifier(grant_to))
            connection.execute(grant)
    return len(rows)


def import_dsn(
    dsn: str,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Connect to `dsn` (as the owner) and `import_records`; database failures raise StoreError."""
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection:
            return import_records(connection, records, grant_to=grant_to, on_progress=on_progress)
    except psycopg.Error as error:
        raise _store_error(error, source, "import into") from None


def postgres_rows(records: Records) -> list[StoredRow]:
    """Check `records` by the records rules, and refuse NUL; return rows in key order."""
    rows = record_rows(records)
    for position, fields in enumerate(rows, start=1):
        if any("\x00" in text for text in fields):
            raise RecordsError(
                f"record {position} (in file order): PostgreSQL text cannot hold a NUL character"
            )
    # Key order makes every row an append to the primary key's B-tree.
    return sorted(rows)


# --- Helpers ---


def describe(dsn: str) -> str:
    """Name a database by its DSN's user, host, port and dbname: never its password."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "PostgreSQL (an unreadable DSN)"
    return _describe(params)


def _describe(params: Mapping[str, object]) -> str:
    shown = [
        f"{name}={params[name]}" for name in ("user", "host", "port", "dbname") if name in params
    ]
    return f"PostgreSQL ({' '.join(shown) or 'default connection'})"


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


def _store_error(error: psycopg.Error, source: str, action: str) -> StoreError:
    """Classify a psycopg error by its SQLSTATE and class, never by its message.

    libpq gives a failed connection no SQLSTATE, so a missing database, a wrong
    password and a stopped server are alike "unavailable" (the class name says which kind).
    """
    if error.sqlstate in ("42P01", "42703"):  # undefined table or column
        return StoreError("schema", f"{source} is not a ticket-tools database")
    return StoreError("unavailable", f"cannot {action} {source} ({type(error).__name__})")
