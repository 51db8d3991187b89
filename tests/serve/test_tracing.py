"""A call's W3C trace context: exactly the valid `traceparent` values give a trace id."""

from __future__ import annotations

import pytest

from ticket_tools.serve.tracing import MAX_TRACEPARENT_CHARS, call_trace_id, trace_id

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
VALID = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(VALID, TRACE, id="valid"),
        pytest.param(f"00-{TRACE}-00f067aa0ba902b7-00", TRACE, id="not-sampled"),
        pytest.param(f"cc-{TRACE}-00f067aa0ba902b7-01-what-comes-later", TRACE, id="later-version"),
        pytest.param(f"cc-{TRACE}-00f067aa0ba902b7-01", TRACE, id="later-version-four-fields"),
        pytest.param(f"00-{TRACE}-00f067aa0ba902b7-01-extra", None, id="version-00-extra-field"),
        pytest.param(f"ff-{TRACE}-00f067aa0ba902b7-01", None, id="version-ff"),
        pytest.param(f"00-{'0' * 32}-00f067aa0ba902b7-01", None, id="zero-trace-id"),
        pytest.param(f"00-{TRACE}-{'0' * 16}-01", None, id="zero-parent-id"),
        pytest.param(VALID.upper(), None, id="upper-case"),
        pytest.param(VALID + "\n", None, id="trailing-newline"),
        pytest.param(" " + VALID, None, id="leading-space"),
        pytest.param(VALID[:-1], None, id="short-flags"),
        pytest.param(f"0-{TRACE}-00f067aa0ba902b7-01", None, id="short-version"),
        pytest.param(f"00-{TRACE[:-1]}g-00f067aa0ba902b7-01", None, id="not-hex"),
        pytest.param(f"00_{TRACE}_00f067aa0ba902b7_01", None, id="wrong-separator"),
        pytest.param(
            f"cc-{TRACE}-00f067aa0ba902b7-01-" + "x" * MAX_TRACEPARENT_CHARS, None, id="too-long"
        ),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="null"),
        pytest.param(1, None, id="number"),
        pytest.param([VALID], None, id="list"),
    ],
)
def test_trace_id(value: object, expected: str | None) -> None:
    assert trace_id(value) == expected


OTHER = "0af7651916cd43dd8448eb211c80319c"
OTHER_VALID = f"00-{OTHER}-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("meta", "headers", "expected"),
    [
        pytest.param({"traceparent": VALID}, {"traceparent": OTHER_VALID}, TRACE, id="meta-wins"),
        pytest.param(
            {"traceparent": "bad"}, {"traceparent": OTHER_VALID}, None, id="bad-meta-wins"
        ),
        pytest.param({}, {"traceparent": OTHER_VALID}, OTHER, id="header"),
        pytest.param(None, {"traceparent": OTHER_VALID}, OTHER, id="no-meta"),
        pytest.param({"traceparent": VALID}, None, TRACE, id="no-headers"),
        pytest.param({}, {}, None, id="neither"),
        pytest.param(None, None, None, id="stdio"),
    ],
)
def test_call_trace_id(
    meta: dict[str, object] | None, headers: dict[str, str] | None, expected: str | None
) -> None:
    assert call_trace_id(meta, headers) == expected
