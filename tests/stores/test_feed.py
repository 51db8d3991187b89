"""The change feed: each line's rules, and which changes win over what is stored."""

from __future__ import annotations

import json

import pytest

from ticket_tools.stores.feed import (
    MAX_LINE_BYTES,
    Change,
    Counts,
    FeedError,
    has_nul,
    parse_change,
    plan,
)
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.records import MAX_VERSION

KEY_RULE = 'the key is not "tenant:" followed by the ticket\'s own id'
FIELDS_RULE = "id, title and status must be strings of valid Unicode"
VERSION_RULE = "the version is not an integer from 0 to 2^63-1"
WIDTH_RULE = "the id is not TKT- followed by exactly three digits"
STATUS_RULE = 'the status is not "open" or "closed"'
TICKET = {"id": "TKT-120", "title": "VPN drops hourly", "status": "open"}


def _upsert(**fields: object) -> str:
    line: dict[str, object] = {"op": "upsert", "key": "alpha:TKT-120", "version": 7}
    line["ticket"] = TICKET
    line.update(fields)
    return json.dumps(line)


def _delete(**fields: object) -> str:
    return json.dumps({"op": "delete", "key": "alpha:TKT-102", "version": 8, **fields})


def test_an_upsert_line_becomes_a_change_without_internal_fields() -> None:
    line = _upsert(ticket={**TICKET, "internal_note": "secret", "assignee": "x"})
    assert parse_change(line.encode()) == Change(
        "upsert", "alpha", "TKT-120", 7, "VPN drops hourly", "open"
    )


def test_a_delete_line_becomes_a_change() -> None:
    assert parse_change(_delete()) == Change("delete", "alpha", "TKT-102", 8)
    assert parse_change(_delete()).key == ("alpha", "TKT-102")


@pytest.mark.parametrize(
    "version", [pytest.param(0, id="zero"), pytest.param(MAX_VERSION, id="max")]
)
def test_the_version_range_is_inclusive(version: int) -> None:
    assert parse_change(_delete(version=version)).version == version


