"""The benchmark's baseline: the SDK's high-level `MCPServer` serving the same search.

Same token verifier, same trusted context (from the request's token), same store and the
same uvicorn and transport settings as `ticket-tools serve http`; only the MCP layer
differs. Run by bench_http.py as `python benchmarks/http_baseline.py JWKS ISSUER AUDIENCE`.
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl

from ticket_tools import execute_tool, fixture_records
from ticket_tools.serve.http import listen, request_context
from ticket_tools.serve.tokens import JwtVerifier, KeySet, TokenRules


def main() -> None:
    """Serve the baseline on 127.0.0.1, on a port the OS picks, until interrupted."""
    jwks, issuer, audience = sys.argv[1:4]
    rules = TokenRules(issuer, audience)
    records = fixture_records()
    listener = listen("127.0.0.1", 0)  # as `serve http` binds: Nagle off
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    server = MCPServer(
        "baseline",
        token_verifier=JwtVerifier(KeySet(jwks), rules),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(issuer),
            resource_server_url=AnyHttpUrl(url),
            validate_token_resource=False,
        ),
        log_level="WARNING",
    )

    @server.tool()
    def search_tickets(
        status: str | None = None,
        query: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, object]:
        """Search the tenant's tickets."""
        given = {"status": status, "query": query, "limit": limit, "cursor": cursor}
        args = {name: value for name, value in given.items() if value is not None}
        return execute_tool("search_tickets", args, request_context(rules), records)

    app = server.streamable_http_app(json_response=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    print(f"ticket-tools: serving MCP on {url}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
