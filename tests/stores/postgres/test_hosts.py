"""HostList: the DSN a new connection gets, less the hosts found frozen lately (a fake clock)."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from ticket_tools.stores.postgres.hosts import SUSPECT_SECONDS, HostList

READER = "dbname=tickets user=ticket_reader target_session_attrs=prefer-standby"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("dsn", "host", "port", "left"),
    [
        pytest.param(
            f"host=s1,s2,p port=5432,5433,5434 {READER}", "s2", 5433,
            {"host": "s1,p", "port": "5432,5434"}, id="a-port-per-host",
        ),
        pytest.param(
            f"host=s1,s2,p port=5432 {READER}", "s1", 5432,
            {"host": "s2,p", "port": "5432"}, id="one-port-for-all",
        ),
        pytest.param(
            f"host=s1,s2 {READER}", "s1", 5432, {"host": "s2"}, id="the-default-port",
        ),
        pytest.param(
            f"hostaddr=10.0.0.1,10.0.0.2 port=5432,5433 {READER}", "10.0.0.2", 5433,
            {"hostaddr": "10.0.0.1", "port": "5432"}, id="addresses-only",
        ),
        pytest.param(
            f"host=s1,s2 hostaddr=10.0.0.1,10.0.0.2 {READER}", "s1", 5432,
            {"host": "s2", "hostaddr": "10.0.0.2"}, id="names-and-addresses",
        ),
        pytest.param(
            "postgresql://ticket_reader@s1:5432,s2:5433/tickets?load_balance_hosts=random",
            "s1", 5432, {"host": "s2", "port": "5433"}, id="a-uri",
        ),
    ],
)  # fmt: skip
def test_a_suspect_host_is_left_out_of_new_connections(
    dsn: str, host: str, port: int, left: dict[str, str]
) -> None:
    hosts = HostList(dsn, clock=Clock())
    hosts.suspect(host, port)
    assert conninfo_to_dict(hosts.conninfo()) == {**conninfo_to_dict(dsn), **left}


@pytest.mark.parametrize(
    ("dsn", "host", "port"),
    [
        pytest.param(f"host=s1,s2 port=5432,5433 {READER}", "s1", 5433, id="another-port"),
        pytest.param(f"host=s1,s2 {READER}", "p", 5432, id="not-in-the-dsn"),
        pytest.param(f"host=s1 {READER}", "s1", 5432, id="the-only-host"),
        pytest.param(f"host=s1,s2 port=1,2,3 {READER}", "s1", 1, id="lists-libpq-refuses"),
        pytest.param(READER, "localhost", 5432, id="no-host"),
    ],
)
def test_what_leaves_the_dsn_as_it_is(dsn: str, host: str, port: int) -> None:
    hosts = HostList(dsn, clock=Clock())
    hosts.suspect(host, port)
    assert hosts.conninfo() == dsn


def test_with_every_host_suspect_all_are_tried() -> None:
    dsn = f"host=s1,s2 {READER}"
    hosts = HostList(dsn, clock=Clock())
    hosts.suspect("s1", 5432)
    assert conninfo_to_dict(hosts.conninfo())["host"] == "s2"
    hosts.suspect("s2", 5432)
    assert hosts.conninfo() == dsn


def test_a_host_comes_back_after_suspect_seconds() -> None:
    clock = Clock()
    dsn = f"host=s1,s2,p {READER}"
    hosts = HostList(dsn, clock=clock)
    hosts.suspect("s1", 5432)
    clock.now += SUSPECT_SECONDS / 2
    hosts.suspect("s2", 5432)
    clock.now += SUSPECT_SECONDS / 2 - 0.001
    assert conninfo_to_dict(hosts.conninfo())["host"] == "p"
    clock.now += 0.001  # s1's time is up, not s2's
    assert conninfo_to_dict(hosts.conninfo())["host"] == "s1,p"
    clock.now += SUSPECT_SECONDS / 2
    assert hosts.conninfo() == dsn
