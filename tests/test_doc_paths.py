"""Every repository path README.md, REVIEW.md and docs/ name exists.

What counts as a named path, in a Markdown file:

- a link target (`[text](target)`) that is not a URL or an anchor alone, read relative to
  the file's folder, its `#anchor` dropped;
- an inline code span, or a word in a fenced code block, with no space, holding a `/`,
  whose first part is a top-level folder of the repository (`src/`, `tests/`, `docs/`, ...);
  a pytest node id's `::test` and a `:line` suffix are dropped, and a glob (`*.patch`) must
  match at least one path.

Generated folders (`build/`, `dist/`, `mutants/`) are not the repository's, so a path
under them is never checked. A path a page names on purpose though it does not exist (an
example of a file to create, a layout of the past) is listed in `NAMED_BUT_ABSENT` with
why; that list is checked too, so an entry whose path appears goes stale loudly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = frozenset({"build", "dist", "mutants"})
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = "```"
URL = re.compile(r"[a-z][a-z0-9+.-]*:", re.IGNORECASE)
# A word in a code block ends at a space, a quote, a bracket or an `=` (`PYTHONPATH=src/x`).
WORD_BREAK = re.compile(r"[\s\"'(),=<>]+")
NODE_OR_LINE = re.compile(r"::.*$|:[0-9]+(-[0-9]+)?$")

NAMED_BUT_ABSENT: dict[tuple[str, str], str] = {
    ("docs/extending.md", "src/ticket_tools/tools/count_tickets.py"): "the third tool to create",
    ("docs/extending.md", "tests/tools/test_count_tickets.py"): "its test, to create",
    ("docs/extending.md", "src/ticket_tools/cli/verify.py"): "the new command, to create",
    ("docs/extending.md", "tests/cli/test_cli_verify.py"): "its test, to create",
    ("docs/scale.md", "benchmarks/load"): "where the harness lived at two past commits",
}


def documents(root: Path) -> list[Path]:
    """Return README.md, REVIEW.md and every Markdown file under docs/."""
    return [root / "README.md", root / "REVIEW.md", *sorted((root / "docs").rglob("*.md"))]


def top_folders(root: Path) -> frozenset[str]:
    """Return the repository's top-level folders: not hidden (but `.ci`), not generated."""
    return (
        frozenset(
            path.name
            for path in root.iterdir()
            if path.is_dir() and (path.name == ".ci" or not path.name.startswith("."))
        )
        - GENERATED
    )


def named_paths(text: str, tops: frozenset[str]) -> Iterator[tuple[str, bool]]:
    """Yield (path, is_link) for each repository path a Markdown text names."""
    for target in LINK.findall(text):
        if not URL.match(target) and not target.startswith("#"):
            yield target.partition("#")[0], True
    words: list[str] = []
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith(FENCE):
            in_block = not in_block
        elif in_block:
            words.extend(WORD_BREAK.split(line))
        else:
            words.extend(span for span in CODE_SPAN.findall(line) if " " not in span)
    for word in words:
        path = NODE_OR_LINE.sub("", word).rstrip(".,;:")
        if "/" in path and path.split("/")[0] in tops:
            yield path, False


def missing_paths(root: Path) -> list[tuple[str, str]]:
    """Return (document, path) for each named path that exists nowhere in `root`."""
    tops = top_folders(root)
    missing = []
    for document in documents(root):
        for path, is_link in named_paths(document.read_text(encoding="utf-8"), tops):
            base = document.parent if is_link else root
            is_glob = any(c in path for c in "*?[")
            found = any(base.glob(path)) if is_glob else (base / path).exists()
            if not found:
                missing.append((document.relative_to(root).as_posix(), path))
    return list(dict.fromkeys(missing))


def test_every_named_path_exists() -> None:
    assert [entry for entry in missing_paths(ROOT) if entry not in NAMED_BUT_ABSENT] == []


def test_every_path_named_on_purpose_is_still_named_and_absent() -> None:
    assert sorted(entry for entry in missing_paths(ROOT) if entry in NAMED_BUT_ABSENT) == sorted(
        NAMED_BUT_ABSENT
    )


PAGE = """\
See [the store](../src/store.py), [a section](#top), [a site](https://example.com/a/b) and
[gone](gone.md#part). `src/store.py`, `src/gone.py:12`, `tests/test_x.py::test_y`,
`tests/*.py`, `tests/*.patch`, `build/report.json`, `a/b` and `src/ two words`.

```sh
python -m pytest tests/test_x.py tests/gone/ -q
PYTHONPATH=src/gone python x.py
```
"""


@pytest.mark.parametrize(
    ("page", "missing"),
    [
        pytest.param(
            PAGE,
            [
                ("docs/page.md", "gone.md"),
                ("docs/page.md", "src/gone.py"),
                ("docs/page.md", "tests/*.patch"),
                ("docs/page.md", "tests/gone/"),
                ("docs/page.md", "src/gone"),
            ],
            id="each-kind-of-name",
        ),
        pytest.param("`src/store.py` and [it](../src/store.py)", [], id="all-present"),
        pytest.param("`docs/page.md` `docs/`", [], id="the-page-itself"),
    ],
)
def test_a_missing_path_is_reported(
    tmp_path: Path, page: str, missing: list[tuple[str, str]]
) -> None:
    for name in ("src/store.py", "tests/test_x.py", "README.md", "REVIEW.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "build").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(page, encoding="utf-8")
    assert missing_paths(tmp_path) == missing
