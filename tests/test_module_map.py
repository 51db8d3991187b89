"""The README's module map names exactly the package's root modules and subpackages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ticket_tools"
# A map line: its names (comma-separated, before the description's column), then the rest.
NAMES = re.compile(r"^(\s*)([\w./_-]+(?:, [\w./_-]+)*)(?:\s{2,}|$)")


def map_entries(readme: str) -> tuple[set[str], set[str]]:
    """Return the map's package entries (`execute.py`, `tools/`) and its top-level paths."""
    section = readme.split("## Module map", 1)[1]
    block = section.split("```", 2)[1]
    package: set[str] = set()
    top: set[str] = set()
    for line in block.splitlines()[1:]:
        found = NAMES.match(line)
        if found is None or not found.group(2).strip():
            continue
        indent, names = found.groups()
        if indent not in ("", "  "):
            continue  # a description's second line
        target = package if indent else top
        target.update(name.strip() for name in names.split(","))
    top.discard("src/ticket_tools/")
    return package, top


def package_entries() -> set[str]:
    """Return the root modules and subpackages as the map spells them."""
    modules = {path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py"}
    folders = {f"{path.name}/" for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    return modules | folders


def test_the_map_names_every_root_module_and_subpackage_and_nothing_else() -> None:
    package, _ = map_entries((ROOT / "README.md").read_text(encoding="utf-8"))
    assert package == package_entries()


def test_every_top_level_path_in_the_map_exists() -> None:
    _, top = map_entries((ROOT / "README.md").read_text(encoding="utf-8"))
    assert sorted(name for name in top if not (ROOT / name).exists()) == []
    assert {"tests/brief/", "testkit/", "benchmarks/", "load/"} <= top


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        pytest.param(
            "src/ticket_tools/   the brief\n  a.py, b.py   two\n                more, words\n"
            "  c/   a folder\nload/   the harness\n",
            ({"a.py", "b.py", "c/"}, {"load/"}),
            id="names-and-continuations",
        ),
        pytest.param("  gone.py   a module\n", ({"gone.py"}, set()), id="a-missing-module"),
    ],
)
def test_map_entries_reads_names_not_descriptions(
    block: str, expected: tuple[set[str], set[str]]
) -> None:
    assert map_entries(f"## Module map\n\n```\n{block}```\n") == expected
