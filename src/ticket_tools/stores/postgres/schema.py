"""What a ticket database is on PostgreSQL: its table and policy, the checks on roles and schema.

The reader (`store.py`) and the import (`importer.py`) both check a database against
what is defined here, and classify its errors alike.
"""

from __future__ import annotations

from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat
from ticket_tools.stores.records import IdWidthError

# 2: the id's CHECK holds the deployment's ID width (`--id-digits`), so PostgreSQL
# refuses an id of another width and `check_schema` can tell which width a table has.
# 3: a version per ticket and the tombstones table, for `apply` (docs/feed.md).
# 4: a writer policy on each table for the tables' owner alone, so that `apply` writes a
# whole batch in one statement per operation instead of scoping each tenant in turn.
# 5: the high_water table, the floor a refresh from a versioned snapshot leaves.
# 6: the title index's three tables (`title_index.py`), which index statuses too.
SCHEMA_VERSION = 6
MIGRATES_FROM = (4, 5)
"""The schema versions `ticket-tools migrate` turns into this one, in place."""
# The advisory lock a writer holds for each batch, and `import --replace` for its swap:
# two writers never interleave reading a version and writing it.
WRITER_LOCK = 0x544B5431  # "TKT1"

# The table comment is the schema's version stamp, read back by `check_schema`.
_NAMES = {
    "tickets": "tickets",
    "tombstones": "tombstones",
    "high_water": "high water",
    "title_grams": "title grams",
    "gram_counts": "gram counts",
    "tenant_sizes": "tenant sizes",
}


def comment(table: str, version: int = SCHEMA_VERSION) -> str:
    """Return the comment that stamps `table` (a name of _NAMES) with a schema version."""
    return f"ticket-tools {_NAMES[table]}, schema version {version}"


_COMMENT = comment("tickets")
_TOMBSTONES_COMMENT = comment("tombstones")
_HIGH_WATER_COMMENT = comment("high_water")
# COLLATE "C" compares text by code point, exactly as Python compares str: the key
# order, `id > cursor` and ORDER BY id all agree with the dict store. `title_lower` holds
# Python's title.lower(), computed at import: PostgreSQL's lower() differs from it
# ('İ', final sigma), so the text filter never calls it (the writer recomputes it on
# every upsert). Only the public fields are stored: internal fields are dropped at import.
# `version` is the change feed's version of the ticket (0 from import, docs/feed.md).
# The id's CHECK is the ID format's own pattern: in PostgreSQL's regular expressions `$`
# matches at the very end only, and [0-9] under "C" is the ten ASCII digits.
_CREATE_TABLE = """
CREATE TABLE {name} (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL CHECK (id ~ '^{pattern}$'),
    title text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL,
    title_lower text COLLATE "C" NOT NULL,
    version bigint NOT NULL CHECK (version >= 0),
    PRIMARY KEY (tenant, id)
)
"""
# Deleted tickets' keys, with their delete's version, so that an older upsert arriving
# later cannot bring a ticket back. A table of its own rather than a flag on tickets:
# the reader's statements, grant, policy and page plan stay exactly as they were, and
# a page never skips deleted rows. The reader is granted nothing on it, and it has the
# same forced policy, so even a role granted it by mistake sees one tenant's keys at most.
# Its id holds the same width's CHECK as the tickets table's.
_CREATE_TOMBSTONES = """
CREATE TABLE tombstones (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL CHECK (id ~ '^{pattern}$'),
    version bigint NOT NULL CHECK (version >= 0),
    PRIMARY KEY (tenant, id)
)
"""
# The store's high-water version: no row (none, the default) or one, written by a
# refresh from a versioned snapshot (docs/feed.md): a key neither stored nor buried counts
# as stored at it. Not tenant data, so no policy: the owner has it, a writer role is
# granted SELECT (docs/postgres.md), the reader nothing, since no reader statement needs it.
_CREATE_HIGH_WATER = "CREATE TABLE high_water (version bigint NOT NULL CHECK (version >= 0))"
# The title index (`title_index.py`): per tenant and gram, a container of offsets per
# bucket of ids; per tenant and gram, how many tickets have it; per tenant, its size and
# whether it is indexed. Keyed by the tenant first, each under its own forced policy like
# the tickets table's, so that a reader sees one tenant's rows of them, or none; every
# column compared with "C" (code points, as Python orders the grams).
_CREATE_INDEX_TABLES = {
    "title_grams": """
CREATE TABLE {name} (
    tenant text COLLATE "C" NOT NULL,
    gram text COLLATE "C" NOT NULL,
    bucket bigint NOT NULL,
    offsets bytea NOT NULL,
    PRIMARY KEY (tenant, gram, bucket)
)
""",
    "gram_counts": """
CREATE TABLE {name} (
    tenant text COLLATE "C" NOT NULL,
    gram text COLLATE "C" NOT NULL,
    tickets bigint NOT NULL,
    PRIMARY KEY (tenant, gram)
)
""",
    "tenant_sizes": """
CREATE TABLE {name} (
    tenant text COLLATE "C" NOT NULL,
    tickets bigint NOT NULL,
    indexed boolean NOT NULL,
    PRIMARY KEY (tenant)
)
""",
}
INDEX_TABLES = tuple(_CREATE_INDEX_TABLES)
"""The title index's tables, in the order they are made."""
_POLICY = "tickets_tenant"
_TOMBSTONES_POLICY = "tombstones_tenant"
_TENANT_RULE = "USING (tenant = current_setting('app.tenant', true))"
# The owner's policy: every row, for the role that created the table (import and the
# migration run as the owner) and the roles that inherit its privileges. The readers
# are refused if they are or inherit the owner (`check_connection`), so it never widens
# what a reader sees; a writer role (docs/postgres.md) is not covered either and keeps
# scoping each tenant.
_WRITER_POLICIES = {"tickets": "tickets_writer", "tombstones": "tombstones_writer"} | {
    table: f"{table}_writer" for table in INDEX_TABLES
}
_WRITER_RULE = "TO CURRENT_USER USING (true) WITH CHECK (true)"


