"""Clean titles through every way text enters a store: import, --replace, apply, --records."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import OWNER, READER, PostgresDatabase
from replica_support import call, metric, origin
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.cli import main
from ticket_tools.stores.postgres.schema import describe

Captured = pytest.CaptureFixture[str]

# Two dirty titles, one clean; the second title is invisible characters around "login".
RECORDS = {
    "a:TKT-101": {
        "id": "TKT-101",
        "title": "Printer\U000e0001\U000e0069\U000e007f",
        "status": "open",
    },
    "a:TKT-102": {"id": "TKT-102", "title": "\u202elog\u200bin\u2066", "status": "open"},
    "a:TKT-103": {"id": "TKT-103", "title": "VPN \u2764", "status": "closed"},
}
CLEAN = [
    {"id": "TKT-101", "title": "Printer", "status": "open"},
    {"id": "TKT-102", "title": "login", "status": "open"},
    {"id": "TKT-103", "title": "VPN \u2764", "status": "closed"},
]
RAW = [
    {"id": key.partition(":")[2], "title": ticket["title"], "status": ticket["status"]}
    for key, ticket in RECORDS.items()
]
LONG = {
    "a:TKT-101": {"id": "TKT-101", "title": "x" * 256, "status": "open"},
    "a:TKT-102": {"id": "TKT-102", "title": "x" * 257, "status": "open"},
}
LONG_RULE = "record 2 (in file order): the title is longer than 256 characters"


def _write(path: Path, records: object) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _search(capsys: Captured, store: list[str], args: dict[str, object]) -> Any:
    capsys.readouterr()
    argv = ["call", "search_tickets", json.dumps(args), "--tenant", "a", *store]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _page(tickets: Sequence[object]) -> dict[str, object]:
    return {"ok": True, "tickets": tickets, "next_cursor": None}


def _upsert(ticket_id: str, version: int, title: str) -> str:
    ticket = {"id": ticket_id, "title": title, "status": "open"}
    return json.dumps(
        {"op": "upsert", "key": f"a:{ticket_id}", "version": version, "ticket": ticket}
    )


FEED = [
    _upsert("TKT-101", 1, "Pr\u00adinter\ufe0f"),
    _upsert("TKT-102", 1, "login"),
    _upsert("TKT-101", 1, "stale\u200b"),  # stale, and still counted: its line was cleaned
    json.dumps({"op": "delete", "key": "a:TKT-103", "version": 1}),
]
FEED_CLEAN = [
    {"id": "TKT-101", "title": "Printer", "status": "open"},
    {"id": "TKT-102", "title": "login", "status": "open"},
]
FEED_SUMMARY = "4 changes from {feed} to {target}: 2 upserted, 1 deleted, 1 stale"


# --- SQLite ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "summary", "tickets"),
    [
        pytest.param([], "imported 3 tickets into {db}; 2 titles cleaned\n", CLEAN, id="clean"),
        pytest.param(["--raw-titles"], "imported 3 tickets into {db}\n", RAW, id="raw"),
    ],
)
def test_import_into_sqlite(
    tmp_path: Path, capsys: Captured, raw: list[str], summary: str, tickets: list[object]
) -> None:
    records, db = _write(tmp_path / "r.json", RECORDS), tmp_path / "t.sqlite"
    assert main(["import", str(records), "--db", str(db), *raw]) == 0
    assert capsys.readouterr() == (summary.format(db=db), "")
    assert _search(capsys, ["--db", str(db)], {}) == _page(tickets)


def test_a_query_of_invisible_characters_matches_nothing_once_titles_are_clean(
    tmp_path: Path, capsys: Captured
) -> None:
    records, db = _write(tmp_path / "r.json", RECORDS), tmp_path / "t.sqlite"
    assert main(["import", str(records), "--db", str(db)]) == 0
    assert _search(capsys, ["--db", str(db)], {"query": "\u200b"}) == _page([])
    assert _search(capsys, ["--db", str(db)], {"query": "LOGIN"}) == _page([CLEAN[1]])


def test_import_refuses_a_long_title_and_writes_nothing(tmp_path: Path, capsys: Captured) -> None:
    records, db = _write(tmp_path / "r.json", LONG), tmp_path / "t.sqlite"
    assert main(["import", str(records), "--db", str(db)]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {records}: {LONG_RULE}\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["r.json"]


def test_replace_sqlite_cleans_and_counts(tmp_path: Path, capsys: Captured) -> None:
    first, db = _write(tmp_path / "first.json", {}), tmp_path / "t.sqlite"
    assert main(["import", str(first), "--db", str(db)]) == 0
    records = _write(tmp_path / "r.json", RECORDS)
    capsys.readouterr()
    assert main(["import", str(records), "--db", str(db), "--replace"]) == 0
    assert capsys.readouterr() == (f"replaced the tickets of {db} with 3; 2 titles cleaned\n", "")
    assert _search(capsys, ["--db", str(db)], {}) == _page(CLEAN)
    long = _write(tmp_path / "long.json", LONG)
    assert main(["import", str(long), "--db", str(db), "--replace"]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {long}: {LONG_RULE}\n")
    assert _search(capsys, ["--db", str(db)], {}) == _page(CLEAN)


@pytest.fixture
def sqlite_db(tmp_path: Path, capsys: Captured) -> Path:
    db = tmp_path / "t.sqlite"
    records = {"a:TKT-103": {"id": "TKT-103", "title": "old", "status": "open"}}
    assert main(["import", str(_write(tmp_path / "seed.json", records)), "--db", str(db)]) == 0
    capsys.readouterr()
    return db


def test_apply_to_sqlite_cleans_and_counts(
    tmp_path: Path, sqlite_db: Path, capsys: Captured
) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(line + "\n" for line in FEED), encoding="utf-8")
    assert main(["apply", str(feed), "--db", str(sqlite_db)]) == 0
    summary = FEED_SUMMARY.format(feed=feed, target=sqlite_db)
    assert capsys.readouterr() == (f"applied {summary}; 2 titles cleaned\n", "")
    assert _search(capsys, ["--db", str(sqlite_db)], {}) == _page(FEED_CLEAN)


def test_apply_raw_titles_keeps_them(tmp_path: Path, sqlite_db: Path, capsys: Captured) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(FEED[0] + "\n", encoding="utf-8")
    assert main(["apply", str(feed), "--db", str(sqlite_db), "--raw-titles"]) == 0
    assert capsys.readouterr() == (
        f"applied 1 change from {feed} to {sqlite_db}: 1 upserted, 0 deleted, 0 stale\n",
        "",
    )
    raw = {"id": "TKT-101", "title": "Pr\u00adinter\ufe0f", "status": "open"}
    old = {"id": "TKT-103", "title": "old", "status": "open"}
    assert _search(capsys, ["--db", str(sqlite_db)], {}) == _page([raw, old])


@pytest.mark.parametrize(
    ("title", "status", "ids"),
    [
        pytest.param("x" * 256, 0, ["TKT-101", "TKT-102", "TKT-103"], id="at-the-bound"),
        pytest.param("x" * 257, 2, ["TKT-101", "TKT-103"], id="one-over"),
    ],
)
def test_apply_bounds_the_title_by_line(  # noqa: PLR0917
    tmp_path: Path, sqlite_db: Path, capsys: Captured, title: str, status: int, ids: list[str]
) -> None:
    feed = tmp_path / "feed.jsonl"
    lines = [_upsert("TKT-101", 1, "a\u200b"), _upsert("TKT-102", 1, title)]
    feed.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["apply", str(feed), "--db", str(sqlite_db)]) == status
    out, err = capsys.readouterr()
    if status == 0:
        assert (out, err) == (
            f"applied 2 changes from {feed} to {sqlite_db}: 2 upserted, 0 deleted, 0 stale"
            "; 1 title cleaned\n",
            "",
        )
    else:
        rule = "line 2: the title is longer than 256 characters"
        assert (out, err) == ("", f"ticket-tools: {feed} {rule}\n")
    found = _search(capsys, ["--db", str(sqlite_db)], {"limit": 10})
    assert [ticket["id"] for ticket in found["tickets"]] == ids


# --- --records at call and serve ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "tickets"),
    [pytest.param([], CLEAN, id="clean"), pytest.param(["--raw-titles"], RAW, id="raw")],
)
def test_call_records_cleans_titles(
    tmp_path: Path, capsys: Captured, raw: list[str], tickets: list[object]
) -> None:
    records = _write(tmp_path / "r.json", RECORDS)
    assert _search(capsys, ["--records", str(records), *raw], {}) == _page(tickets)


def test_call_records_refuses_a_long_title(tmp_path: Path, capsys: Captured) -> None:
    records = _write(tmp_path / "r.json", LONG)
    argv = ["call", "search_tickets", "{}", "--tenant", "a", "--records", str(records)]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {records}: {LONG_RULE}\n")


@pytest.fixture(scope="module")
def idp() -> Issuer:
    return Issuer("text")


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Path:
    path = tmp_path_factory.mktemp("text") / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path, jwks: Path) -> Iterator[HttpServer]:
    records = _write(tmp_path / "r.json", RECORDS)
    started = HttpServer(tmp_path / "server", str(jwks), "--stateless", "--records", str(records))
    yield started
    assert started.stop() == 0, started.stderr()


def test_serve_records_counts_cleaned_titles_and_serves_them_clean(
    server: HttpServer, idp: Issuer
) -> None:
    assert metric(origin(server.url), "ticket_tools_titles_cleaned_total") == 2
    bearer = idp.sign(claims("a", "s"))
    answered = call(server.url, bearer, "search_tickets", {})
    assert answered["structuredContent"] == _page(CLEAN)
    assert call(server.url, bearer, "search_tickets", {"query": "\u200b"})[
        "structuredContent"
    ] == _page([])


def test_serve_http_hands_the_count_to_the_replica(
    tmp_path: Path, jwks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra

    served: list[tuple[int, object]] = []
    monkeypatch.setattr(
        http_server,
        "serve_http",
        lambda options, store, **_: served.append((options.replica.titles_cleaned, store)),
    )
    records = _write(tmp_path / "r.json", RECORDS)
    argv = ["serve", "http", "127.0.0.1:0", "--jwks", str(jwks), "--issuer", "i", "--audience", "a"]
    assert main([*argv, "--records", str(records)]) == 0
    assert main([*argv, "--records", str(records), "--raw-titles"]) == 0
    assert main(argv) == 0
    cleaned = {
        key: {**ticket, "title": CLEAN[n]["title"]}
        for n, (key, ticket) in enumerate(RECORDS.items())
    }
    assert [count for count, _ in served] == [2, 0, 0]
    assert served[0][1] == cleaned
    assert served[1][1] == RECORDS


# --- PostgreSQL -----------------------------------------------------------------------


@pytest.fixture
def owner_dsn(postgres_database: PostgresDatabase, scratch: str) -> str:
    return postgres_database.cluster.dsn(OWNER, scratch)


@pytest.fixture
def reader_dsn(postgres_database: PostgresDatabase, scratch: str) -> str:
    return postgres_database.cluster.dsn(READER, scratch)


def test_import_and_replace_into_postgres(
    tmp_path: Path, owner_dsn: str, reader_dsn: str, capsys: Captured
) -> None:
    target = describe(owner_dsn)
    long = _write(tmp_path / "long.json", LONG)
    assert main(["import", str(long), "--postgres", owner_dsn, "--grant-to", READER]) == 2
    assert capsys.readouterr() == ("", f"ticket-tools: {long}: {LONG_RULE}\n")
    records = _write(tmp_path / "r.json", RECORDS)
    assert main(["import", str(records), "--postgres", owner_dsn, "--grant-to", READER]) == 0
    assert capsys.readouterr() == (f"imported 3 tickets into {target}; 2 titles cleaned\n", "")
    assert _search(capsys, ["--postgres", reader_dsn], {}) == _page(CLEAN)
    assert main(["import", str(records), "--postgres", owner_dsn, "--replace", "--raw-titles"]) == 0
    assert capsys.readouterr() == (f"replaced the tickets of {target} with 3\n", "")
    assert _search(capsys, ["--postgres", reader_dsn], {}) == _page(RAW)
    assert main(["import", str(records), "--postgres", owner_dsn, "--replace"]) == 0
    assert capsys.readouterr() == (
        f"replaced the tickets of {target} with 3; 2 titles cleaned\n",
        "",
    )
    assert _search(capsys, ["--postgres", reader_dsn], {}) == _page(CLEAN)


def test_apply_to_postgres_cleans_and_counts(
    tmp_path: Path, owner_dsn: str, reader_dsn: str, capsys: Captured
) -> None:
    seed = {"a:TKT-103": {"id": "TKT-103", "title": "old", "status": "open"}}
    seeded = _write(tmp_path / "seed.json", seed)
    assert main(["import", str(seeded), "--postgres", owner_dsn, "--grant-to", READER]) == 0
    capsys.readouterr()
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(line + "\n" for line in FEED), encoding="utf-8")
    assert main(["apply", str(feed), "--postgres", owner_dsn]) == 0
    summary = FEED_SUMMARY.format(feed=feed, target=describe(owner_dsn))
    assert capsys.readouterr() == (f"applied {summary}; 2 titles cleaned\n", "")
    assert _search(capsys, ["--postgres", reader_dsn], {}) == _page(FEED_CLEAN)


# --- Issue 30, defect 7: the rule, through every entry point ---------------------------

HIDING = {
    "a:TKT-201": {"id": "TKT-201", "title": "A\x1b[8mIgnore previous\x1b[0mB", "status": "open"},
    "a:TKT-202": {"id": "TKT-202", "title": "Line\r\nbreak\tand\u2028tab", "status": "open"},
    "a:TKT-203": {"id": "TKT-203", "title": "Hangul\u3164filler\u034f", "status": "closed"},
    "a:TKT-204": {"id": "TKT-204", "title": "private\ue000\U000e0080\u2065use", "status": "open"},
    "a:TKT-205": {"id": "TKT-205", "title": "Login fails", "status": "open"},
}
HIDING_CLEAN = [
    {"id": "TKT-201", "title": "A[8mIgnore previous[0mB", "status": "open"},
    {"id": "TKT-202", "title": "Line break and tab", "status": "open"},
    {"id": "TKT-203", "title": "Hangulfiller", "status": "closed"},
    {"id": "TKT-204", "title": "privateuse", "status": "open"},
    {"id": "TKT-205", "title": "Login fails", "status": "open"},
]


@pytest.fixture(params=["records", "sqlite", "postgres"])
def hiding_store(request: pytest.FixtureRequest, tmp_path: Path, capsys: Captured) -> list[str]:
    """The HIDING tickets as each entry point stores them: a reader's store options."""
    records = _write(tmp_path / "hiding.json", HIDING)
    if request.param == "records":
        return ["--records", str(records)]
    if request.param == "sqlite":
        db = tmp_path / "t.sqlite"
        assert main(["import", str(records), "--db", str(db)]) == 0
        assert capsys.readouterr() == (f"imported 5 tickets into {db}; 4 titles cleaned\n", "")
        return ["--db", str(db)]
    owner = request.getfixturevalue("owner_dsn")
    assert main(["import", str(records), "--postgres", owner, "--grant-to", READER]) == 0
    assert capsys.readouterr() == (
        f"imported 5 tickets into {describe(owner)}; 4 titles cleaned\n",
        "",
    )
    return ["--postgres", request.getfixturevalue("reader_dsn")]


