"""The bad-day phase's figures judged: each against its target of issue 19 (point 11), as
rows of the printed table, and the wrong answers that fail the run (load/bad_day.py)."""

from __future__ import annotations

from typing import Any

Figures = dict[str, Any]

# Targets of issue 19, point 11.
NEIGHBOUR_RATIO_TARGET = 2.0
NO_STORE_P99_TARGET_MS = 50.0
FAIL_MARGIN_SECONDS = 0.5  # a store call fails within the deadline plus this
EXIT_MARGIN_SECONDS = 1.0  # SIGTERM exits within the grace plus this
DEADLINE_SECONDS = 2.0  # the replicas' --store-timeout: the default
GRACE_SECONDS = 3.0  # the replicas' --grace: the default


def is_refusal(code: str) -> bool:
    """Say whether an answer code is a limit's refusal: an HTTP error, or rate_limited."""
    return code.startswith("http ") or code == "rate_limited"


def problems(figures: Figures | None) -> list[str]:
    """Return what went wrong beyond timings: refusals of Q, wrong answers, a bad exit."""
    if not figures:
        return []
    found = []
    noisy = figures.get("noisy_neighbour", {})
    slow = figures.get("slow_bodies", {})
    sessions = figures.get("sessions", {})
    for label, codes in (
        ("noisy neighbour: Q", noisy.get("q_codes")),
        ("noisy neighbour: H", noisy.get("h_codes")),
        ("Q beside slow bodies", slow.get("q_codes")),
        ("Q's paced calls", sessions.get("q_codes")),
    ):
        wrong = {code: n for code, n in (codes or {}).items() if code != "ok"}
        if wrong:
            found.append(f"bad day: {label} got {wrong}")
    for kind in ("lock", "stop"):
        found += _stall_problems(kind, figures.get(f"stall_{kind}"))
    per_call = sessions.get("per_call_host")
    if per_call is not None:
        wrong = {
            code: n
            for part in ("walk_codes", "at_once_codes")
            for code, n in per_call[part].items()
            if code != "ok"
        }
        if wrong or per_call["odd_statuses"]:
            found.append(
                f"bad day: a session-per-call host got {wrong}, statuses {per_call['odd_statuses']}"
            )
    if sessions.get("newcomer_failures"):
        found.append(f"bad day: Q's new sessions failed: {sessions['newcomer_failures']}")
    for r in figures.get("sigterm", {}).get("rounds", []):
        if r["status"] != 0 or r["answer"] != "unavailable":
            found.append(f"bad day: a SIGTERM round exited {r['status']}, answer {r['answer']}")
    return found


def _stall_problems(kind: str, stall: Figures | None) -> list[str]:
    if stall is None:
        return []
    found = []
    extra = set(stall["no_store_codes"]) - {"tools", "-32602", "invalid_arguments"}
    if extra:
        found.append(f"bad day: {kind}: calls that need no store got {sorted(extra)}")
    wrong_store = set(stall["getter_codes"]) - {"ok", "unavailable"}
    if wrong_store:
        found.append(f"bad day: {kind}: store calls got {sorted(wrong_store)}")
    if stall["readyz_503_after_s"] is None or stall["readyz_200_after_s"] is None:
        found.append(f"bad day: {kind}: /readyz did not turn 503 and back to 200")
    return found


