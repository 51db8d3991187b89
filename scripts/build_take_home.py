"""Build the take-home hand-in from the sources: OUT/take-home/ and OUT/take-home.tar.gz.

The folder holds what answers the brief and nothing else: the root package
(`src/ticket_tools/*.py`, `py.typed`) with `tools/`, as they are at build time; the brief's
suite `tests/brief/`; `handin/`'s README, Makefile and pytest settings; REVIEW.md's answer
(the text between its markers); and `review/`, the sample in JavaScript with the review's
Jest tests. Left out: the root's `__main__.py`, which runs the product's command line, not
in the hand-in. Standard library only; `make take-home` runs

    python scripts/build_take_home.py build
"""

from __future__ import annotations

import shutil
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ticket_tools"
# The root package's folders that belong to the brief; every other subpackage is the product's.
BRIEF_FOLDERS = ("", "tools")
LEFT_OUT = frozenset({"__main__.py"})
TEMPLATE = ROOT / "handin"
TEMPLATE_FILES = ("README.md", "Makefile", "pyproject.toml")
BEGIN = "<!-- answer: begin -->"
END = "<!-- answer: end -->"
REVIEW_HEADING = "# Review of the sample submission\n\n"
NAME = "take-home"


def review_answer(text: str) -> str:
    """Return the text between the one pair of answer markers, stripped."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError("REVIEW.md needs exactly one answer begin marker, then one end marker")
    return text.partition(BEGIN)[2].partition(END)[0].strip()


def sources() -> dict[str, Path]:
    """Return each file of the hand-in but REVIEW.md: its path in the folder, its source."""
    files: dict[str, Path] = {}
    for folder in BRIEF_FOLDERS:
        for path in sorted((PACKAGE / folder).iterdir()):
            brief = path.suffix == ".py" or path.name == "py.typed"
            if path.is_file() and brief and path.name not in LEFT_OUT:
                files[path.relative_to(ROOT).as_posix()] = path
    for path in sorted((ROOT / "tests" / "brief").glob("*.py")):
        files[path.relative_to(ROOT).as_posix()] = path
    for name in TEMPLATE_FILES:
        files[name] = TEMPLATE / name
    for path in sorted((ROOT / "review").iterdir()):
        if path.is_file():
            files[path.relative_to(ROOT).as_posix()] = path
    return files


def build(out: Path) -> Path:
    """Write OUT/take-home/ (replacing it) and its archive; return the archive's path."""
    folder = out / NAME
    if folder.exists():
        shutil.rmtree(folder)
    for name, source in sources().items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    answer = review_answer((ROOT / "REVIEW.md").read_text(encoding="utf-8"))
    (folder / "REVIEW.md").write_text(REVIEW_HEADING + answer + "\n", encoding="utf-8")
    archive = out / f"{NAME}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = tar.gettarinfo(path, f"{NAME}/{path.relative_to(folder).as_posix()}")
                # The same sources give the same members: no owner, no time.
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                with path.open("rb") as stream:
                    tar.addfile(info, stream)
    return archive


def main(argv: Sequence[str] | None = None) -> int:
    """Build into the one folder named on the command line; print what was written."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: build_take_home.py OUT", file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    archive = build(out)
    print(f"built {out / NAME}/ and {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