def _writer_policy(table: str, name: str | None = None) -> str:
    return f"CREATE POLICY {_WRITER_POLICIES[table]} ON {name or table} {_WRITER_RULE}"


def index_table(table: str, name: str | None = None) -> tuple[str, ...]:
    """Return the statements that create one of INDEX_TABLES, named `name`, policies enabled.

    `name` is the table, or the one `import --replace` builds beside it. Its policies are
    forced once it is filled (`force_index`): COPY refuses a table under forced security.
    """
    name = name or table
    return (
        _CREATE_INDEX_TABLES[table].format(name=name),
        f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY {table}_tenant ON {name} {_TENANT_RULE}",
        _writer_policy(table, name),
        f"COMMENT ON TABLE {name} IS '{comment(table)}'",
    )


def index_schema(suffix: str = "") -> tuple[str, ...]:
    """Return the statements that create the title index's tables (each name + `suffix`)."""
    return tuple(
        statement for table in INDEX_TABLES for statement in index_table(table, table + suffix)
    )


def force_index(suffix: str = "") -> tuple[str, ...]:
    """Return the statements that force the policies of the index's tables, once filled."""
    return tuple(f"ALTER TABLE {table}{suffix} FORCE ROW LEVEL SECURITY" for table in INDEX_TABLES)


def tickets_table(name: str, id_format: IdFormat = ID_FORMAT) -> tuple[str, ...]:
    """Return the statements that create a tickets table named `name`, policy enabled.

    `name` is "tickets", or the table `import --replace` builds beside it; its id CHECK
    holds the width of `id_format`.
    """
    return (
        _CREATE_TABLE.format(name=name, pattern=id_format.pattern),
        f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY {_POLICY} ON {name} {_TENANT_RULE}",
        _writer_policy("tickets", name),
        f"COMMENT ON TABLE {name} IS '{_COMMENT}'",
    )


