"""`make load`: replicas of `ticket-tools serve --http` on one PostgreSQL, under load and faults.

The harness's parts, one idea each. The run: `run` (options, budget, setup, the phases in
order) and `stage` (the services every phase runs on, and one phase driven, checked and
kept). One module per phase: `scale` (a warm-up, then 1 to 64 clients), `replica_loss`,
`db_restart`, `soak`, `churn` (a feed applied while clients walk) and `bad_day` (a
package: one replica on a bad day, plain HTTP clients, its figures judged in
`bad_day.report`). Shared by the phases: `records` (the generated store), `workload`
(what each client calls), `client` (one MCP client), `checker` (every result against
`execute_tool`), `report` (a phase's calls tallied, the table, build/load-report.json),
`stats` (percentiles), `supervise` (processes, time budget, cleanup), `cluster`
(testkit's throwaway PostgreSQL, owned by the supervisor) and `replica` (one server
process, started with testkit's command). The token issuer is testkit's
(testkit/tokens.py), shared with the tests. No module imports one that imports it back
(load/tests/test_layout.py).
"""
