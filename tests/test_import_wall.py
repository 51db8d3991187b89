"""The wall: the root package (the brief) needs only the standard library, and no layer.

Run: in a fresh interpreter, `import ticket_tools`, every acceptance call through
`execute_tool` and `tool_declarations()` load no third-party module and no module of an
optional layer (`ticket_tools.stores`, `.serve`, `.cli`), as `sys.modules` shows. Read:
every module directly in `ticket_tools/` and `ticket_tools/tools/` imports (anywhere,
inside functions too) only standard-library modules and modules of those two folders.
One exception, and only it: `ticket_tools/__main__.py` (`python -m ticket_tools`) imports
`ticket_tools.cli` under its `if __name__ == "__main__":`, so only when it runs.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ticket_tools
from brief_table import ACCEPTANCE
from ticket_tools import tool_declarations

PACKAGE = "ticket_tools"
OPTIONAL_LAYERS = (
    "ticket_tools.stores",
    "ticket_tools.serve",
    "ticket_tools.cli",
    "ticket_tools.declarations",
)
PACKAGE_DIR = Path(ticket_tools.__file__).parent
# The brief: the package's own top-level modules and its tools/ folder, nothing deeper.
BRIEF_DIRS = (PACKAGE_DIR, PACKAGE_DIR / "tools")

# `python -m ticket_tools` runs the product's command line: this module may import this
# layer, and only inside its top-level `if __name__ == "__main__":` block.
MAIN_MODULE = f"{PACKAGE}.__main__"
RUN_ONLY = f"{PACKAGE}.cli"

# Run in a child started with -I -S: no site, so no .pth hook (setuptools'
# _distutils_hack, coverage's process startup) loads a module before the package does.
# The parent's sys.path keeps every installed package importable: a root module that
# imports one will load it.
CHILD = """
import json, sys
sys.path[:] = json.loads(sys.argv[1])
from ticket_tools import execute_tool, fixture_records, tool_declarations
calls = json.loads(sys.stdin.read())
results = [execute_tool(name, args, context, fixture_records()) for name, args, context in calls]
report = {"results": results, "declarations": tool_declarations(), "modules": sorted(sys.modules)}
print(json.dumps(report))
"""


def outside_the_wall(module: str) -> bool:
    """Return whether a loaded or imported module is third-party or an optional layer."""
    top = module.partition(".")[0]
    if top == PACKAGE:
        return any(module == layer or module.startswith(layer + ".") for layer in OPTIONAL_LAYERS)
    # `__main__` is the child's own script (`__mp_main__` its multiprocessing alias);
    # `_sysconfigdata_<platform>` is the standard library's build data, named per
    # platform, so not in `stdlib_module_names`.
    stdlib = top in sys.stdlib_module_names or top.startswith("_sysconfigdata_")
    return not stdlib and top not in ("__main__", "__mp_main__")


def test_running_the_brief_loads_only_the_standard_library() -> None:
    calls = [[row.name, row.args, row.context] for row in ACCEPTANCE]
    child = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CHILD, json.dumps(sys.path)],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    # The calls really ran there, with the brief's answers.
    assert report["results"] == [row.expected for row in ACCEPTANCE]
    assert report["declarations"] == tool_declarations()
    assert f"{PACKAGE}.tools.search_tickets" in report["modules"]
    outside = sorted({_shown(m) for m in report["modules"] if outside_the_wall(m)})
    assert not outside, "loaded outside the wall: " + ", ".join(outside)


def _shown(module: str) -> str:
    # A third-party package by its top-level name; an optional layer by its full name.
    return module if module.startswith(PACKAGE + ".") else module.partition(".")[0]


def brief_modules() -> list[Path]:
    return sorted(path for folder in BRIEF_DIRS for path in folder.glob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """Return whether a dotted name under the package is a module or package on disk."""
    path = PACKAGE_DIR.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_names(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """Return (line, module) for every import in a module (its `text`, or read), nested too.

    `from a import b` yields `a`, and `a.b` too when that is a module of the package;
    a relative import is resolved against the module's own package.
    """
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    source = path.read_text(encoding="utf-8") if text is None else text
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            found.append((node.lineno, module))
            for alias in node.names:
                name = f"{module}.{alias.name}"
                if name.startswith(PACKAGE + ".") and is_module(name):
                    found.append((node.lineno, name))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            found.append((node.lineno, "<dynamic import>"))
    return found


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """Return the module a `from ... import` names, a relative one resolved against `package`."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]  # level 1 is the package itself
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_dynamic_import(func: ast.expr) -> bool:
    # An import by computed name cannot be read here: the brief has none, so any is refused.
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def allowed_import(module: str, brief: set[str]) -> bool:
    top = module.partition(".")[0]
    if top == PACKAGE:
        return module in brief
    return top in sys.stdlib_module_names


def run_only_lines(text: str) -> set[int]:
    """Return the lines inside a module's top-level `if __name__ == "__main__":` blocks."""
    guard = ast.parse('__name__ == "__main__"', mode="eval").body
    return {
        line
        for node in ast.parse(text).body
        if isinstance(node, ast.If) and ast.dump(node.test) == ast.dump(guard) and not node.orelse
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }


def refused_imports(path: Path, brief: set[str], text: str | None = None) -> list[str]:
    """Return "path:line: module" for each import of a brief module outside the wall."""
    source = path.read_text(encoding="utf-8") if text is None else text
    run_only = run_only_lines(source) if module_name(path) == MAIN_MODULE else set()
    return [
        f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {module}"
        for line, module in imported_names(path, source)
        if not allowed_import(module, brief) and not (module == RUN_ONLY and line in run_only)
    ]


def test_the_brief_imports_only_the_standard_library_and_itself() -> None:
    paths = brief_modules()
    brief = {module_name(path) for path in paths}
    assert {"ticket_tools", "ticket_tools.execute", "ticket_tools.tools.get_ticket"} <= brief
    refused = [entry for path in paths for entry in refused_imports(path, brief)]
    assert not refused, "imports outside the wall: " + "; ".join(refused)


GUARDED = 'if __name__ == "__main__":\n    {}\n'


@pytest.mark.parametrize(
    ("module", "text", "refused"),
    [
        pytest.param(
            "__main__", GUARDED.format("from ticket_tools.cli import main"), [], id="cli-when-run"
        ),
        pytest.param(
            "__main__", "from ticket_tools.cli import main\n", ["ticket_tools.cli"], id="cli-at-top"
        ),
        pytest.param(
            "__main__",
            GUARDED.format("import ticket_tools.serve"),
            ["ticket_tools.serve"],
            id="another-layer-when-run",
        ),
        pytest.param(
            "__main__", GUARDED.format("import psycopg"), ["psycopg"], id="third-party-when-run"
        ),
        pytest.param(
            "__main__",
            'if __name__ != "__main__":\n    import ticket_tools.cli\n',
            ["ticket_tools.cli"],
            id="another-guard",
        ),
        pytest.param(
            "execute",
            GUARDED.format("import ticket_tools.cli"),
            ["ticket_tools.cli"],
            id="not-main",
        ),
    ],
)
def test_only_the_main_module_imports_the_cli_and_only_when_run(
    module: str, text: str, refused: list[str]
) -> None:
    path = PACKAGE_DIR / f"{module}.py"
    brief = {module_name(path) for path in brief_modules()}
    assert [entry.rpartition(": ")[2] for entry in refused_imports(path, brief, text)] == refused