PRETTY = (
    "the line is not JSON: it ends inside an object or array; a feed holds one whole JSON "
    "object per line (JSON Lines), not pretty-printed JSON"
)


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        pytest.param(b"x", "the line is not JSON", id="not-json"),
        # The first line of a pretty-printed change: the one-change-per-line rule is named.
        pytest.param(b"{", PRETTY, id="pretty-printed-open-brace"),
        pytest.param(b'  {"op": "upsert",  ', PRETTY, id="pretty-printed-first-field"),
        pytest.param(b"[", PRETTY, id="pretty-printed-open-bracket"),
        pytest.param(b"}", "the line is not JSON", id="pretty-printed-close-brace"),
        pytest.param(b'{"op": "upsert", "key": "al', "the line is not JSON", id="cut-in-a-string"),
        pytest.param(b"{} {", "the line is not JSON", id="a-second-object-begun"),
        pytest.param(b"", "the line is not JSON", id="empty"),
        pytest.param(b'{"op": "\xff"}', "the line is not UTF-8 text", id="not-utf8"),
        pytest.param(_delete().encode("utf-16"), "the line is not UTF-8 text", id="utf-16-bom"),
        # ASCII in UTF-16 without a BOM is UTF-8 holding NULs: not JSON text.
        pytest.param(_delete().encode("utf-16-le"), "the line is not JSON", id="utf-16-le-ascii"),
        pytest.param(
            '{"op": "delete", "key": "caf\u00e9:TKT-102", "version": 8}'.encode("utf-16-le"),
            "the line is not UTF-8 text",
            id="utf-16-le",
        ),
        pytest.param(_delete().encode("utf-32"), "the line is not UTF-8 text", id="utf-32"),
        pytest.param(_delete().encode("utf-8-sig"), "the line is not JSON", id="utf-8-bom"),
        pytest.param("[" * 100_000, "the line nests arrays or objects too deeply", id="too-deep"),
        pytest.param(
            b'{"op": "delete", "key": "alpha:TKT-102", "version": ' + b"9" * 5_000 + b"}",
            VERSION_RULE,
            id="version-5000-digits",
        ),
        pytest.param(
            _delete().replace('"version": 8', '"version": -' + "9" * 5_000),
            VERSION_RULE,
            id="version-5000-digits-negative",
        ),
        pytest.param(_delete(version=-(2**63)), VERSION_RULE, id="version-20-chars-in-reach"),
        pytest.param(
            _upsert(ticket={**TICKET, "internal_note": 1})
            .replace('"internal_note": 1', '"internal_note": ' + "1" * 5_000)
            .replace('"version": 7', '"version": ' + "1" * 21),
            VERSION_RULE,
            id="version-21-digits-and-a-long-internal-int",
        ),
        pytest.param(b"x" * (MAX_LINE_BYTES + 1), "the line is longer than 1 MiB", id="too-long"),
        pytest.param("[]", "the line is not a JSON object", id="a-list"),
        pytest.param('"upsert"', "the line is not a JSON object", id="a-string"),
        pytest.param(
            '{"op": "delete", "op": "delete", "key": "alpha:TKT-102", "version": 8}',
            "a field name appears twice in one object",
            id="duplicate-field",
        ),
        pytest.param(
            _upsert(ticket={**TICKET, "x": 1}).replace('"x": 1', '"id": "TKT-121"'),
            "a field name appears twice in one object",
            id="duplicate-ticket-field",
        ),
        pytest.param(_delete(op="insert"), 'the op is not "upsert" or "delete"', id="unknown-op"),
        pytest.param(_delete(op="DELETE"), 'the op is not "upsert" or "delete"', id="op-case"),
        pytest.param(_delete(op=["delete"]), 'the op is not "upsert" or "delete"', id="op-list"),
        pytest.param(
            '{"key": "alpha:TKT-102", "version": 8}',
            'the op is not "upsert" or "delete"',
            id="no-op",
        ),
        pytest.param(
            '{"op": "delete", "key": "alpha:TKT-102"}',
            "delete takes exactly the fields key, op, version",
            id="delete-without-version",
        ),
        pytest.param(
            _delete(ticket=TICKET),
            "delete takes exactly the fields key, op, version",
            id="delete-with-ticket",
        ),
        pytest.param(
            _upsert(verison=7),
            "upsert takes exactly the fields key, op, ticket, version",
            id="misspelt-field",
        ),
        pytest.param(
            json.dumps({"op": "upsert", "key": "alpha:TKT-120", "version": 7}),
            "upsert takes exactly the fields key, op, ticket, version",
            id="upsert-without-ticket",
        ),
        pytest.param(_delete(version=True), VERSION_RULE, id="version-bool"),
        pytest.param(_delete(version=-1), VERSION_RULE, id="version-negative"),
        pytest.param(_delete(version=MAX_VERSION + 1), VERSION_RULE, id="version-too-big"),
        pytest.param(_delete(version=8.0), VERSION_RULE, id="version-float"),
        pytest.param(_delete(version="8"), VERSION_RULE, id="version-string"),
        pytest.param(_delete(version=None), VERSION_RULE, id="version-null"),
        pytest.param(_delete(key=7), "the key is not a string of valid Unicode", id="key-number"),
        pytest.param(
            _delete(key="alpha:TKT-1\ud800"),
            "the key is not a string of valid Unicode",
            id="key-surrogate",
        ),
        pytest.param(_delete(key="TKT-102"), KEY_RULE, id="delete-key-no-tenant"),
        pytest.param(_delete(key=":TKT-102"), KEY_RULE, id="delete-key-empty-tenant"),
        pytest.param(_delete(key="a:b:TKT-102"), KEY_RULE, id="delete-key-colon-in-tenant"),
        pytest.param(_delete(key="alpha:TKT-1020"), WIDTH_RULE, id="delete-key-wide-id"),
        pytest.param(_delete(key="alpha:TKT-10"), WIDTH_RULE, id="delete-key-narrow-id"),
        pytest.param(_delete(key="alpha:TKT-"), KEY_RULE, id="delete-key-no-digits"),
        pytest.param(_delete(key="alpha:TKT-10x"), KEY_RULE, id="delete-key-bad-id"),
        pytest.param(_delete(key="alpha:TKT-١٠٢"), KEY_RULE, id="delete-key-arabic-digits"),
        pytest.param(_delete(key=":TKT-1020"), KEY_RULE, id="delete-key-wide-no-tenant"),
        pytest.param(_delete(key="a:b:TKT-1020"), KEY_RULE, id="delete-key-wide-colon-tenant"),
        pytest.param(_delete(key="TKT-1020"), KEY_RULE, id="delete-key-wide-no-colon"),
        pytest.param(_upsert(key="alpha:TKT-121"), KEY_RULE, id="id-not-the-keys"),
        pytest.param(_upsert(key="beta:x:TKT-120"), KEY_RULE, id="upsert-key-colon-in-tenant"),
        pytest.param(_upsert(key=None), "the key is not a string of valid Unicode", id="key-null"),
        pytest.param(_upsert(ticket=["TKT-120"]), FIELDS_RULE, id="ticket-not-object"),
        pytest.param(_upsert(ticket={"id": "TKT-120", "title": "t"}), FIELDS_RULE, id="no-status"),
        pytest.param(_upsert(ticket={**TICKET, "title": 7}), FIELDS_RULE, id="title-number"),
        pytest.param(_upsert(ticket={**TICKET, "status": "Open"}), STATUS_RULE, id="status-case"),
        pytest.param(_upsert(ticket={**TICKET, "status": ""}), STATUS_RULE, id="status-empty"),
        pytest.param(
            _upsert(ticket={**TICKET, "status": "pending"}), STATUS_RULE, id="status-other"
        ),
        pytest.param(_upsert(ticket={**TICKET, "status": 1}), FIELDS_RULE, id="status-number"),
        pytest.param(
            _upsert(ticket={**TICKET, "id": "TKT-1200"}, key="alpha:TKT-1200"),
            "the id is not TKT- followed by exactly three digits",
            id="id-four-digits",
        ),
    ],
)
def test_a_line_that_breaks_a_rule_is_refused_by_that_rule(line: bytes | str, rule: str) -> None:
    with pytest.raises(FeedError) as caught:
        parse_change(line)
    assert str(caught.value) == rule


