"""The title index's data: the trigrams of a title's words, a query's terms, and their containers.

The index proposes candidates; the contract's rule (`filters.title_contains`) decides.
So the one property everything here must keep is: a title that contains a query has
a gram in every one of the query's terms. A title is lowered by Python's `str.lower()`,
as the rule lowers it, then split at each space into words, and each word, followed by
two END marks, gives the trigram starting at each of its characters:

    "Login fails" -> "login fails" -> words "login", "fails"
    -> "log" "ogi" "gin" "in\\x01" "n\\x01\\x01" "fai" "ail" "ils" "ls\\x01" "s\\x01\\x01"

A query is lowered and split the same way (`query_terms`). Its first piece ends a title's
word, its last begins one, the pieces between are whole words; so every trigram of each
piece, with the END marks where the piece ends a word, is a gram of any title holding it.
A piece of one or two characters begins some gram: its term is the range of grams that
start with it. A title holding END itself only shares grams with others (a candidate too
many, which the rule refuses), never loses one.

A ticket's status is a gram too: STATUS_MARK and the status as it is (no title gram is
longer than three characters, so none is one), so the rare status is a term like a rare
word, and a status with a text one term more.

A tenant's ids are cut into buckets of BUCKET_SIZE consecutive numbers; a gram's
container in a bucket is the sorted offsets (id number % BUCKET_SIZE) of the bucket's
tickets that have it, two bytes each, little-endian.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from ticket_tools.stores.ids import ID_PREFIX

END = "\x01"
"""Marks the end of a word in a gram. Any character would do (see above); this one sorts
before every printable one and PostgreSQL text can hold it (not NUL)."""
# The greatest code point: a range term's upper end (a gram is at most three of them).
_TOP = "\U0010ffff"
BUCKET_BITS = 12
# 4,096 ids a bucket: an offset fits in two bytes, a container in a page for all but
# the commonest grams, and one bucket's grams are built in a few megabytes.
BUCKET_SIZE = 1 << BUCKET_BITS
_NUMBER_START = len(ID_PREFIX)
_OFFSET_MASK = BUCKET_SIZE - 1
# Containers are little-endian whichever machine writes or reads them.
_SWAP = sys.byteorder == "big"
# Words whose grams are remembered while an index is built: a common word is split once.
_WORD_CACHE = 1 << 12


@lru_cache(maxsize=_WORD_CACHE)
def word_grams(word: str) -> frozenset[str]:
    """Return the grams of one lowered word: the trigram at each of its characters, END-padded.

    "gin" -> {"gin", "in\\x01", "n\\x01\\x01"}; "" -> {}.
    """
    padded = word + END + END
    return frozenset([padded[start : start + 3] for start in range(len(word))])


def title_grams(title: str) -> set[str]:
    """Return every gram of a stored title (lowered here, as the contract's rule lowers it)."""
    grams: set[str] = set()
    for word in title.lower().split(" "):
        grams |= word_grams(word)
    return grams


STATUS_MARK = END * 4
"""Begins a status's gram: four characters, where a title's grams have three."""


def status_gram(status: str) -> str:
    """Return the gram of a status: STATUS_MARK + "open"; the status kept as it is."""
    return STATUS_MARK + status


def ticket_grams(title: str, status: str) -> set[str]:
    """Return every gram of a stored ticket: its title's and its status's."""
    return title_grams(title) | {status_gram(status)}


class Term(NamedTuple):
    """Grams from `low` to `high` (inclusive, code-point order): one of them, or a range."""

    low: str
    high: str


def query_terms(text: str) -> tuple[Term, ...]:
    """Return the terms a title must each have a gram of to contain `text` (lowered here).

    No terms (a query of spaces alone): every title is a candidate.
    """
    pieces = text.lower().split(" ")
    if len(pieces) == 1:
        terms = _inner(pieces[0])
    else:
        terms = [gram for piece in pieces[:-1] for gram in _ending(piece)] + _inner(pieces[-1])
    return tuple(dict.fromkeys(terms))


def _inner(piece: str) -> list[Term]:
    """Terms of a piece that may sit anywhere in a word: its trigrams, or the range it begins."""
    if 0 < len(piece) < 3:
        return [Term(piece, piece + _TOP * (3 - len(piece)))]
    return [
        Term(piece[start : start + 3], piece[start : start + 3]) for start in range(len(piece) - 2)
    ]


def _ending(piece: str) -> list[Term]:
    """Terms of a piece that ends a word: its own grams, as the word's are made."""
    return [Term(gram, gram) for gram in sorted(word_grams(piece))]


def id_number(ticket_id: str) -> int:
    """Return the number of a stored ticket id: "TKT-000104" -> 104."""
    return int(ticket_id[len(ID_PREFIX) :])


def first_number_after(after: str | None, width: int) -> int | None:
    """Return the least number whose id of `width` digits is greater than `after` (None: none).

    A cursor is any text, a position in code-point order: with width 3, "TKT-104" -> 105,
    None -> 0, "TKT-1" -> 100, "TKT-10a" -> 110, "A" -> 0, "TKT-999" -> None, "U" -> None.
    """
    if after is None:
        return 0
    low, high = 0, 10**width  # ids ascend with their numbers: the first one past `after`
    while low < high:
        middle = (low + high) // 2
        if f"{ID_PREFIX}{middle:0{width}d}" > after:
            high = middle
        else:
            low = middle + 1
    return low if low < 10**width else None


def encode(offsets: Iterable[int]) -> bytes:
    """Return the container of sorted, distinct offsets below BUCKET_SIZE."""
    packed = array("H", offsets)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def decode(container: bytes) -> array[int]:
    """Return the offsets a container holds, ascending."""
    offsets = array("H")
    offsets.frombytes(container)
    if _SWAP:
        offsets.byteswap()
    return offsets


class GramRow(NamedTuple):
    """One row of the title index: a gram's container in one bucket of a tenant."""

    tenant: str
    gram: str
    bucket: int
    container: bytes


class TenantIndexBuilder:
    """Build a tenant's index rows from its tickets in id order, one bucket at a time.

    Memory holds one bucket: its words and statuses and, per each, the offsets of the
    tickets that have it; a word's grams are computed once a bucket (`word_grams`,
    remembered across them).
    """

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._bucket = -1
        self._words: dict[str, list[int]] = {}
        self._statuses: dict[str, list[int]] = {}

    def add(self, tickets: Iterable[tuple[str, str, str]]) -> list[GramRow]:
        """Take the next (id, title, status) triples, ids ascending; return the buckets done."""
        done: list[GramRow] = []
        words, statuses, bucket = self._words, self._statuses, self._bucket
        for ticket_id, title, status in tickets:
            number = int(ticket_id[_NUMBER_START:])
            if number >> BUCKET_BITS != bucket:
                done += self.finish()
                words, statuses, bucket = self._words, self._statuses, number >> BUCKET_BITS
                self._bucket = bucket
            offset = number & _OFFSET_MASK
            for word in title.lower().split(" "):
                offsets = words.get(word)
                if offsets is None:
                    words[word] = [offset]
                elif offsets[-1] != offset:  # a word twice in one title
                    offsets.append(offset)
            held = statuses.get(status)
            if held is None:
                statuses[status] = [offset]
            else:
                held.append(offset)
        return done

    def finish(self) -> list[GramRow]:
        """Return the rows of the bucket being built, if any, and start afresh."""
        words, self._words = self._words, {}
        statuses, self._statuses = self._statuses, {}
        per_gram: dict[str, list[list[int]]] = {
            status_gram(status): [offsets] for status, offsets in statuses.items()
        }
        for word, offsets in words.items():
            for gram in word_grams(word):
                lists = per_gram.get(gram)
                if lists is None:
                    per_gram[gram] = [offsets]
                else:
                    lists.append(offsets)
        tenant, bucket = self.tenant, self._bucket
        return [
            # One word's offsets are sorted and distinct; several words' may overlap.
            GramRow(
                tenant,
                gram,
                bucket,
                encode(lists[0] if len(lists) == 1 else sorted(set().union(*lists))),
            )
            for gram, lists in sorted(per_gram.items())
        ]


def build_rows(tenant: str, tickets: Iterable[tuple[str, str, str]]) -> list[GramRow]:
    """Return the index rows of a tenant's (id, title, status) triples, ids ascending."""
    builder = TenantIndexBuilder(tenant)
    return builder.add(tickets) + builder.finish()