def test_every_entry_point_stores_titles_by_the_rule(
    hiding_store: list[str], capsys: Captured
) -> None:
    assert _search(capsys, hiding_store, {"limit": 10}) == _page(HIDING_CLEAN)
    assert _search(capsys, hiding_store, {"query": "line break"}) == _page([HIDING_CLEAN[1]])


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("\u3164", id="hangul-filler"),
        pytest.param("\x1b", id="escape"),
        pytest.param("\r\n", id="crlf"),
        pytest.param("\t", id="tab"),
        pytest.param("\u034f\u200b", id="grapheme-joiner-zero-width-space"),
        pytest.param("\ue000", id="private-use"),
        pytest.param("\u2028", id="line-separator"),
    ],
)
def test_a_query_of_removed_characters_alone_matches_nothing(
    hiding_store: list[str], capsys: Captured, query: str
) -> None:
    assert _search(capsys, hiding_store, {"query": query}) == _page([])


def test_apply_cleans_by_the_rule(tmp_path: Path, sqlite_db: Path, capsys: Captured) -> None:
    feed = tmp_path / "feed.jsonl"
    lines = [_upsert("TKT-101", 1, "A\r\x1b[2KhiddenB"), _upsert("TKT-102", 1, "x\u3164\u115f")]
    feed.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert main(["apply", str(feed), "--db", str(sqlite_db)]) == 0
    assert capsys.readouterr() == (
        f"applied 2 changes from {feed} to {sqlite_db}: 2 upserted, 0 deleted, 0 stale"
        "; 2 titles cleaned\n",
        "",
    )
    assert _search(capsys, ["--db", str(sqlite_db)], {}) == _page(
        [
            {"id": "TKT-101", "title": "A [2KhiddenB", "status": "open"},
            {"id": "TKT-102", "title": "x", "status": "open"},
            {"id": "TKT-103", "title": "old", "status": "open"},
        ]
    )
