"""The replica-loss phase of `make load`: replica 1 killed (SIGKILL) mid-phase.

Its clients move to replica 0 with the cursors they hold; the figures are how many moved,
their failed calls, and the milliseconds from the kill to the first answer and to the
slowest moved client's. Only transport failures may be errors (report.problems). The
replica is started again before the next phase.
"""

from __future__ import annotations

import time

from load.report import first_pages_ms
from load.stage import Phase, Stage

CLIENTS = 32
SECONDS = 30.0
KILL_AT_SECONDS = 10.0


def run(stage: Stage) -> None:
    """Run the phase, then start the killed replica again."""
    stage.phase("replica-loss", CLIENTS, SECONDS, fault=lose_replica)
    stage.restart_replica(1)


async def lose_replica(phase: Phase) -> None:
    """Kill replica 1 mid-phase; its clients move to replica 0 with their cursors."""
    await phase.sleep_until(KILL_AT_SECONDS)
    killed_at = time.monotonic()
    phase.replicas[1].kill()
    phase.figures["killed_at_s"] = round(killed_at - phase.started, 1)
    await phase.ended.wait()
    moved = [client for client in phase.clients if client.switches]
    first, slowest = first_pages_ms(moved, killed_at, any_answer=True)
    phase.figures |= {
        "clients_moved": len(moved),
        "failed_calls": sum(
            1 for client in moved for record in client.records if record.seen.failure
        ),
        "first_answer_after_kill_ms": first,
        "all_moved_answered_after_ms": slowest,
    }
