"""`make load`: replicas of `ticket-tools serve --http` on one PostgreSQL, under load and faults.

The harness's parts, one idea each: `records` (the generated store), `workload` (what each
client calls), `checker` (every result against `execute_tool`), `stats` (percentiles),
`report` (the table and build/load-report.json), `supervise` (processes, time budget,
cleanup), `cluster` (testkit's throwaway PostgreSQL, owned by the supervisor), `replica`
(one server process, started with testkit's command), `client` (one MCP client), `run`
(the phases), `bad_day` (the last phase: one replica on a bad day, plain HTTP clients)
and `bad_day_report` (its figures against issue 19's targets).
The token issuer is testkit's (testkit/tokens.py), shared with the tests.
"""
