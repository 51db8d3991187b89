"""A connection whose every wait on the server ends by a deadline: a frozen host hangs no call.

`statement_timeout` is the server's own: a server that froze (a partition, a stopped
process) never sends its cancel, and the kernel keeps the socket open, so psycopg would
wait for ever. psycopg runs each statement's I/O through `Connection.wait`; here it gets
the call's deadline. Past it, the connection is closed (it is mid-protocol, unusable) and
`on_frozen` is told its host, before the connection goes back to the pool, and the
call fails with `ServerSilent`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.rows import TupleRow

RV = TypeVar("RV")

# What `Connection.wait` raises at its timeout: an OperationalError of psycopg's own.
_WAIT_TIMEOUT = psycopg.errors._WaitTimeout
# psycopg's own interval between checks for Ctrl-C while it waits.
_WAIT_INTERVAL = 0.1


class ServerSilent(psycopg.OperationalError):
    """The server did not answer by the call's deadline: it froze, or the link to it did."""


class DeadlineConnection(psycopg.Connection[TupleRow]):
    """A pooled reader connection: its waits end by `deadline` (a call's) or `wait_limit`."""

    deadline: float | None = None
    """When (`time.monotonic`) the call using the connection must be over; None: none now."""
    wait_limit: float | None = None
    """Seconds any one wait may take outside a call (the pool's checks); None: no limit."""
    on_frozen: Callable[[str, int], None] | None = None
    """Told the host and port of the connection when a wait passed its deadline or limit."""

    def wait(
        self, gen: PQGen[RV], interval: float = _WAIT_INTERVAL, timeout: float | None = None
    ) -> RV:
        """Consume `gen` as psycopg does, within the deadline or limit too."""
        limit = self.wait_limit if self.deadline is None else self.deadline - time.monotonic()
        if limit is None or (timeout is not None and timeout <= limit):
            return super().wait(gen, interval, timeout)
        try:
            # A deadline already past: one look at the socket, no wait.
            return super().wait(gen, interval, max(limit, 0.0))
        except _WAIT_TIMEOUT:
            host, port = self.info.host, self.info.port
            self.close()
            if self.on_frozen is not None:
                self.on_frozen(host, port)
            raise ServerSilent("the server did not answer by the deadline") from None
