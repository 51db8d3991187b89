"""`apply` and `import` pointed at a hot standby: one line saying they need the primary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from standby_tickets import replicated_tickets
from testkit.postgres import ReplicatedClusters, ThrowawayCluster
from ticket_tools.cli import main
from ticket_tools.stores.postgres.schema import describe

OWNER = "ticket_owner"
RECORDS = {"alpha:TKT-101": {"id": "TKT-101", "tenant": "alpha", "title": "Jam", "status": "open"}}
HINT = (
    "it is a read-only standby; writes need the primary: "
    "add target_session_attrs=read-write to the DSN"
)

Captured = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def clusters() -> Iterator[ReplicatedClusters]:
    with replicated_tickets(RECORDS, reader=None) as pair:
        yield pair


def _tickets(cluster: ThrowawayCluster) -> str:
    return cluster.sql(
        "SELECT tenant, id, title, version FROM tickets ORDER BY id", dbname="tickets"
    )


def test_apply_to_a_standby_says_it_needs_the_primary(
    clusters: ReplicatedClusters, tmp_path: Path, capsys: Captured
) -> None:
    feed = tmp_path / "feed.jsonl"
    change = {"op": "delete", "key": "alpha:TKT-101", "version": 1}
    feed.write_text(json.dumps(change) + "\n")
    dsn = clusters.standbys[0].dsn(OWNER, "tickets")
    assert main(["apply", str(feed), "--postgres", dsn]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: cannot write {describe(dsn)}: {HINT}\n")
    assert _tickets(clusters.primary) == "alpha|TKT-101|Jam|0"


@pytest.mark.parametrize(
    ("options", "action"),
    [
        pytest.param([], "import into", id="import"),
        pytest.param(["--replace"], "replace the tickets of", id="import-replace"),
    ],
)
def test_import_to_a_standby_says_it_needs_the_primary(
    clusters: ReplicatedClusters, tmp_path: Path, capsys: Captured, options: list[str], action: str
) -> None:
    records = tmp_path / "records.json"
    records.write_text(json.dumps(RECORDS))
    dsn = clusters.standbys[0].dsn(OWNER, "tickets")
    assert main(["import", str(records), "--postgres", dsn, *options]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: cannot {action} {describe(dsn)}: {HINT}\n")
    assert _tickets(clusters.primary) == "alpha|TKT-101|Jam|0"
