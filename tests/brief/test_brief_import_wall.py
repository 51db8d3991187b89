"""The wall: the root package (the brief) needs only the standard library.

Run: in a fresh interpreter, `import ticket_tools`, every acceptance call through
`execute_tool` and `tool_declarations()` load no third-party module and no module of an
optional layer (`ticket_tools.stores`, `.serve`, `.cli`), as `sys.modules` shows. Read:
every module directly in `ticket_tools/` and `ticket_tools/tools/` imports (anywhere,
inside functions too) only standard-library modules and modules of those two folders.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

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


def imported_names(path: Path) -> list[tuple[int, str]]:
    """Return (line, module) for every import in a module, nested ones included.

    `from a import b` yields `a`, and `a.b` too when that is a module of the package;
    a relative import is resolved against the module's own package.
    """
    package = (
        module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    )
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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


def test_the_brief_imports_only_the_standard_library_and_itself() -> None:
    paths = brief_modules()
    brief = {module_name(path) for path in paths}
    assert {"ticket_tools", "ticket_tools.execute", "ticket_tools.tools.get_ticket"} <= brief
    refused = [
        f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {module}"
        for path in paths
        for line, module in imported_names(path)
        if not allowed_import(module, brief)
    ]
    assert not refused, "imports outside the wall: " + "; ".join(refused)
