"""What a ticket database is on PostgreSQL: its table and policy, the checks on roles and schema.

The reader (`store.py`) and the import (`importer.py`) both check a database against
what is defined here, and classify its errors alike.
"""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ticket_tools.store import StoreError
from ticket_tools.stores.records import id_width_message
from ticket_tools.tickets import ID_FORMAT, MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat

# 2: the id's CHECK holds the deployment's ID width (`--id-digits`), so PostgreSQL
# refuses an id of another width and `check_schema` can tell which width a table has.
SCHEMA_VERSION = 2

# The table comment is the schema's version stamp, read back by `check_schema`.
_COMMENT = f"ticket-tools tickets, schema version {SCHEMA_VERSION}"
# COLLATE "C" compares text by code point, exactly as Python compares str: the key
# order, `id > cursor` and ORDER BY id all agree with the dict store. `title_lower` holds
# Python's title.lower(), computed at import: PostgreSQL's lower() differs from it
# ('İ', final sigma), so the text filter never calls it. Only the public fields are
# stored: internal fields are dropped at import. The id's CHECK is the ID format's own
# pattern: in PostgreSQL's regular expressions `$` matches at the very end only, and
# [0-9] under "C" is the ten ASCII digits.
_CREATE_TABLE = """
CREATE TABLE tickets (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL CHECK (id ~ '^{pattern}$'),
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


def create_schema(id_format: IdFormat = ID_FORMAT) -> tuple[str, ...]:
    """Return the statements that create the tickets table for IDs of `id_format`.

    The table, its policy and its version stamp; the importer then forces the policy.
    """
    return (
        _CREATE_TABLE.format(pattern=id_format.pattern),
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
        WHERE k.conrelid = c.oid
        -- PostgreSQL 18 lists each NOT NULL here too; the columns above check the valid
        -- ones, so only a NOT VALID one (which old rows may break) is left to refuse.
        AND NOT (k.contype = 'n' AND k.convalidated)
        ORDER BY k.conname
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


def _constraints(id_format: IdFormat) -> list[str]:
    # As pg_get_constraintdef spells them, ordered by name: tickets_id_check, tickets_pkey.
    return [f"CHECK ((id ~ '^{id_format.pattern}$'::text))", "PRIMARY KEY (tenant, id)"]


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


def check_schema(
    connection: psycopg.Connection, source: str, id_format: IdFormat = ID_FORMAT
) -> None:
    """Raise StoreError("schema") unless `tickets` is this schema version, policy forced.

    The table must be the one made for IDs of `id_format`; one made for another width
    is refused with a message naming both widths.
    """
    found = connection.execute(_SCHEMA_SQL).fetchone()
    if found != _expected(id_format):
        for digits in range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1):
            if found == _expected(IdFormat(digits)):
                raise StoreError("schema", id_width_message(source, digits, id_format))
        raise StoreError(
            "schema",
            f"{source} has no ticket-tools tickets table (schema version {SCHEMA_VERSION}) "
            "with its row-level security forced",
        )


def _expected(id_format: IdFormat) -> tuple[object, ...]:
    return (_COMMENT, True, True, _COLUMNS, _constraints(id_format), _POLICIES)


def describe(dsn: str) -> str:
    """Name a database by its DSN's user, host, port and dbname: never its password."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "PostgreSQL (an unreadable DSN)"
    return describe_params(params)


def describe_params(params: Mapping[str, object]) -> str:
    """Name a database by its connection parameters' user, host, port and dbname."""
    shown = [
        f"{name}={params[name]}" for name in ("user", "host", "port", "dbname") if name in params
    ]
    return f"PostgreSQL ({' '.join(shown) or 'default connection'})"


def store_error(error: psycopg.Error, source: str, action: str) -> StoreError:
    """Classify a psycopg error by its SQLSTATE and class, never by its message.

    libpq gives a failed connection no SQLSTATE, so a missing database, a wrong
    password and a stopped server are alike "unavailable" (the class name says which kind).
    """
    if error.sqlstate in ("42P01", "42703"):  # undefined table or column
        return StoreError("schema", f"{source} is not a ticket-tools database")
    return StoreError("unavailable", f"cannot {action} {source} ({type(error).__name__})")
