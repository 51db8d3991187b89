"""`ticket-tools apply --wait-seconds N`: a batch waits for the writers' lock, up to N seconds."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ticket_tools import fixture_records
from ticket_tools.cli import main
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore

Captured = pytest.CaptureFixture[str]
UPSERT = {
    "op": "upsert",
    "key": "alpha:TKT-301",
    "version": 4,
    "ticket": {"id": "TKT-301", "title": "fed", "status": "open"},
}


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    db = tmp_path / "tickets.sqlite"
    write_database(db, fixture_records())
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps(UPSERT) + "\n", encoding="utf-8")
    return db, feed


def _hold_write_lock(db: Path) -> sqlite3.Connection:
    # What `import --replace` holds from before it reads its file until its commit.
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_apply_gives_up_after_its_wait(paths: tuple[Path, Path], capsys: Captured) -> None:
    db, feed = paths
    holder = _hold_write_lock(db)
    try:
        assert main(["apply", str(feed), "--db", str(db), "--wait-seconds", "0.1"]) == 2
    finally:
        holder.close()
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {db} is locked by another connection; try again\n",
    )


def test_apply_waits_for_the_lock_then_applies(paths: tuple[Path, Path]) -> None:
    db, feed = paths
    holder = _hold_write_lock(db)
    try:
        # The real command: apply handles SIGTERM, which only a main thread may.
        applying = subprocess.Popen(
            [sys.executable, "-m", "ticket_tools.cli", "apply", str(feed), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Released whether or not apply has begun to wait: either way it must not fail.
        with contextlib.suppress(subprocess.TimeoutExpired):
            applying.wait(timeout=1)
        holder.execute("COMMIT")
    finally:
        holder.close()
    out, err = applying.communicate(timeout=60)
    assert (applying.returncode, out, err) == (
        0,
        f"applied 1 change from {feed} to {db}: 1 upserted, 0 deleted, 0 stale\n",
        "",
    )
    with SQLiteStore.open(db) as store:
        assert store.get("alpha", "TKT-301") == {"id": "TKT-301", "title": "fed", "status": "open"}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("0", id="zero"),
        pytest.param("-1", id="negative"),
        pytest.param("1e3", id="exponent"),
        pytest.param("inf", id="infinite"),
    ],
)
def test_what_wait_seconds_refuses(paths: tuple[Path, Path], capsys: Captured, value: str) -> None:
    db, feed = paths
    with pytest.raises(SystemExit) as exited:
        main(["apply", str(feed), "--db", str(db), "--wait-seconds", value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "argument --wait-seconds: expected a number of seconds above 0, e.g. 2.5\n"
    )


def test_on_a_terminal_apply_says_what_it_waits_for(
    paths: tuple[Path, Path], capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, feed = paths
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    holder = _hold_write_lock(db)
    try:
        assert main(["apply", str(feed), "--db", str(db), "--wait-seconds", "0.1"]) == 2
    finally:
        holder.close()
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: waiting for the writers' lock of {db}: another apply or an "
        "import --replace holds it (up to 0.1 s, --wait-seconds)\n"
        f"ticket-tools: {db} is locked by another connection; try again\n",
    )
