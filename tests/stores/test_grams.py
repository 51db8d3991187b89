"""stores.grams: a title holding a query has a gram of each of its terms; containers; ids."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ticket_tools.filters import title_contains
from ticket_tools.stores import grams
from ticket_tools.stores.grams import (
    BUCKET_SIZE,
    END,
    GramRow,
    Term,
    build_rows,
    decode,
    encode,
    first_number_after,
    id_number,
    query_terms,
    status_gram,
    ticket_grams,
    title_grams,
    word_grams,
)

# The characters of issue 31's point 2: ASCII, é, ß, CJK, İ (whose lowercase is two code
# points), the Kelvin sign, final sigma, %, _, \, spaces; END itself, and NUL.
ALPHABET = "aAbBkK eéÉßẞİiI\u0307\u212a\u03a3\u03c3\u03c2票据%_\\\x01\x00"
texts = st.text(alphabet=ALPHABET, max_size=12)
queries = st.text(alphabet=ALPHABET, min_size=1, max_size=6)


def _covered(term: Term, title: str) -> bool:
    return any(term.low <= gram <= term.high for gram in title_grams(title))


@given(title=texts, data=st.data())
def test_a_title_holding_a_query_has_a_gram_of_every_term(title: str, data: st.DataObject) -> None:
    # The query a piece of the lowered title: "k" in a title of the Kelvin sign, "i̇" of İ.
    lowered = title.lower()
    assume(lowered)
    start = data.draw(st.integers(0, len(lowered) - 1), label="start")
    end = data.draw(st.integers(start + 1, len(lowered)), label="end")
    query = lowered[start:end]
    assume(title_contains(title, query))
    assert all(_covered(term, title) for term in query_terms(query))


@given(before=texts, query=queries, after=texts)
def test_a_query_inside_any_title_has_its_terms_covered(
    before: str, query: str, after: str
) -> None:
    # The query itself placed in a title, so the property is tested on hits, not only misses;
    # not always one: "A\u03a3" lowers to a final sigma alone, and to a plain one before a
    # letter.
    title = before + query + after
    assume(title_contains(title, query))
    assert all(_covered(term, title) for term in query_terms(query))


TOP = "\U0010ffff"


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        pytest.param(
            "Kerberos",
            [
                ("ker", "ker"),
                ("erb", "erb"),
                ("rbe", "rbe"),
                ("ber", "ber"),
                ("ero", "ero"),
                ("ros", "ros"),
            ],
            id="a-word-its-trigrams",
        ),
        pytest.param("100%", [("100", "100"), ("00%", "00%")], id="percent-is-a-character"),
        pytest.param("qz", [("qz", "qz" + TOP)], id="two-characters-the-grams-they-begin"),
        pytest.param("é", [("é", "é" + TOP + TOP)], id="one-character"),
        pytest.param("İ", [("i\u0307", "i\u0307" + TOP)], id="a-lowercase-of-two-code-points"),
        pytest.param(
            "gin S",
            [
                ("gin", "gin"),
                ("in" + END, "in" + END),
                ("n" + END * 2, "n" + END * 2),
                ("s", "s" + TOP + TOP),
            ],
            id="a-piece-that-ends-a-word-then-one-that-begins-one",
        ),
        pytest.param(
            "a b c",
            [("a" + END * 2, "a" + END * 2), ("b" + END * 2, "b" + END * 2), ("c", "c" + TOP * 2)],
            id="a-whole-word-between",
        ),
        pytest.param(" x", [("x", "x" + TOP * 2)], id="a-leading-space"),
        pytest.param(
            "login login",
            [
                ("gin", "gin"),
                ("in" + END, "in" + END),
                ("log", "log"),
                ("n" + END * 2, "n" + END * 2),
                ("ogi", "ogi"),
            ],
            id="each-term-once",
        ),
        pytest.param("   ", [], id="spaces-alone-no-terms"),
    ],
)
def test_query_terms(query: str, terms: list[tuple[str, str]]) -> None:
    assert query_terms(query) == tuple(Term(*term) for term in terms)


def test_title_grams_are_each_words_padded_trigrams() -> None:
    assert title_grams("Login fails") == {
        "log", "ogi", "gin", "in" + END, "n" + END * 2,
        "fai", "ail", "ils", "ls" + END, "s" + END * 2,
    }  # fmt: skip
    assert title_grams("İ  x") == {"i\u0307" + END, "\u0307" + END * 2, "x" + END * 2}
    assert word_grams("") == frozenset()


def test_a_status_is_a_gram_no_title_has() -> None:
    assert ticket_grams("ab", "open") == {"ab" + END, "b" + END * 2, END * 4 + "open"}
    # Four characters before the status: every title gram has three.
    assert all(len(gram) == 3 for gram in title_grams("\x01\x01\x01\x01open x"))
    assert status_gram("") == END * 4


@given(offsets=st.sets(st.integers(min_value=0, max_value=BUCKET_SIZE - 1)))
def test_a_container_holds_its_offsets(offsets: set[int]) -> None:
    ordered = sorted(offsets)
    assert list(decode(encode(ordered))) == ordered


def test_containers_are_little_endian_on_any_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert encode([1, 258]) == b"\x01\x00\x02\x01"
    # What a big-endian machine does: it swaps, and so reads and writes the same bytes.
    monkeypatch.setattr(grams, "_SWAP", True)
    swapped = encode([1, 258])
    assert (swapped, list(decode(swapped))) == (b"\x00\x01\x01\x02", [1, 258])


def test_id_number() -> None:
    assert (id_number("TKT-000104"), id_number("TKT-999")) == (104, 999)


@pytest.mark.parametrize(
    ("after", "number"),
    [
        pytest.param(None, 0, id="no-cursor"),
        pytest.param("TKT-104", 105, id="an-id"),
        pytest.param("TKT-1", 100, id="a-prefix"),
        pytest.param("TKT-10a", 110, id="a-letter-after-digits"),
        pytest.param("TKT-0999", 100, id="longer-than-an-id"),
        pytest.param("A", 0, id="before-every-id"),
        pytest.param("TKT-999", None, id="the-last-id"),
        pytest.param("U", None, id="after-every-id"),
    ],
)
def test_first_number_after(after: str | None, number: int | None) -> None:
    assert first_number_after(after, 3) == number


@given(after=st.text(alphabet="TK-0159a\x00\uffff", max_size=7))
def test_first_number_after_is_the_first_id_past_the_cursor(after: str) -> None:
    past = [n for n in range(1000) if f"TKT-{n:03d}" > after]
    assert first_number_after(after, 3) == (past[0] if past else None)


def test_build_rows_one_bucket_at_a_time_grams_sorted() -> None:
    tickets = [
        ("TKT-000001", "ab", "open"),
        ("TKT-000002", "b a", "closed"),
        ("TKT-004097", "ab ab", "open"),
    ]
    assert list(build_rows("alpha", tickets)) == [
        GramRow("alpha", status_gram("closed"), 0, encode([2])),
        GramRow("alpha", status_gram("open"), 0, encode([1])),
        GramRow("alpha", "a" + END * 2, 0, encode([2])),
        GramRow("alpha", "ab" + END, 0, encode([1])),
        GramRow("alpha", "b" + END * 2, 0, encode([1, 2])),
        GramRow("alpha", status_gram("open"), 1, encode([1])),
        GramRow("alpha", "ab" + END, 1, encode([1])),
        GramRow("alpha", "b" + END * 2, 1, encode([1])),
    ]
    assert list(build_rows("alpha", [])) == []


@given(
    tickets=st.dictionaries(
        st.integers(min_value=0, max_value=3 * BUCKET_SIZE),
        st.tuples(texts, st.sampled_from(("open", "closed", ""))),
        max_size=20,
    )
)
def test_build_rows_holds_each_tickets_grams(tickets: dict[int, tuple[str, str]]) -> None:
    triples = [(f"TKT-{number:06d}", *tickets[number]) for number in sorted(tickets)]
    held: dict[str, set[int]] = {}
    for row in build_rows("alpha", triples):
        numbers = {row.bucket * BUCKET_SIZE + offset for offset in decode(row.container)}
        held.setdefault(row.gram, set()).update(numbers)
    expected: dict[str, set[int]] = {}
    for number, (title, status) in tickets.items():
        for gram in ticket_grams(title, status):
            expected.setdefault(gram, set()).add(number)
    assert held == expected
