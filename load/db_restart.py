"""The database-restart phase of `make load` (PostgreSQL only): the server stopped mid-phase,
kept down DOWN_SECONDS, started again; the replicas answer through it without a restart.

The figures are the milliseconds from the server's return to the first page and to the
slowest client's, and whether both replicas lived; only the internal error and
`unavailable` may be errors (report.problems).
"""

from __future__ import annotations

import time
from functools import partial

import anyio
import anyio.to_thread

from load.cluster import Cluster
from load.report import first_pages_ms
from load.stage import Phase, Stage

CLIENTS = 32
SECONDS = 30.0
STOP_AT_SECONDS = 8.0
DOWN_SECONDS = 4.0


def run(stage: Stage, cluster: Cluster) -> None:
    """Run the phase on the run's cluster."""
    stage.phase("db-restart", CLIENTS, SECONDS, fault=partial(restart_db, cluster))


async def restart_db(cluster: Cluster, phase: Phase) -> None:
    """Stop PostgreSQL mid-phase, keep it down, start it; time the way back."""
    await phase.sleep_until(STOP_AT_SECONDS)
    stopping = time.monotonic()
    await anyio.to_thread.run_sync(cluster.stop)
    await anyio.sleep(DOWN_SECONDS)
    await anyio.to_thread.run_sync(cluster.start)
    back = time.monotonic()
    await phase.ended.wait()
    # Clients without the read scope never get a page: they cannot show a recovery.
    first, slowest = first_pages_ms([c for c in phase.clients if c.can_read], back)
    phase.figures |= {
        "stop_at_s": round(stopping - phase.started, 1),
        "down_s": round(back - stopping, 1),
        "first_page_after_back_ms": first,
        "all_clients_served_after_ms": slowest,
        "replicas_alive_after": all(replica.running() for replica in phase.replicas),
    }
