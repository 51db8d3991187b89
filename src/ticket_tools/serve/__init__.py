"""The tools served over MCP (extra `mcp`): stdio for one session, HTTP for every tenant."""
