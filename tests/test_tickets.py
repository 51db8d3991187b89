"""What a ticket is to the model: the public view and the ticket-ID argument."""

from __future__ import annotations

from typing import Any

import pytest

from ticket_tools import Arg
from ticket_tools.tickets import public_view, ticket_id_arg


@pytest.mark.parametrize(
    ("required", "kwargs"),
    [
        pytest.param(False, {}, id="optional-by-default"),
        pytest.param(True, {"required": True}, id="required"),
    ],
)
def test_ticket_id_arg_declares_the_id_format(required: bool, kwargs: dict[str, Any]) -> None:
    assert ticket_id_arg("cursor", "Where to start.", **kwargs) == Arg(
        name="cursor",
        type="string",
        description="Where to start.",
        required=required,
        min_length=7,
        max_length=7,
        pattern="TKT-[0-9]{3}",
        pattern_rule="a ticket ID: TKT- followed by exactly three digits, such as TKT-104",
    )


def test_public_view_copies_the_three_public_fields_only() -> None:
    stored = {"id": "TKT-101", "title": "Login", "status": "open", "internal_note": "secret"}
    view = public_view(stored)
    assert view == {"id": "TKT-101", "title": "Login", "status": "open"}
    view["title"] = "changed"
    assert stored["title"] == "Login"
