"""Clean titles where text enters a store, so that what a search matches is what the model reads.

Titles are customer-written. A character that shows nothing (a zero-width space, a
bidirectional override, a tag character spelling hidden ASCII) would reach the model
unseen by the operator, and make a search match text nobody can see. `clean_title`
removes the set GitHub's MCP server removes from titles (docs/input-rules.md lists it),
and a title longer than MAX_TITLE_CHARS, cleaned, is refused like any bad record.
The contract's own `records` dict, given to `execute_tool` by its caller, is not
touched here: only files and feeds coming into a store.
"""

from __future__ import annotations

import dataclasses
import re
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

# github/github-mcp-server pkg/sanitize/sanitize.go (shouldRemoveRune and
# isVariationSelector, which Sanitize applies to titles): every one removed.
_INVISIBLE = re.compile(
    "["
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u180b-\u180d\u180f"  # Mongolian free variation selectors
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200d"  # zero-width space, non-joiner, joiner
    "\u200e\u200f"  # left-to-right and right-to-left marks
    "\u202a-\u202e"  # bidirectional embeddings and overrides
    "\u2060-\u2064"  # word joiner, invisible operators
    "\u2066-\u2069"  # bidirectional isolates
    "\ufe00-\ufe0f"  # variation selectors 1-16
    "\ufeff"  # zero-width no-break space (byte-order mark)
    "\U00013441\U00013442"  # Egyptian hieroglyph full and half blank
    "\U000e0001\U000e0020-\U000e007f"  # tag characters
    "\U000e0100-\U000e01ef"  # variation selectors 17-256
    "]+"
)


def clean_title(title: str) -> str:
    """Return `title` without the invisible characters (the set above); ASCII as it is."""
    return title if title.isascii() else _INVISIBLE.sub("", title)


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
