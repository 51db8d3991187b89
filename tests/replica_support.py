"""Helpers for the replica tests: raw HTTP to a real server, its metrics, a locked table.

The servers are real `ticket-tools serve --http` processes (`http_support.HttpServer`);
the requests are plain HTTP/1.1 with a generous timeout, so a test asserts what was
answered, never how fast.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

CLIENT_TIMEOUT = 30.0  # far above any answer, far below nothing: for calls that must return
NO_STORE_TIMEOUT = 8.0  # for calls that need no store, made while a store call stalls longer
WAIT_SECONDS = 60.0  # how long `wait_until` polls before the test fails
Answer = tuple[int, dict[str, str], bytes]


def request(
    url: str,
    body: Mapping[str, object] | None = None,
    *,
    bearer: str | None = None,
    timeout: float = CLIENT_TIMEOUT,
) -> Answer:
    """Send one request (POST with a JSON body, else GET); return status, headers, body."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    data = None if body is None else json.dumps(body).encode()
    sent = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as response:  # noqa: S310
            status, answer, got = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, answer, got = error.code, error.headers, error.read()
    return status, {k.lower(): v for k, v in answer.items()}, got


def rpc(method: str, params: Mapping[str, object] | None = None) -> dict[str, object]:
    """Return a JSON-RPC request (id 1)."""
    message: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def tool_call(name: str, args: Mapping[str, object]) -> dict[str, object]:
    """Return a tools/call request: stateless servers answer it without `initialize`."""
    return rpc("tools/call", {"name": name, "arguments": dict(args)})


def call(url: str, bearer: str, name: str, args: Mapping[str, object], **kw: Any) -> Any:
    """Call a tool over raw HTTP; return the JSON-RPC `result` or `error` object."""
    status, _, body = request(url, tool_call(name, args), bearer=bearer, **kw)
    assert status == 200, (status, body)
    answer = json.loads(body)
    return answer.get("result", answer.get("error"))


def origin(server_url: str) -> str:
    """Return http://HOST:PORT of a server whose MCP URL is given."""
    return server_url.removesuffix("/mcp")


def metrics(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Scrape base/metrics; return each sample's value by (name, sorted labels)."""
    status, _, body = request(f"{base}/metrics")
    assert status == 200, status
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def metric(base: str, name: str, **labels: str) -> float:
    """Return one sample's value from base/metrics."""
    return metrics(base)[(name, tuple(sorted(labels.items())))]


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Poll `check` until it holds; fail after WAIT_SECONDS naming `what`."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {WAIT_SECONDS} s: {what}")
        time.sleep(0.05)


@contextmanager
def locked_table(superuser_dsn: str) -> Iterator[None]:
    """Hold ACCESS EXCLUSIVE on `tickets` (every read waits) until the block ends."""
    with psycopg.connect(superuser_dsn) as connection:
        connection.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            connection.rollback()