def tombstones_table(id_format: IdFormat = ID_FORMAT) -> tuple[str, ...]:
    """Return the statements that create the tombstones table, its policy forced."""
    return (
        _CREATE_TOMBSTONES.format(pattern=id_format.pattern),
        "ALTER TABLE tombstones ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE tombstones FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY {_TOMBSTONES_POLICY} ON tombstones {_TENANT_RULE}",
        _writer_policy("tombstones"),
        f"COMMENT ON TABLE tombstones IS '{_TOMBSTONES_COMMENT}'",
    )


def high_water_table(version: int = SCHEMA_VERSION) -> tuple[str, ...]:
    """Return the statements that create the high_water table, with its version stamp."""
    return (
        _CREATE_HIGH_WATER,
        f"COMMENT ON TABLE high_water IS '{comment('high_water', version)}'",
    )


def create_schema(id_format: IdFormat = ID_FORMAT) -> tuple[str, ...]:
    """Return the statements that create the six tables for IDs of `id_format`.

    The tables, their policies and their version stamps; the importer then forces the
    tickets policy itself, after copying (docs/postgres.md).
    """
    return (
        *tickets_table("tickets", id_format),
        *tombstones_table(id_format),
        *high_water_table(),
        *index_schema(),
    )


MIGRATE_TO_6 = (
    *index_schema(),
    *(
        f"COMMENT ON TABLE {table} IS '{comment(table)}'"
        for table in ("tickets", "tombstones", "high_water")
    ),
)
"""What `ticket-tools migrate` runs on a schema version 5 database, as the tables' owner,
before it builds the title index in the same transaction (`title_index.migrate`)."""


_ADD_VERSION = (
    "ALTER TABLE tickets ADD COLUMN version bigint NOT NULL DEFAULT 0 CHECK (version >= 0)",
    "ALTER TABLE tickets ALTER COLUMN version DROP DEFAULT",
)

MIGRATE_FROM_4 = (
    *high_water_table(5),
    f"COMMENT ON TABLE tickets IS '{comment('tickets', 5)}'",
    f"COMMENT ON TABLE tombstones IS '{comment('tombstones', 5)}'",
)
"""What turns a schema version 4 database (of any ID width) into version 5, run as
the tables' owner in one transaction: the empty high_water table (no floor, as before).
The rows are not touched; a writer role is then granted SELECT on it (docs/postgres.md).
`ticket-tools migrate` runs it itself on a version 4 database, then MIGRATE_TO_6."""

MIGRATE_FROM_3 = (_writer_policy("tickets"), _writer_policy("tombstones"), *MIGRATE_FROM_4)
"""What turns a schema version 3 database (of any ID width) into version 5, run as
the tables' owner in one transaction: the owner's writer policy on both tables, which
is then the role it names (docs/postgres.md), then MIGRATE_FROM_4. The rows are not
touched."""

MIGRATE_FROM_2 = (
    *_ADD_VERSION,
    *(
        statement.replace(_TOMBSTONES_COMMENT, comment("tombstones", 5))
        for statement in tombstones_table(ID_FORMAT)
    ),
    _writer_policy("tickets"),
    *high_water_table(5),
    f"COMMENT ON TABLE tickets IS '{comment('tickets', 5)}'",
)
"""What turns a schema version 2 database of the brief's IDs (TKT- and three digits) into
version 5, run as the owner in one transaction: every ticket gets version 0, as if
imported (docs/postgres.md). For another width, `tombstones_table(IdFormat(n))`."""

MIGRATE_FROM_1 = (
    f"ALTER TABLE tickets ADD CONSTRAINT tickets_id_check CHECK (id ~ '^{ID_FORMAT.pattern}$')",
    *MIGRATE_FROM_2,
)
"""What turns a schema version 1 database (always the brief's IDs, TKT- and three digits)
into version 5, run as the owner in one transaction: the id CHECK of version 2, then
MIGRATE_FROM_2 (docs/postgres.md)."""

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
            || CASE WHEN p.polroles = ARRAY[c.relowner] THEN 'owner' ELSE p.polroles::text END
            || ' ' || pg_get_expr(p.polqual, p.polrelid)
            || coalesce(' ' || pg_get_expr(p.polwithcheck, p.polrelid), '')
        FROM pg_policy p WHERE p.polrelid = c.oid ORDER BY p.polname
    ),
    ARRAY(
        SELECT am.amname || CASE WHEN i.indisunique THEN ' unique (' ELSE ' (' END
            || (SELECT string_agg(a.attname, ', ' ORDER BY u.place)
                FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS u (attnum, place)
                JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum) || ')'
        FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
        WHERE i.indrelid = c.oid ORDER BY 1
    )
