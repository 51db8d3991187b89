"""`ticket-tools migrate --postgres DSN`: a schema version 4 or 5 database made this version."""

from __future__ import annotations

import psycopg
from psycopg import sql

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.postgres.schema import (
    INDEX_TABLES,
    MIGRATE_FROM_4,
    MIGRATE_TO_6,
    MIGRATES_FROM,
    WRITER_LOCK,
    check_schema,
    describe,
    found_version,
    store_error,
)
from ticket_tools.stores.postgres.title_index import IndexProgress, build_index

# What a grant on tickets gives on the title index's tables too: a reader's SELECT, and
# a writer role's SELECT, INSERT, UPDATE and DELETE (docs/postgres.md).
_GRANTS_SQL = """
SELECT DISTINCT r.rolname, a.privilege_type
FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'tickets'::regclass AND a.grantee <> c.relowner
    AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
ORDER BY r.rolname, a.privilege_type
"""


def migrate_dsn(
    dsn: str, *, id_format: IdFormat = ID_FORMAT, on_progress: IndexProgress | None = None
) -> int | None:
    """Migrate the database at `dsn` to this schema version; return the tickets indexed.

    None: it already has this version, and nothing was done. Run as the tables' owner,
    in one transaction holding the writers' lock (an `apply` batch waits, then lands on
    the new schema): version 4's high_water table if it is missing, the title index's
    tables (each role granted on tickets granted on them alike) and their rows, the
    version stamps. Readers keep reading meanwhile (the tickets are read, not locked
    against them); on any failure, nothing.
    Raises StoreFailure: "schema" as `open` says, "privileged" for a role that is not
    the owner, "unavailable" for any other failure.
    """
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            version = found_version(connection)
            if version not in MIGRATES_FROM:
                check_schema(connection, source, id_format)  # refused, or already done
                return None
            check_schema(connection, source, id_format, version=version)
            for statement in (*(MIGRATE_FROM_4 if version == 4 else ()), *MIGRATE_TO_6):
                connection.execute(statement)
            for role, privilege in connection.execute(_GRANTS_SQL).fetchall():
                connection.execute(
                    sql.SQL("GRANT {} ON {} TO {}").format(
                        sql.SQL(privilege),
                        sql.SQL(", ").join(map(sql.Identifier, INDEX_TABLES)),
                        sql.Identifier(role),
                    )
                )
            return build_index(connection, on_progress=on_progress)
    except psycopg.errors.InsufficientPrivilege:
        raise StoreFailure(
            "privileged",
            f"{source} connects as a role that does not own the tables; "
            "connect as their owner to migrate them",
        ) from None
    except psycopg.Error as error:
        raise store_error(error, source, "migrate") from None
