"""The bad-day phase of `make load`, in order: its parts are the modules beside this one."""

from __future__ import annotations

import json
import os
from pathlib import Path

from load.bad_day.day import BUDGET_SECONDS, Day
from load.bad_day.neighbours import noisy_neighbour, slow_bodies
from load.bad_day.report import Figures, problems, render
from load.bad_day.sessions import sessions
from load.bad_day.stall import sigterm, stall
from load.cluster import Cluster
from load.stage import Stage
from load.supervise import Supervisor, say
from testkit.server import NO_RATE_LIMITS
from testkit.tokens import Issuer


class BadDay(Day):
    """The phase: its parts in order, on a database of its own (load/bad_day/day.py)."""

    def run(self, figures: Figures | None = None) -> Figures:
        """Run every part in order, filling `figures` as it goes; return them."""
        if figures is not None:
            self.figures = figures
        self.setup()
        say = self.say
        server = self.server("stateless", "--stateless", *NO_RATE_LIMITS)
        try:
            say("noisy neighbour")
            noisy_neighbour(self, server)
            say("slow bodies")
            slow_bodies(self, server)
            say("table locked")
            stall(self, server, "lock")
            say("database stopped")
            stall(self, server, "stop")
        finally:
            server.stop()
        say("sessions and bursts")
        sessions(self)
        say("SIGTERM during a stall")
        sigterm(self)
        return self.figures


def run(stage: Stage, cluster: Cluster, figures: Figures) -> None:
    """Run the phase on a database of its own in the run's cluster, filling `figures`."""
    say(f"bad day: one replica at a time, for at most {BUDGET_SECONDS:.0f} s")
    figures["loadavg_at_start"] = os.getloadavg()
    BadDay(stage.supervisor, cluster, stage.issuer, stage.jwks).run(figures)
    figures["loadavg_at_end"] = os.getloadavg()


# --- the phase alone ---------------------------------------------------------------------


def run_alone(report: Path | None = None) -> int:
    """Run the phase on a cluster of its own; print its table; 0 if nothing went wrong."""
    loadavg = Path("/proc/loadavg").read_text().split()[:3]
    figures: Figures = {"loadavg_at_start": loadavg}
    with Supervisor(BUDGET_SECONDS + 120.0, prefix="ticket-bad-day-") as supervisor:
        issuer = Issuer()
        jwks = issuer.write_jwks(supervisor.folder / "jwks.json")
        cluster = Cluster(supervisor)
        cluster.create()
        cluster.start()
        BadDay(supervisor, cluster, issuer, jwks).run(figures)
    figures["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    print(render(figures))
    found = problems(figures)
    print("problems: " + ("; ".join(found) if found else "none"))
    print(
        f"load average at start {' '.join(loadavg)}, at end {' '.join(figures['loadavg_at_end'])}"
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 1 if found else 0