FROM pg_class c
WHERE c.oid = to_regclass(%s)
"""
_KEY = ["tenant text C NOT NULL", "id text C NOT NULL"]
_VERSION = ["version bigint  NOT NULL"]
_TEXT = [f"{name} text C NOT NULL" for name in ("title", "status", "title_lower")]
_TENANT_QUAL = "(tenant = current_setting('app.tenant'::text, true))"


def _constraints(id_format: IdFormat) -> list[str]:
    # As pg_get_constraintdef spells them, ordered by name: *_id_check, *_pkey,
    # *_version_check (a table built as tickets_next keeps its names in that order).
    return [
        f"CHECK ((id ~ '^{id_format.pattern}$'::text))",
        "PRIMARY KEY (tenant, id)",
        "CHECK ((version >= 0))",
    ]


def _expected(
    id_format: IdFormat, version: int = SCHEMA_VERSION
) -> dict[str, tuple[object, ...] | None]:
    """Per table: its comment, RLS enabled and forced, columns, constraints, policies, indexes.

    Exactly two policies each: the tenant's, for every command and every role, and the
    writer's, for the owner alone. Another permissive policy would widen what a
    connection sees, so any other set of policies is refused. Those of schema `version`
    (4, 5 or this one): what a database to migrate must hold (None: no such table).
    """
    expected: dict[str, tuple[object, ...] | None] = {
        "tickets": (
            comment("tickets", version),
            True,
            True,
            _KEY + _TEXT + _VERSION,
            _constraints(id_format),
            [f"{_POLICY} * true {{0}} {_TENANT_QUAL}", "tickets_writer * true owner true true"],
            ["btree unique (tenant, id)"],
        ),
        "tombstones": (
            comment("tombstones", version),
            True,
            True,
            _KEY + _VERSION,
            _constraints(id_format),
            [
                f"{_TOMBSTONES_POLICY} * true {{0}} {_TENANT_QUAL}",
                "tombstones_writer * true owner true true",
            ],
            ["btree unique (tenant, id)"],
        ),
        "high_water": (
            comment("high_water", version),
            False,
            False,
            _VERSION,
            ["CHECK ((version >= 0))"],
            [],
            [],
        ),
    }
    key = ["tenant text C NOT NULL"]
    gram = ["gram text C NOT NULL"]
    tables = {
        "title_grams": (
            [*key, *gram, "bucket bigint  NOT NULL", "offsets bytea  NOT NULL"],
            "(tenant, gram, bucket)",
        ),
        "gram_counts": ([*key, *gram, "tickets bigint  NOT NULL"], "(tenant, gram)"),
        "tenant_sizes": (
            [*key, "tickets bigint  NOT NULL", "indexed boolean  NOT NULL"],
            "(tenant)",
        ),
    }
    for table, (columns, primary) in tables.items():
        expected[table] = (
            comment(table, version),
            True,
            True,
            columns,
            [f"PRIMARY KEY {primary}"],
            [
                f"{table}_tenant * true {{0}} {_TENANT_QUAL}",
                f"{table}_writer * true owner true true",
            ],
            [f"btree unique {primary}"],
        )
    if version < SCHEMA_VERSION:
        expected.update(dict.fromkeys(INDEX_TABLES))
    if version < 5:
        expected["high_water"] = None
    return expected


_TABLES = ("tickets", "tombstones", "high_water", *INDEX_TABLES)
_OLD_VERSIONS = tuple(comment("tickets", n) for n in range(1, SCHEMA_VERSION))

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
    """Raise StoreFailure("privileged") if the connection's roles could bypass the policy."""
    [flags] = connection.execute(_ROLE_SQL).fetchall()  # one row of three booleans
    for flag, refusal in zip(flags, _ROLE_REFUSALS, strict=True):
        if flag:
            raise StoreFailure(
                "privileged",
                f"{source} connects as {refusal}, which row-level security does not "
                "restrict; connect as the reader role",
            )


