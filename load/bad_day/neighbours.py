"""The bad day's parts 1 and 2: tenant Q beside a noisy neighbour, and beside slow bodies."""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from load.bad_day.day import (
    CLIENTS,
    GET,
    HEAVY,
    PHASE_SECONDS,
    RARE,
    SESSION_PHASE_SECONDS,
    SLOW_BODIES,
    SLOW_BODY_BYTE_SECONDS,
    SLOW_BODY_BYTES,
    WARMUP_SECONDS,
    Day,
    Server,
)
from load.bad_day.elsewhere import elsewhere, lagging
from load.bad_day.report import Figures
from load.bad_day.rpc import (
    CLIENT_TIMEOUT_SECONDS,
    Client,
    Loop,
    codes,
    results,
    run_loops,
    summary,
)
from load.stats import ms, ratio
from load.supervise import cpu_seconds, machine_cpu


def _q_loops(day: Day, server: Server, name: str) -> list[Loop]:
    tokens = [day.token("q", f"{name}-{n}") for n in range(CLIENTS)]
    return [Loop(Client(server.url, token), GET) for token in tokens]


def noisy_neighbour(day: Day, server: Server) -> None:
    """Q's p50 and p99 with H's no-match and rare-word searches beside, against Q alone."""
    run_loops(_q_loops(day, server, "warm"), WARMUP_SECONDS)
    alone = _q_loops(day, server, "alone")
    with lagging() as lag_alone, cores_busy(day, server) as cores_alone:
        run_loops(alone, PHASE_SECONDS)
    with_h = _q_loops(day, server, "with-h")
    heavy = [
        Loop(Client(server.url, day.token("h", f"h-{n}")), HEAVY if n % 2 else RARE)
        for n in range(CLIENTS)
    ]
    searching = elsewhere([loop.run for loop in heavy], lambda: results(heavy))
    with searching as h, lagging() as lag_with_h, cores_busy(day, server) as cores_with_h:
        run_loops(with_h, PHASE_SECONDS)
    h_times, h_codes = h[0]
    q_alone = [t for loop in alone for t in loop.times]
    q_with = [t for loop in with_h for t in loop.times]
    day.figures["noisy_neighbour"] = {
        "q_alone": summary(q_alone, PHASE_SECONDS),
        "q_with_h": summary(q_with, PHASE_SECONDS),
        "h": summary(h_times, PHASE_SECONDS),
        "p50_ratio": ratio(ms(q_with, 50), ms(q_alone, 50)),
        "p99_ratio": ratio(ms(q_with, 99), ms(q_alone, 99)),
        "machine_lag_ms": {"alone": lag_alone[0], "with_h": lag_with_h[0]},
        "cores_busy": {"alone": cores_alone, "with_h": cores_with_h},
        "q_codes": codes(alone + with_h),
        "h_codes": h_codes,
    }


@contextmanager
def cores_busy(day: Day, server: Server) -> Iterator[Figures]:
    """Measure where the machine's CPU goes meanwhile, in cores busy: PostgreSQL (the
    cluster and every backend), the replica, and the whole machine (the load generator
    and anything else on it included), filled in when the block ends."""
    cores: Figures = {}
    started = time.monotonic()
    postgres, replica = day.cluster.cpu_seconds(), cpu_seconds(server.process.pid)
    busy, _ = machine_cpu()
    yield cores
    seconds = time.monotonic() - started
    cores["postgres"] = round((day.cluster.cpu_seconds() - postgres) / seconds, 2)
    cores["replica"] = round((cpu_seconds(server.process.pid) - replica) / seconds, 2)
    cores["machine"] = round((machine_cpu()[0] - busy) / seconds, 2)
    cores["of"] = os.cpu_count()


def slow_bodies(day: Day, server: Server) -> None:
    """Q's p50 while SLOW_BODIES connections trickle a body, and when they were cut off."""
    alone = _q_loops(day, server, "slow-alone")
    run_loops(alone, SESSION_PHASE_SECONDS)
    host, port = server.base.removeprefix("http://").rsplit(":", 1)
    token = day.token("q", "slow")
    cut: list[float | None] = [None] * SLOW_BODIES

    def trickler(slot: int) -> Callable[[threading.Event], None]:
        def trickle(stop: threading.Event) -> None:
            cut[slot] = _trickle_body(host, int(port), token, stop)

        return trickle

    beside = _q_loops(day, server, "slow-beside")
    tricklers = [trickler(slot) for slot in range(SLOW_BODIES)]
    with elsewhere(tricklers, lambda: list(cut)) as cut_at:
        run_loops(beside, SESSION_PHASE_SECONDS)
    cut = cut_at[0]
    q_alone = [t for loop in alone for t in loop.times]
    q_beside = [t for loop in beside for t in loop.times]
    closed = sorted(seconds for seconds in cut if seconds is not None)
    day.figures["slow_bodies"] = {
        "connections": SLOW_BODIES,
        "byte_every_s": SLOW_BODY_BYTE_SECONDS,
        "window_s": SESSION_PHASE_SECONDS,
        "q_alone": summary(q_alone, SESSION_PHASE_SECONDS),
        "q_beside": summary(q_beside, SESSION_PHASE_SECONDS),
        "p50_ratio": ratio(ms(q_beside, 50), ms(q_alone, 50)),
        "cut_off": len(closed),
        "cut_off_after_s": None if not closed else round(statistics.median(closed), 2),
        "q_codes": codes(alone + beside),
    }


def _trickle_body(host: str, port: int, token: str, stop: threading.Event) -> float | None:
    """Send a POST's headers, then its body a byte at a time; return when the server cut it."""
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=CLIENT_TIMEOUT_SECONDS) as connection:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {SLOW_BODY_BYTES}\r\n\r\n"
        )
        try:
            connection.sendall(head.encode())
            connection.setblocking(False)
            while not stop.wait(SLOW_BODY_BYTE_SECONDS):
                try:
                    if connection.recv(65536) == b"":
                        return time.perf_counter() - started  # closed by the server
                except BlockingIOError:
                    pass
                connection.send(b" ")
        except OSError:
            return time.perf_counter() - started
    return None