def rows(figures: Figures | None) -> list[tuple[str, str, str, str]]:
    """Return the table's rows: what was measured, the figure, the target, met or not."""
    if not figures:
        return []
    out: list[tuple[str, str, str, str]] = []

    def row(what: str, figure: str, target: str, met: bool | None) -> None:
        out.append((what, figure, target, "-" if met is None else ("met" if met else "NOT met")))

    noisy = figures.get("noisy_neighbour")
    if noisy is not None:
        for q in ("p50", "p99"):
            value = noisy[f"{q}_ratio"]
            alone, beside = noisy["q_alone"][f"{q}_ms"], noisy["q_with_h"][f"{q}_ms"]
            lag = noisy.get("machine_lag_ms", {})
            lags = (
                "; machine lag p99 "
                + " -> ".join(f"{lag[k]['p99']}" for k in ("alone", "with_h") if k in lag)
                + " ms"
            )
            row(
                f"Q's {q} with H's searches / alone",
                f"{value}x ({alone} -> {beside} ms{lags if lag else ''})",
                f"<= {NEIGHBOUR_RATIO_TARGET:g}x",
                None if value is None else value <= NEIGHBOUR_RATIO_TARGET,
            )
        cores = noisy.get("cores_busy")
        if cores:
            row(
                "cores busy alone -> with H: PostgreSQL, replica, whole machine",
                ", ".join(
                    f"{cores['alone'][who]} -> {cores['with_h'][who]}"
                    for who in ("postgres", "replica", "machine")
                )
                + f" (of {cores['alone']['of']})",
                "(no target)",
                None,
            )
    slow = figures.get("slow_bodies")
    if slow is not None:
        value = slow["p50_ratio"]
        row(
            f"Q's p50 beside {slow['connections']} slow bodies / alone",
            f"{value}x ({slow['q_alone']['p50_ms']} -> {slow['q_beside']['p50_ms']} ms)",
            f"<= {NEIGHBOUR_RATIO_TARGET:g}x",
            None if value is None else value <= NEIGHBOUR_RATIO_TARGET,
        )
        after = slow["cut_off_after_s"]
        row(
            "slow bodies cut off",
            f"{slow['cut_off']} of {slow['connections']} within {slow['window_s']:g} s"
            + ("" if after is None else f", after {after} s"),
            "(no target)",
            None,
        )
    for kind, label in (("lock", "table locked"), ("stop", "database stopped")):
        stall = figures.get(f"stall_{kind}")
        if stall is None:
            continue
        p99, lag = stall["no_store_stalled"]["p99_ms"], stall["machine_lag_ms"]["p99"]
        row(
            f"{label}: p99 of calls needing no store (idle before; machine lag p99)",
            f"{p99} ms ({stall['no_store_idle']['p99_ms']} ms; {lag} ms)",
            f"<= {NO_STORE_P99_TARGET_MS:g} ms",
            None if p99 is None else p99 <= NO_STORE_P99_TARGET_MS,
        )
        worst = stall["store_fail_max_s"]
        row(
            f"{label}: a store call fails after (median, max)",
            f"{stall['store_fail_median_s']} s, {worst} s ({stall['store_calls_failed']} calls)",
            f"<= {DEADLINE_SECONDS + FAIL_MARGIN_SECONDS:g} s",
            None if worst is None else worst <= DEADLINE_SECONDS + FAIL_MARGIN_SECONDS,
        )
        row(
            f"{label}: /readyz 503 after / 200 again after",
            f"{stall['readyz_503_after_s']} s / {stall['readyz_200_after_s']} s",
            "(no target)",
            None,
        )
    sessions = figures.get("sessions")
    if sessions is not None:
        for key, label in (("flood", "session flood"), ("burst", "burst of calls")):
            value = sessions[f"{key}_p50_ratio"]
            beside = sessions[f"q_during_{key}"]["p50_ms"]
            lag = sessions.get("machine_lag_ms", {})
            lags = f"; machine lag p99 {lag['alone']['p99']} -> {lag[key]['p99']} ms" if lag else ""
            row(
                f"Q's p50 during one token's {label} / alone",
                f"{value}x ({sessions['q_alone']['p50_ms']} -> {beside} ms{lags})",
                f"<= {NEIGHBOUR_RATIO_TARGET:g}x",
                None if value is None else value <= NEIGHBOUR_RATIO_TARGET,
            )
        refused = ", ".join(f"{n} {kind}" for kind, n in sessions["flood_refused"].items())
        row(
            "the flooding token: sessions opened, refused",
            f"{sessions['flood_opened']}, {refused or 'none'}",
            "(bounded)",
            None,
        )
        out += _per_call_rows(sessions.get("per_call_host"))
        burst = sessions["burst_codes"]
        refused_calls = sum(n for code, n in burst.items() if is_refusal(code))
        row(
            "the bursting token: calls answered, refused",
            f"{sum(burst.values()) - refused_calls}, {refused_calls}",
            "(bounded)",
            None,
        )
        failures = sum(sessions["newcomer_failures"].values())
        row(
            "Q's new sessions meanwhile: opened, failed",
            f"{sessions['newcomer_sessions']}, {failures}",
            "0 failed",
            failures == 0,
        )
    sigterm = figures.get("sigterm")
    if sigterm is not None:
        worst = sigterm["exit_max_s"]
        statuses = sorted({r["status"] for r in sigterm["rounds"]})
        row(
            f"SIGTERM during a stall: exit (median, max of {len(sigterm['rounds'])})",
            f"{sigterm['exit_median_s']} s, {worst} s, status {statuses}",
            f"<= {GRACE_SECONDS + EXIT_MARGIN_SECONDS:g} s",
            worst <= GRACE_SECONDS + EXIT_MARGIN_SECONDS,
        )
    return out


def render(figures: Figures | None) -> str:
    """Return the bad-day table as plain text (empty without figures)."""
    table = rows(figures)
    if not table:
        return ""
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    head = ("bad day (one replica)", "figure", "target", "")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, [*widths, 0], strict=True)).rstrip()]
    lines.append("-" * len(lines[0]))
    for r in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, [*widths, 0], strict=True)).rstrip())
    return "\n".join(lines)


def _per_call_rows(per_call: Figures | None) -> list[tuple[str, str, str, str]]:
    """The session-per-call host's row (issue 32): every call answered, no refusal."""
    if per_call is None:
        return []
    walk, at_once = per_call["walk_codes"], per_call["at_once_codes"]
    answered = walk.get("ok", 0) + at_once.get("ok", 0)
    asked = sum(walk.values()) + sum(at_once.values())
    met = answered == asked and not per_call["odd_statuses"]
    return [
        (
            "a session-per-call host, default limits: 40 pages, then 10 at once: answered",
            f"{answered} of {asked}",
            "all",
            "met" if met else "NOT met",
        )
    ]
