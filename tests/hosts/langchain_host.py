"""langchain-mcp-adapters against `ticket-tools serve`, no model: what each call hands the model.

Run by tests/hosts/run_hosts.py with the interpreter of an environment of its own
(langchain-mcp-adapters 0.3.2 pins `mcp<2`, this project needs `mcp>=2.3`), so it imports
only the standard library and, at run time, the adapters. Its one argument is a JSON
object: the HTTP endpoint, its bearer token, a second endpoint whose subject may make one
tool call every two seconds, and the `serve stdio` command. It prints one JSON object: for each
server the tools as the model receives them, then the ToolMessages (content, status,
artifact; the content blocks' random ids left out) of a page walk, of calls at once, of a
failing call, and of a call over its rate. The adapters' default is used but for the last:
a new MCP session for every tool call.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import Any

WALK_LIMIT = 45  # more pages than the walk has: a cursor that never ends stops here
AT_ONCE = 10


def _seen(message: Any) -> dict[str, Any]:
    """What the model reads of a ToolMessage, and what a program may read beside it."""
    content = message.content
    if isinstance(content, list):
        content = [{k: v for k, v in block.items() if k != "id"} for block in content]
    return {"content": content, "status": message.status, "artifact": message.artifact}


async def _call(tool: Any, args: dict[str, object], call_id: str) -> dict[str, Any]:
    call = {"type": "tool_call", "id": call_id, "name": tool.name, "args": args}
    return _seen(await tool.ainvoke(call))


async def _tools(client: Any, server: str) -> dict[str, Any]:
    return {tool.name: tool for tool in await client.get_tools(server_name=server)}


async def run(config: dict[str, Any]) -> dict[str, Any]:
    """Drive both transports; return what the model would have been handed."""
    adapters = importlib.import_module("langchain_mcp_adapters.client")
    bearer = {"Authorization": f"Bearer {config['token']}"}
    command = config["stdio"]
    client = adapters.MultiServerMCPClient(
        {
            "http": {"transport": "streamable_http", "url": config["url"], "headers": bearer},
            "limited": {
                "transport": "streamable_http",
                "url": config["limited_url"],
                "headers": bearer,
            },
            "stdio": {"transport": "stdio", "command": command[0], "args": command[1:]},
        }
    )
    seen: dict[str, Any] = {}
    http = await _tools(client, "http")
    stdio = await _tools(client, "stdio")
    seen["tools"] = {
        server: [
            {"name": tool.name, "description": tool.description, "args_schema": tool.args_schema}
            for tool in tools.values()
        ]
        for server, tools in (("http", http), ("stdio", stdio))
    }
    walk: list[dict[str, Any]] = []
    args: dict[str, object] = {"limit": 1}
    while len(walk) < WALK_LIMIT:
        walk.append(await _call(http["search_tickets"], args, f"walk-{len(walk)}"))
        artifact = walk[-1]["artifact"] or {}
        cursor = artifact.get("structured_content", {}).get("next_cursor")
        if cursor is None:
            break
        args = {"limit": 1, "cursor": cursor}
    seen["walk"] = walk
    ids = [f"TKT-{n:03d}" for n in range(1, AT_ONCE + 1)]
    seen["at_once"] = await asyncio.gather(
        *(_call(http["get_ticket"], {"ticket_id": i}, f"at-once-{i}") for i in ids)
    )
    seen["invalid"] = await _call(http["search_tickets"], {"limit": 11}, "invalid")
    seen["stdio_not_found"] = await _call(stdio["get_ticket"], {"ticket_id": "TKT-103"}, "nf")
    # In one session kept open (the adapters' other way): its four requests of housekeeping
    # fit the limited subject's burst, and its second call is over the rate.
    tools_module = importlib.import_module("langchain_mcp_adapters.tools")
    async with client.session("limited") as session:
        limited = {tool.name: tool for tool in await tools_module.load_mcp_tools(session)}
        seen["over_rate"] = [
            await _call(limited["get_ticket"], {"ticket_id": "TKT-001"}, f"rate-{n}")
            for n in range(2)
        ]
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.argv[1])))))
