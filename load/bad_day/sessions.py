"""The bad day's part 4: one token floods sessions, then bursts calls, beside tenant Q."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from load.bad_day.day import (
    CLIENTS,
    GET,
    NEWCOMER_EVERY_SECONDS,
    PACED_CALLS_PER_SECOND,
    SESSION_PHASE_SECONDS,
    Day,
    Server,
)
from load.bad_day.elsewhere import elsewhere, lagging
from load.bad_day.report import Figures, is_refusal
from load.bad_day.rpc import (
    INITIALIZE,
    INITIALIZED,
    LIST,
    PROTOCOL_VERSION,
    Client,
    Loop,
    answer_code,
    call,
    codes,
    open_session,
    results,
    run_loops,
    running,
    session_client,
    summary,
    with_session,
)
from load.stats import ms, ratio
from load.supervise import rss_kib


def sessions(day: Day) -> None:
    """Q's p50 and new sessions while one token floods sessions, then bursts calls."""
    server = day.server("sessions")  # sessions on, the default rate limits
    try:
        per_call = _per_call_host(server.url, day.token("q", "per-call"))
        rss_before = rss_kib(server.process.pid)
        alone = _paced(day, server, "alone")
        with lagging() as lag_alone:
            run_loops(alone, SESSION_PHASE_SECONDS)
        flood = _Flood(server.url, day.token("f", "flood"))
        beside_flood = _paced(day, server, "flood")
        newcomers = _Newcomers(server.url, day.token, "newcomer")
        jobs = [loop.run for loop in beside_flood] + [newcomers.run]
        flooding = elsewhere([flood.run] * CLIENTS, flood.figures)
        with flooding as flooded, running(jobs), lagging() as lag_flood:
            time.sleep(SESSION_PHASE_SECONDS)
        opened, refused, first_refusal = flooded[0]
        rss_after = rss_kib(server.process.pid)
        burst_session = open_session(Client(server.url, day.token("b", "burst")))
        burst = [
            Loop(session_client(server.url, day.token("b", "burst"), burst_session), GET)
            for _ in range(CLIENTS)
        ]
        beside_burst = _paced(day, server, "burst")
        burst_newcomers = _Newcomers(server.url, day.token, "burst-newcomer")
        jobs = [loop.run for loop in beside_burst] + [burst_newcomers.run]
        bursting = elsewhere([loop.run for loop in burst], lambda: results(burst))
        with bursting as burst_results, running(jobs), lagging() as lag_burst:
            time.sleep(SESSION_PHASE_SECONDS)
        _, burst_codes = burst_results[0]
    finally:
        server.stop()
    q_alone = [t for loop in alone for t in loop.times]
    q_flood = [t for loop in beside_flood for t in loop.times]
    q_burst = [t for loop in beside_burst for t in loop.times]
    day.figures["sessions"] = {
        "q_alone": summary(q_alone, SESSION_PHASE_SECONDS),
        "q_during_flood": summary(q_flood, SESSION_PHASE_SECONDS),
        "q_during_burst": summary(q_burst, SESSION_PHASE_SECONDS),
        "flood_p50_ratio": ratio(ms(q_flood, 50), ms(q_alone, 50)),
        "burst_p50_ratio": ratio(ms(q_burst, 50), ms(q_alone, 50)),
        "machine_lag_ms": {"alone": lag_alone[0], "flood": lag_flood[0], "burst": lag_burst[0]},
        "flood_opened": opened,
        "flood_refused": refused,
        "flood_first_refusal_s": first_refusal,
        "newcomer_sessions": newcomers.opened + burst_newcomers.opened,
        "newcomer_failures": dict(sorted((newcomers.failed + burst_newcomers.failed).items())),
        "per_call_host": per_call,
        "burst_codes": burst_codes,
        "burst_answered_per_s": round(
            sum(n for code, n in burst_codes.items() if not is_refusal(code))
            / SESSION_PHASE_SECONDS,
            1,
        ),
        "q_codes": codes(alone + beside_flood + beside_burst),
        "rss_mib_before_after_flood": [
            None if kib is None else round(kib / 1024, 1) for kib in (rss_before, rss_after)
        ],
    }


PER_CALL_PAGES = 40  # docs/operations.md: a page walk of 40 pages fits in one burst
PER_CALL_AT_ONCE = 10
# What each of a session-per-call host's six requests is answered: initialize, initialized,
# the GET stream, tools/call, tools/list, DELETE.
PER_CALL_STATUSES = (200, 202, 200, 200, 200, 200)


