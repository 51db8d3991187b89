"""Clean titles where text enters a store, so that what a search matches is what the model reads.

Titles are customer-written. A character that shows nothing (a zero-width space, a
bidirectional override, a tag character spelling hidden ASCII, a terminal's escape
sequence) would reach the model unseen by the operator, and make a search match text
nobody can see. `clean_title` removes them by rule, not by list: every code point whose
general category is a control, a format character, private use, unassigned (which
includes noncharacters), a line or a paragraph separator, or which is default-ignorable
(docs/input-rules.md). A title longer than MAX_TITLE_CHARS, cleaned, is refused like any
bad record. The contract's own `records` dict, given to `execute_tool` by its caller, is
not touched here: only files and feeds coming into a store.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import TypeVar

from ticket_tools.stores.feed import Change, FeedError
from ticket_tools.stores.records import RecordsError, is_text

# GitHub's issue titles stop at 256 characters and Jira's summaries at 255: a ticket
# title from a help desk fits, and ten of them on a page stay a few thousand tokens
# where the 1 MiB feed line alone would let one ticket flood a model's context.
MAX_TITLE_CHARS = 256
TITLE_RULE = f"the title is longer than {MAX_TITLE_CHARS} characters"
K = TypeVar("K")

# Cc control, Cf format, Co private use, Cn unassigned (noncharacters included), Zl line
# separator, Zp paragraph separator: as this Python's `unicodedata` says.
REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Zl", "Zp"})

# The Default_Ignorable_Code_Point property, which `unicodedata` does not have: every
# line of its section in Unicode 14.0.0's DerivedCoreProperties.txt (the version of
# `unicodedata.unidata_version` on Python 3.11), 4,174 code points; 15.0.0's section is
# the same. Most are Cf or Cn, removed by category anyway; the table adds the visible-
# category ones: U+034F, the Hangul fillers, U+17B4/5 and the variation selectors.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180D),  # Mongolian free variation selectors 1-3
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x180F, 0x180F),  # Mongolian free variation selector 4
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; LRM, RLM
    (0x202A, 0x202E),  # bidirectional embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2065, 0x2065),  # unassigned
    (0x2066, 0x206F),  # bidirectional isolates, deprecated format characters
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors 1-16
    (0xFEFF, 0xFEFF),  # zero-width no-break space (byte-order mark)
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # unassigned
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0000),  # unassigned
    (0xE0001, 0xE0001),  # language tag
    (0xE0002, 0xE001F),  # unassigned
    (0xE0020, 0xE007F),  # tag characters
    (0xE0080, 0xE00FF),  # unassigned
    (0xE0100, 0xE01EF),  # variation selectors 17-256
    (0xE01F0, 0xE0FFF),  # unassigned
)
_IGNORABLE = re.compile(
    "[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in DEFAULT_IGNORABLE) + "]+"
)
# The removed characters that Unicode counts as white space (PropList.txt's White_Space):
# tab, line feed, vertical tab, form feed, carriage return, next line, line and
# paragraph separators. A reader sees them part two words, so each run of them becomes
# one space, not nothing: "Login\r\nfails" is stored as "Login fails".
_BREAKS = frozenset("\t\n\v\f\r\x85\u2028\u2029")
# The C0 and C1 controls but the breaks, and DEL: removed in one pass, as a terminal's
# escape sequences and backspaces are the likeliest hiding characters of a long title.
_CONTROLS = re.compile("[\\x00-\\x08\\x0e-\\x1f\\x7f-\\x84\\x86-\\x9f]+")
# The same for ASCII, as a table for str.translate (a sequence: fast for any length).
_ASCII_CONTROLS = tuple(
    None if unicodedata.category(chr(point)) == "Cc" and chr(point) not in _BREAKS else point
    for point in range(0x80)
)
_ASCII_BREAKS = re.compile("[\\t-\\r]+")
# A run of characters other than printable ASCII: only these can hold one to remove.
_UNUSUAL = re.compile("[^\\x20-\\x7e]+")


def clean_title(title: str) -> str:
    """Return `title` without the characters the rule removes; each run of breaks a space.

    Example: "A\\x1b[8mhidden\\x1b[0m\\r\\nB\\u200b" -> "A[8mhidden[0m B"
    """
    # str.isprintable is false for every Cc, Cf, Co, Cn, Zl, Zp (and Zs but the space,
    # and Cs) character: an ASCII title without a control is answered by it alone.
    if title.isascii():
        if title.isprintable():
            return title
        # No ASCII character is default-ignorable: only the controls (Cc) go.
        return _ASCII_BREAKS.sub(" ", title.translate(_ASCII_CONTROLS))
    if title.isprintable() and not _IGNORABLE.search(title):
        return title
    return _UNUSUAL.sub(_clean_run, _CONTROLS.sub("", _IGNORABLE.sub("", title)))


def _clean_run(match: re.Match[str]) -> str:
    run = match.group()
    if run.isprintable():
        return run
    kept: list[str] = []
    space = False
    for char in run:
        if char.isprintable() or unicodedata.category(char) not in REMOVED_CATEGORIES:
            if space:
                kept.append(" ")
                space = False
            kept.append(char)
        elif char in _BREAKS:
            space = True
    if space:
        kept.append(" ")
    return "".join(kept)


def store_title(title: str, *, raw: bool = False) -> str:
    """Return the title a store keeps: cleaned unless `raw`; raise RecordsError past the bound."""
    stored = title if raw else clean_title(title)
    if len(stored) > MAX_TITLE_CHARS:
        raise RecordsError(TITLE_RULE)
    return stored


def clean_records(records: object, *, raw: bool = False) -> tuple[object, int]:
    """Return the records with every title as a store keeps it, and how many titles changed.

    A title too long is refused with the record's position, as `record_rows` refuses a
    record; every other rule is left to it (a value that is not a mapping, a ticket
    without a text title, pass through unchanged for it to refuse).
    """
    if not isinstance(records, Mapping):
        return records, 0
    cleaner = TitleCleaner(raw=raw)
    return dict(cleaner.pairs(records.items())), cleaner.changed


class TitleCleaner:
    """Clean each record's title as it passes, one record at a time; count those changed."""

    def __init__(self, *, raw: bool = False) -> None:
        self._raw = raw
        self.changed = 0
        """How many titles the records passed so far had changed."""

    def pairs(self, pairs: Iterable[tuple[K, object]]) -> Iterator[tuple[K, object]]:
        """Yield each (key, ticket) with its title as a store keeps it (`clean_records`)."""
        for position, (key, stored) in enumerate(pairs, 1):
            if isinstance(stored, Mapping) and is_text(title := stored.get("title")):
                try:
                    title_kept = store_title(title, raw=self._raw)
                except RecordsError as error:
                    raise RecordsError(f"record {position} (in file order): {error}") from None
                if title_kept != title:
                    self.changed += 1
                    yield key, {**stored, "title": title_kept}
                    continue
            yield key, stored


def clean_change(change: Change, *, raw: bool = False) -> tuple[Change, bool]:
    """Return the change with its title as a store keeps it, and whether it changed.

    Raises FeedError for a title too long.
    """
    try:
        title = store_title(change.title, raw=raw)
    except RecordsError as error:
        raise FeedError(str(error)) from None
    if title == change.title:
        return change, False
    return dataclasses.replace(change, title=title), True


def titles_cleaned(count: int) -> str:
    """Return the summary's note of `count` cleaned titles ("" for none)."""
    if count == 0:
        return ""
    return f"; {count} {'title' if count == 1 else 'titles'} cleaned"
