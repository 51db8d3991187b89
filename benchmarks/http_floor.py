"""The floor of the direct-path benchmark: the same work with no MCP layer at all.

Bare Starlette on uvicorn (its `standard` extra: uvloop and httptools, as `serve http`
runs), the same `JwtVerifier` check of the bearer token, `execute_tool` on the fixture
store, and the answer `serve http` gives a 2026-07-28 `tools/call` (the same JSON). No
Host, Accept or `_meta` checks, no audit line, no metrics: what is left when the protocol
costs nothing. Run by bench_http_direct.py as `python benchmarks/http_floor.py JWKS ISSUER
AUDIENCE`.
"""

from __future__ import annotations

import json
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ticket_tools import execute_tool, fixture_records
from ticket_tools.serve.http import listen
from ticket_tools.serve.tokens import JwtVerifier, KeySet, TokenRules, context_from_token

STAMP = {"io.modelcontextprotocol/serverInfo": {"name": "ticket-tools", "version": "0.1.0"}}


def main() -> None:
    """Serve the floor on 127.0.0.1, on a port the OS picks, until interrupted."""
    jwks, issuer, audience = sys.argv[1:4]
    rules = TokenRules(issuer, audience)
    verifier = JwtVerifier(KeySet(jwks), rules)
    records = fixture_records()

    async def mcp(request: Request) -> Response:
        token = await verifier.verify_token(request.headers["authorization"][7:])
        if token is None:
            return Response(status_code=401)
        message = json.loads(await request.body())
        params = message["params"]
        context = context_from_token(token, rules)
        result = execute_tool(params["name"], params.get("arguments", {}), context, records)
        text = json.dumps(result, ensure_ascii=False)
        wire = {
            "content": [{"text": text, "type": "text"}],
            "isError": result["ok"] is not True,
            "resultType": "complete",
            "structuredContent": result,
            "_meta": STAMP,
        }
        body = {"jsonrpc": "2.0", "id": message["id"], "result": wire}
        return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")

    listener = listen("127.0.0.1", 0)  # as `serve http` binds: Nagle off
    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    port = listener.getsockname()[1]
    print(f"ticket-tools: serving MCP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