def check_schema(
    connection: psycopg.Connection,
    source: str,
    id_format: IdFormat = ID_FORMAT,
    *,
    version: int = SCHEMA_VERSION,
) -> None:
    """Raise StoreFailure("schema") unless the tables are this schema version, policies forced.

    The tables must be the ones made for IDs of `id_format`: ones made for another width
    are refused with a message naming both widths, and a database of an older version
    with what migrates it. `version` 4 or 5 checks a database to migrate: exactly what
    that version made.
    """
    found = {table: connection.execute(_SCHEMA_SQL, (table,)).fetchone() for table in _TABLES}
    if found == _expected(id_format, version):
        return
    for digits in range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1):
        if found == _expected(IdFormat(digits), version):
            raise IdWidthError(source, digits, id_format)
    tickets = found["tickets"]
    if tickets is not None and tickets[0] in _OLD_VERSIONS and version == SCHEMA_VERSION:
        old = _OLD_VERSIONS.index(tickets[0]) + 1
        fix = (
            "run ticket-tools migrate --postgres DSN as the tables' owner"
            if old in MIGRATES_FROM
            else "run docs/postgres.md's migration statements as the table's owner"
        )
        raise StoreFailure("schema", f"{source} has schema version {old}; to migrate, {fix}")
    raise StoreFailure(
        "schema",
        f"{source} has no ticket-tools tickets, tombstones and high_water tables "
        f"(schema version {version}) with their row-level security forced",
    )


def found_version(connection: psycopg.Connection) -> int | None:
    """Return the schema version the tickets table's comment says (None: none of ours)."""
    row = connection.execute(
        "SELECT obj_description(to_regclass('tickets'), 'pg_class')"
    ).fetchone()
    stamps = [comment("tickets", n) for n in range(1, SCHEMA_VERSION + 1)]
    return stamps.index(row[0]) + 1 if row is not None and row[0] in stamps else None


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


# What psycopg's own error classes mean when no SQLSTATE came with them (libpq gives a
# failed connection none, and its message can quote the DSN, a password included).
_WITHOUT_SQLSTATE: dict[type[psycopg.Error], str] = {
    psycopg.OperationalError: "no connection (the server is down or unreachable, or it "
    "refused the database, role or password)",
    psycopg.ProgrammingError: "psycopg refused the DSN or the statement",
    psycopg.DataError: "a value PostgreSQL cannot hold (a NUL character, say)",
    psycopg.InterfaceError: "psycopg could not use the connection",
}


def store_error(error: psycopg.Error, source: str, action: str) -> StoreFailure:
    """Classify a psycopg error by its SQLSTATE and class, never by its message.

    libpq gives a failed connection no SQLSTATE, so a missing database, a wrong
    password and a stopped server are alike "unavailable", in the same words. An error
    of a SQLSTATE's own class is named by it, PostgreSQL's condition in CamelCase
    (`AdminShutdown`, `QueryCanceled`).
    """
    if error.sqlstate in ("42P01", "42703"):  # undefined table or column
        return StoreFailure("schema", f"{source} is not a ticket-tools database")
    if error.sqlstate == "25006":  # read_only_sql_transaction: a hot standby took the write
        # Not "unavailable": retrying the same DSN reaches the same standby.
        return StoreFailure(
            "privileged",
            f"cannot {action} {source}: it is a read-only standby; writes need the primary: "
            "add target_session_attrs=read-write to the DSN",
        )
    words = _WITHOUT_SQLSTATE.get(type(error))
    if words is not None:
        return StoreFailure("unavailable", f"cannot {action} {source}: {words}")
    return StoreFailure("unavailable", f"cannot {action} {source} ({type(error).__name__})")
