"""Which hosts of a multi-host DSN new connections try: a host that froze lately is skipped.

psycopg walks a DSN's hosts (`host=s1,s2,p`) in order, or shuffled with
`load_balance_hosts=random`, and gives each one `connect_timeout` (2 s at least). A
host that froze (a partition, a stopped process) still accepts the TCP connection, then
never answers: every new connection that tries it waits out that timeout, twice with
`target_session_attrs=prefer-standby` (its standby pass, then its any-host pass), and
random order may pick it again on every reconnect. `HostList` remembers the hosts that a
call found frozen (`suspect`) for `SUSPECT_SECONDS` and gives the pool the DSN without
them (`conninfo`); when every host is suspect, all are tried again.

Hosts are read from the DSN's own `host`, `hostaddr` and `port` lists (libpq's rules:
one port for all, or one per host), not from the `PG*` environment variables.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from psycopg.conninfo import conninfo_to_dict, make_conninfo

SUSPECT_SECONDS = 30.0
"""How long a frozen host is left out of new connections. Long enough that a host still
frozen is not tried again at every reconnect; short, because being left out costs a
healthy host nothing but new connections (the pool keeps those it has elsewhere)."""


@dataclass(frozen=True)
class _Host:
    host: str
    """The entry of the `host` list ("" when only `hostaddr` names it)."""
    hostaddr: str
    """The entry of the `hostaddr` list, or ""."""
    port: str
    """Its port, or "" for the default."""


class HostList:
    """The hosts of one DSN, and for each one found frozen, until when it is left out."""

    def __init__(self, dsn: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Read the hosts of `dsn` (a key=value string or a URI)."""
        self._dsn = dsn
        self._clock = clock
        self._params = conninfo_to_dict(dsn)
        self._hosts = _hosts(self._params)
        self._suspect_until: dict[_Host, float] = {}
        self._lock = threading.Lock()

    def suspect(self, host: str, port: int) -> None:
        """Leave the DSN's entry for `host` and `port` (a connection's) out for a while."""
        until = self._clock() + SUSPECT_SECONDS
        with self._lock:
            for entry in self._hosts:
                if host in (entry.host, entry.hostaddr) and entry.port in ("", str(port)):
                    self._suspect_until[entry] = until

    def conninfo(self) -> str:
        """Return the DSN for a new connection: without the suspect hosts, unless all are."""
        now = self._clock()
        with self._lock:
            for entry, until in list(self._suspect_until.items()):
                if until <= now:
                    del self._suspect_until[entry]
            kept = [entry for entry in self._hosts if entry not in self._suspect_until]
            suspects = bool(self._suspect_until)
        if not (suspects and kept):
            return self._dsn
        params = dict(self._params)
        for name in _LISTS:
            if "," in str(params.get(name, "")):  # a list, one value per host; one value is for all
                params[name] = ",".join(getattr(entry, name) for entry in kept)
        return make_conninfo("", **params)


def _hosts(params: Mapping[str, object]) -> list[_Host]:
    """Return the DSN's host entries, pairing its host, hostaddr and port lists as libpq does.

    A list of one value stands for every host; lists of other unequal lengths, which
    libpq refuses at connect, give no entries (nothing is ever left out of such a DSN).
    """
    lists = [str(params.get(name, "")).split(",") for name in _LISTS]
    count = max(len(values) for values in lists)
    if any(len(values) not in (1, count) for values in lists):
        return []
    hosts, addresses, ports = (values * count if len(values) == 1 else values for values in lists)
    return [_Host(*entry) for entry in zip(hosts, addresses, ports, strict=True)]


_LISTS = ("host", "hostaddr", "port")