def test_an_error_never_echoes_the_line() -> None:
    hidden = "s3cr3t-title"
    line = _upsert(ticket={**TICKET, "title": 7, "internal_note": hidden}, key="alpha:TKT-120")
    with pytest.raises(FeedError) as caught:
        parse_change(line)
    assert hidden not in str(caught.value)
    assert "TKT-120" not in str(caught.value)


def _up(version: int, ticket_id: str = "TKT-101") -> Change:
    return Change("upsert", "alpha", ticket_id, version, f"v{version}", "open")


def _del(version: int, ticket_id: str = "TKT-101") -> Change:
    return Change("delete", "alpha", ticket_id, version)


KEY = ("alpha", "TKT-101")


@pytest.mark.parametrize(
    ("changes", "stored", "winners", "counts"),
    [
        pytest.param([_up(7)], {}, {KEY: _up(7)}, Counts(1, 0, 0), id="new-key"),
        pytest.param([_up(0)], {KEY: 0}, {}, Counts(0, 0, 1), id="equal-version-is-stale"),
        pytest.param([_up(4)], {KEY: 5}, {}, Counts(0, 0, 1), id="older-is-stale"),
        pytest.param([_del(6)], {KEY: 5}, {KEY: _del(6)}, Counts(0, 1, 0), id="delete-newer"),
        pytest.param(
            [_del(3)], {}, {KEY: _del(3)}, Counts(0, 1, 0), id="delete-unknown-leaves-tombstone"
        ),
        pytest.param(
            [_up(7), _del(6), _del(9)],
            {KEY: 5},
            {KEY: _del(9)},
            Counts(1, 1, 1),
            id="docstring-example",
        ),
        pytest.param([_del(9), _up(8)], {}, {KEY: _del(9)}, Counts(0, 1, 1), id="tombstone-holds"),
        pytest.param(
            [_up(2), _up(1, "TKT-102"), _up(3)],
            {("alpha", "TKT-102"): 1},
            {KEY: _up(3)},
            Counts(2, 0, 1),
            id="keys-independent",
        ),
    ],
)
def test_plan_keeps_the_highest_version_per_key(
    changes: list[Change],
    stored: dict[tuple[str, str], int],
    winners: dict[tuple[str, str], Change],
    counts: Counts,
) -> None:
    assert plan(changes, stored) == (winners, counts)


@pytest.mark.parametrize(
    ("changes", "stored", "winners", "counts"),
    [
        pytest.param([_del(3), _up(6)], {}, {KEY: _up(6)}, Counts(1, 0, 1), id="docstring-example"),
        pytest.param([_up(4)], {}, {}, Counts(0, 0, 1), id="at-the-floor-is-stale"),
        pytest.param([_up(5)], {}, {KEY: _up(5)}, Counts(1, 0, 0), id="above-the-floor"),
        pytest.param([_del(2)], {}, {}, Counts(0, 0, 1), id="delete-below-the-floor-is-stale"),
        # A stored version wins over the floor, below it too (a ticket kept by a refresh).
        pytest.param([_up(2)], {KEY: 1}, {KEY: _up(2)}, Counts(1, 0, 0), id="stored-below-floor"),
        pytest.param([_up(6)], {KEY: 7}, {}, Counts(0, 0, 1), id="stored-above-floor"),
    ],
)
def test_plan_counts_an_unknown_key_at_the_floor(
    changes: list[Change],
    stored: dict[tuple[str, str], int],
    winners: dict[tuple[str, str], Change],
    counts: Counts,
) -> None:
    assert plan(changes, stored, 4) == (winners, counts)


def test_counts_add_and_read_as_a_summary() -> None:
    total = Counts(1, 2, 3) + Counts(10, 20, 30)
    assert total == Counts(11, 22, 33)
    assert str(total) == "11 upserted, 22 deleted, 33 stale"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(_up(1), False, id="none"),
        pytest.param(Change("upsert", "alpha", "TKT-101", 1, "a\x00b", "open"), True, id="title"),
        pytest.param(Change("delete", "al\x00pha", "TKT-101", 1), True, id="tenant"),
    ],
)
def test_has_nul(change: Change, expected: bool) -> None:
    assert has_nul(change) is expected


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        pytest.param(
            "alpha:TKT-102", "the id is not TKT- followed by exactly six digits", id="three-in-six"
        ),
        pytest.param(":TKT-000102", KEY_RULE, id="no-tenant"),
    ],
)
def test_a_delete_key_of_another_width_names_the_deployments_width(key: str, rule: str) -> None:
    with pytest.raises(FeedError) as caught:
        parse_change(_delete(key=key), id_format=IdFormat(6))
    assert str(caught.value) == rule
    assert parse_change(_delete(key="alpha:TKT-000102"), id_format=IdFormat(6)) == Change(
        "delete", "alpha", "TKT-000102", 8
    )