def _per_call_host(url: str, token: str) -> Figures:
    """One subject as langchain-mcp-adapters calls by default: a session per tool call.

    PER_CALL_PAGES pages of Q's tickets one after another, then PER_CALL_AT_ONCE calls at
    once, against the default limits (issue 32): each call's answer code, and each session's
    statuses when they are not PER_CALL_STATUSES.
    """
    walk: Counter[str] = Counter()
    odd: Counter[str] = Counter()
    cursor = None
    for _ in range(PER_CALL_PAGES):
        args: dict[str, object] = {"limit": 1} if cursor is None else {"limit": 1, "cursor": cursor}
        statuses, code, body = _one_call(url, token, call("search_tickets", args))
        walk[code] += 1
        if statuses != PER_CALL_STATUSES:
            odd[str(statuses)] += 1
        cursor = body.get("next_cursor")
    with ThreadPoolExecutor(PER_CALL_AT_ONCE) as pool:
        at_once = list(pool.map(lambda _: _one_call(url, token, GET), range(PER_CALL_AT_ONCE)))
    for statuses, _, _ in at_once:
        if statuses != PER_CALL_STATUSES:
            odd[str(statuses)] += 1
    return {
        "walk_codes": dict(walk),
        "at_once_codes": dict(Counter(code for _, code, _ in at_once)),
        "odd_statuses": dict(odd),
    }


def _one_call(
    url: str, token: str, message: dict[str, object]
) -> tuple[tuple[int, ...], str, dict[str, object]]:
    """One tool call in a session of its own; return the statuses, its code, its result."""
    client = Client(url, token)
    statuses = []
    status, _, _, headers = client.post(INITIALIZE)
    statuses.append(status)
    client.headers["Mcp-Session-Id"] = headers.get("mcp-session-id", "")
    client.headers["Mcp-Protocol-Version"] = PROTOCOL_VERSION
    statuses.append(client.post(INITIALIZED)[0])
    stream_status, stream = client.stream()
    statuses.append(stream_status)
    status, body, _, _ = client.post(message)
    statuses.append(status)
    statuses.append(client.post(LIST)[0])
    statuses.append(client.request("DELETE"))
    stream.close()
    client.close()
    code = answer_code(status, body)
    structured: dict[str, object] = {}
    if status == 200:
        structured = json.loads(body).get("result", {}).get("structuredContent") or {}
    return tuple(statuses), code, structured


def _paced(day: Day, server: Server, name: str) -> list[Loop]:
    loops = []
    for n in range(2):
        client = Client(server.url, day.token("q", f"paced-{name}-{n}"))
        session = open_session(client)
        loops.append(Loop(with_session(client, session), GET, pace=PACED_CALLS_PER_SECOND))
    return loops


class _Flood:
    """One token opening sessions (initialize only) as fast as it can, on each thread's link."""

    def __init__(self, url: str, token: str) -> None:
        self._url = url
        self._token = token
        self._lock = threading.Lock()
        self.opened = 0
        self.refused: Counter[str] = Counter()
        self._started = time.perf_counter()
        self._first_refusal: float | None = None

    def run(self, stop: threading.Event) -> None:
        """Open sessions until stopped; count what was opened and what refused, and why."""
        client = Client(self._url, self._token)
        while not stop.is_set():
            status, body, _, _ = client.post(INITIALIZE)
            with self._lock:
                if status == 200:
                    self.opened += 1
                    continue
                if self._first_refusal is None:
                    self._first_refusal = time.perf_counter() - self._started
                self.refused[_refusal(status, body)] += 1

    def figures(self) -> tuple[int, dict[str, int], float | None]:
        """Return the sessions opened, the refusals by kind, and the seconds to the first one."""
        first = None if self._first_refusal is None else round(self._first_refusal, 2)
        return self.opened, dict(sorted(self.refused.items())), first


def _refusal(status: int, body: bytes) -> str:
    """Name a refusal: the session cap, a rate limit, or the status."""
    text = body.decode(errors="replace")
    if "sessions" in text:
        return f"http {status} session cap"
    if "too many calls" in text:
        return f"http {status} rate limit"
    return f"http {status}"


class _Newcomers:
    """Q's new users, one new session every NEWCOMER_EVERY_SECONDS, each making one call."""

    def __init__(self, url: str, token: Callable[[str, str], str], name: str) -> None:
        self._url = url
        self._token = token
        self._name = name
        self.opened = 0
        self.failed: Counter[str] = Counter()

    def run(self, stop: threading.Event) -> None:
        """Open a session and call once on it, every NEWCOMER_EVERY_SECONDS, until stopped."""
        number = 0
        while not stop.wait(NEWCOMER_EVERY_SECONDS):
            number += 1
            client = Client(self._url, self._token("q", f"{self._name}-{number}"))
            try:
                open_session(client)
            except RuntimeError as error:
                self.failed[str(error)] += 1
                continue
            status, body, _, _ = client.post(GET)
            code = answer_code(status, body)
            if code == "ok":
                self.opened += 1
            else:
                self.failed[code] += 1
            client.close()
