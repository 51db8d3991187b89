"""The bad day of one replica: `make load`'s last phase (the module docstring of `day`).

`phase` runs the parts in order: `neighbours` (a noisy neighbour, slow bodies), `stall`
(the store stalled, SIGTERM meanwhile) and `sessions` (one token's flood and burst), on
`day` (the database, the replica, the constants), with `rpc` (plain HTTP JSON-RPC) and
`elsewhere` (load in a process of its own); `report` judges the figures.
"""

from load.bad_day.day import BUDGET_SECONDS
from load.bad_day.phase import BadDay, run, run_alone

__all__ = ["BUDGET_SECONDS", "BadDay", "run", "run_alone"]
