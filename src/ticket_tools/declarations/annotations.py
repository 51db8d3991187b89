"""MCP's tool annotations: what calling a tool does besides answering."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Annotations:
    """What calling a tool does besides answering: the hints a host reads to ask for consent.

    They are MCP's tool annotations (readOnlyHint, destructiveHint, idempotentHint,
    openWorldHint): hints a host may show or act on, never a security boundary.
    """

    read_only: bool
    """It changes nothing, anywhere."""
    destructive: bool
    """It may delete or overwrite what exists (False: it only adds). Never with read_only."""
    idempotent: bool
    """A second identical call changes nothing more. Always with read_only."""
    open_world: bool
    """It reaches beyond this service's own data (the web, another system)."""

    def __post_init__(self) -> None:
        for name in ("read_only", "destructive", "idempotent", "open_world"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"annotations: {name} must be True or False")
        # MCP reads destructive and idempotent only when read_only is false;
        # a read-only tool that claims otherwise says two things at once.
        if self.read_only and (self.destructive or not self.idempotent):
            raise ValueError("annotations: a read-only tool is idempotent and not destructive")


READ_ONLY = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
"""Reads this service's own data and changes nothing: every registered tool.

A handler gets a `TicketStore`, which has no method that writes, and the store is
the only thing it reaches: no tool can be anything but read-only.
"""


def mcp_annotations(annotations: Annotations) -> dict[str, bool]:
    """Spell annotations as MCP's hints, e.g. {"readOnlyHint": True, ...}."""
    return {
        "readOnlyHint": annotations.read_only,
        "destructiveHint": annotations.destructive,
        "idempotentHint": annotations.idempotent,
        "openWorldHint": annotations.open_world,
    }
