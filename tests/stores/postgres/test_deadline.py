"""DeadlineConnection: a server that does not answer in time ends the wait, never the thread.

A statement that sleeps past the limit stands for a frozen server: from the client's side
both are a socket that stays silent.
"""

from __future__ import annotations

import time

import pytest

from conftest import PostgresDatabase
from ticket_tools.stores.postgres.deadline import DeadlineConnection, ServerSilent

SLEEP = "SELECT pg_sleep(5)"  # well past every limit below; the server ends it when we leave


def _connect(database: PostgresDatabase) -> DeadlineConnection:
    return DeadlineConnection.connect(database.reader, autocommit=True)


def test_without_a_deadline_or_limit_it_waits_as_psycopg_does(
    postgres_database: PostgresDatabase,
) -> None:
    with _connect(postgres_database) as connection:
        assert connection.execute("SELECT 1").fetchall() == [(1,)]


@pytest.mark.parametrize("by", ["deadline", "wait_limit"])
def test_past_the_deadline_or_limit_the_connection_is_closed_and_its_host_told(
    postgres_database: PostgresDatabase, by: str
) -> None:
    told: list[tuple[str, int]] = []
    with _connect(postgres_database) as connection:
        host, port = connection.info.host, connection.info.port
        connection.on_frozen = lambda *where: told.append(where)
        if by == "deadline":
            connection.wait_limit = 60.0  # the call's deadline comes first
            connection.deadline = time.monotonic() + 0.2
        else:
            connection.wait_limit = 0.2
        with pytest.raises(ServerSilent):
            connection.execute(SLEEP)
        assert (connection.closed, told) == (True, [(host, port)])


def test_a_deadline_already_past_still_takes_an_answer_that_is_there(
    postgres_database: PostgresDatabase,
) -> None:
    # The least wait is one look at the socket: a past deadline fails the statement
    # without hanging, and tells no one when nobody listens.
    with _connect(postgres_database) as connection:
        connection.deadline = time.monotonic() - 1.0
        with pytest.raises(ServerSilent):
            connection.execute(SLEEP)
        assert connection.closed


def test_a_shorter_timeout_of_psycopgs_own_is_psycopgs(postgres_database: PostgresDatabase) -> None:
    # notifies(timeout=...) ends its own wait: the connection stays open, no host is told.
    told: list[tuple[str, int]] = []
    with _connect(postgres_database) as connection:
        connection.wait_limit = 60.0
        connection.on_frozen = lambda *where: told.append(where)
        assert (list(connection.notifies(timeout=0.1)), connection.closed, told) == ([], False, [])
        assert connection.execute("SELECT 1").fetchall() == [(1,)]
