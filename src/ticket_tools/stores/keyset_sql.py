"""The SQL stores' page query: one fixed SELECT per combination of filters, keyset-ordered."""

from __future__ import annotations

import itertools


class PageStatements:
    """The page SELECT for every combination of filters, built once from constant fragments.

    Each SQL store writes its conditions in its own dialect, every value a placeholder;
    the statements differ only in which conditions are present, so a value never
    becomes SQL text. With SQLite's fragments, a query with a status and a cursor is

        SELECT id, title, status FROM tickets
        WHERE tenant = ? AND id > CAST(? AS TEXT) AND status = ? ORDER BY id LIMIT ?

    bound to (tenant, after, status, limit).
    """

    def __init__(self, *, tenant: str, after: str, status: str, text: str, limit: str) -> None:
        self._statements: dict[tuple[bool, ...], str] = {}
        for present in itertools.product((False, True), repeat=3):
            filters = zip((after, status, text), present, strict=True)
            conditions = " AND ".join([tenant, *(sql for sql, on in filters if on)])
            self._statements[present] = (
                f"SELECT id, title, status FROM tickets WHERE {conditions} "  # noqa: S608
                f"ORDER BY id LIMIT {limit}"
            )

    def query(
        self, tenant: object, *, after: object, status: object, text: object, limit: object
    ) -> tuple[str, tuple[object, ...]]:
        """Return the statement and its parameters; a filter whose value is None is off."""
        filters = (after, status, text)
        present = tuple(value is not None for value in filters)
        params = (tenant, *(value for value in filters if value is not None), limit)
        return self._statements[present], params
