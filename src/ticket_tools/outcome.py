"""What a tool call returns: the contract's result dict, plus a safe detail for hosts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Code = Literal["unknown_tool", "invalid_arguments", "forbidden", "not_found"]


@dataclass(frozen=True)
class Outcome:
    """The result of one call, and for a failure, a sentence a model can act on."""

    result: dict[str, object]
    """Exactly what `execute_tool` returns: {"ok": True, ...} or {"ok": False, "code": ...}."""
    detail: str | None = None
    """For a failure: which argument and rule failed, or why. Never echoes an input value."""


def success(**fields: object) -> Outcome:
    """Return a successful outcome carrying `fields` beside "ok"."""
    return Outcome({"ok": True, **fields})


def failure(code: Code, detail: str) -> Outcome:
    """Return a failed outcome: the bare code for the model, the detail for hosts."""
    return Outcome({"ok": False, "code": code}, detail)
