"""Bearer-token verification in-process: every refusal, what an accepted token grants, the JWKS."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa as rsa_keys
from mcp.server.auth.provider import AccessToken

from http_support import REFUSED, JwksHttpsServer, TokenMaker, without
from testkit.tokens import AUDIENCE, ISSUER, READ, Issuer, claims
from ticket_tools.serve.tokens import (
    LEEWAY_SECONDS,
    MAX_JWKS_BYTES,
    MAX_TOKEN_CHARS,
    MIN_REFRESH_SECONDS,
    JwksError,
    JwtVerifier,
    KeySet,
    TokenRules,
    context_from_token,
)

pytestmark = pytest.mark.anyio

RULES = TokenRules(issuer=ISSUER, audience=AUDIENCE)


@pytest.fixture(scope="module")
def idp() -> Issuer:
    """The identity provider whose JWKS the verifier trusts."""
    return Issuer("idp")


@pytest.fixture(scope="module")
def stranger() -> Issuer:
    """Another party with the same kids but its own keys: never trusted."""
    return Issuer("idp")


@pytest.fixture
def jwks_file(tmp_path: Path, idp: Issuer) -> Path:
    """The provider's JWKS in a file."""
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return path


@pytest.mark.parametrize("make", [pytest.param(make, id=name) for name, make in REFUSED.items()])
async def test_refused(idp: Issuer, stranger: Issuer, jwks_file: Path, make: TokenMaker) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    assert await verifier.verify_token(make(idp, stranger)) is None


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
async def test_an_accepted_token_carries_its_identity(
    idp: Issuer, jwks_file: Path, alg: str
) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    exp = int(time.time()) + 600
    token_claims = claims("alpha", "user-1", exp=exp, client_id="host-app")
    token = idp.sign(token_claims, alg=alg)
    assert await verifier.verify_token(token) == AccessToken(
        token=token,
        client_id="host-app",
        scopes=["openid", READ],
        expires_at=exp + LEEWAY_SECONDS,
        resource=AUDIENCE,
        subject="user-1",
        claims=token_claims,
    )


async def test_leeway_admits_small_clock_skew(idp: Issuer, jwks_file: Path) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    skewed = claims("alpha", "u1", exp=int(time.time()) + 5, nbf=int(time.time()) + 10)
    access = await verifier.verify_token(idp.sign(skewed))
    assert access is not None
    assert access.subject == "u1"


@pytest.mark.parametrize(
    "times",
    [
        pytest.param({"exp": time.time() + 600.5}, id="float-exp"),
        pytest.param({"iat": time.time() - 1.25, "nbf": time.time() - 2.5}, id="float-iat-nbf"),
    ],
)
async def test_fractional_numeric_dates_are_accepted(
    idp: Issuer, jwks_file: Path, times: dict[str, float]
) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    signed = claims("alpha", "u1", **times)
    access = await verifier.verify_token(idp.sign(signed))
    assert access is not None
    assert (access.subject, access.claims) == ("u1", signed)


def _padded_to(length: int, idp: Issuer) -> str:
    """Return the longest valid token not over `length` characters (padding grows it 1-2 a time)."""
    padding = length * 3 // 4 - 600  # base64 makes 4 characters of 3 bytes; the rest is < 800
    while len(idp.sign(claims("alpha", "u1", padding="x" * (padding + 1)))) <= length:
        padding += 1
    return idp.sign(claims("alpha", "u1", padding="x" * padding))


async def test_a_token_at_the_length_limit_is_accepted(idp: Issuer, jwks_file: Path) -> None:
    token = _padded_to(MAX_TOKEN_CHARS, idp)
    assert MAX_TOKEN_CHARS - 2 <= len(token) <= MAX_TOKEN_CHARS
    access = await JwtVerifier(KeySet(str(jwks_file)), RULES).verify_token(token)
    assert access is not None
    assert access.token == token


@pytest.mark.parametrize(
    ("extra", "client_id"),
    [
        pytest.param({}, "u1", id="subject"),
        pytest.param({"azp": "host-b"}, "host-b", id="azp"),
        pytest.param({"client_id": "host-a", "azp": "host-b"}, "host-a", id="client-id-first"),
        pytest.param({"client_id": "", "azp": 3}, "u1", id="odd-values-ignored"),
    ],
)
async def test_client_id(
    idp: Issuer, jwks_file: Path, extra: dict[str, object], client_id: str
) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    access = await verifier.verify_token(idp.sign(claims("alpha", "u1", **extra)))
    assert access is not None
    assert access.client_id == client_id


@pytest.mark.parametrize(
    ("scope_claims", "scopes", "can_read"),
    [
        pytest.param({"scope": "tickets:read"}, [READ], True, id="scope"),
        pytest.param({"scope": "a  tickets:read "}, ["a", READ], True, id="scope-spaces"),
        pytest.param({"scp": ["x", READ, 5]}, ["x", READ], True, id="scp-list"),
        pytest.param({"scope": "a", "scp": [READ]}, ["a", READ], True, id="both"),
        pytest.param({"scope": "tickets:readonly"}, ["tickets:readonly"], False, id="prefix"),
        pytest.param({"scope": "TICKETS:READ"}, ["TICKETS:READ"], False, id="case"),
        pytest.param({"scope": [READ]}, [], False, id="scope-a-list"),
        pytest.param({"scp": READ}, [], False, id="scp-a-string"),
        pytest.param({}, [], False, id="none"),
    ],
)
async def test_read_scope_gives_can_read_tickets(
    idp: Issuer,
    jwks_file: Path,
    scope_claims: dict[str, object],
    scopes: list[str],
    can_read: bool,
) -> None:
    verifier = JwtVerifier(KeySet(str(jwks_file)), RULES)
    token_claims = claims("alpha", "u1")
    del token_claims["scope"]
    access = await verifier.verify_token(idp.sign({**token_claims, **scope_claims}))
    assert access is not None
    assert access.scopes == scopes
    assert context_from_token(access, RULES) == {"tenant": "alpha", "can_read_tickets": can_read}


async def test_custom_tenant_claim_and_read_scope(idp: Issuer, jwks_file: Path) -> None:
    rules = TokenRules(ISSUER, AUDIENCE, tenant_claim="org", read_scope="helpdesk.read")
    verifier = JwtVerifier(KeySet(str(jwks_file)), rules)
    token = idp.sign(claims("alpha", "u1", org="beta", scope="helpdesk.read"))
    access = await verifier.verify_token(token)
    assert context_from_token(access, rules) == {"tenant": "beta", "can_read_tickets": True}
    # The default claim name means nothing under these rules.
    assert await verifier.verify_token(idp.sign(without("tenant") | {"org": ""})) is None


def test_no_token_reads_nothing() -> None:
    assert context_from_token(None, RULES) == {"tenant": None, "can_read_tickets": False}


def _jwks_with(entries: list[object]) -> bytes:
    return json.dumps({"keys": entries}).encode()


def test_keys_the_server_does_not_use_are_skipped(tmp_path: Path, idp: Issuer) -> None:
    [rsa, es, _] = idp.jwks()["keys"]
    rsa_key = idp.keys["idp-rs"][1]
    assert isinstance(rsa_key, rsa_keys.RSAPrivateKey)
    private = jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key, as_dict=True)
    entries: list[object] = [
        {**rsa, "kid": "encryption", "use": "enc"},
        {**private, "kid": "private"},
        {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        {"kty": "RSA", "kid": "broken"},
        {**es, "kid": "es384", "alg": "ES384"},
        {**rsa, "kid": 5},
        {**rsa, "kid": None},
        "not a key",
        es,
    ]
    path = tmp_path / "jwks.json"
    path.write_bytes(_jwks_with(entries))
    keys = KeySet(str(path))
    for kid in ("encryption", "private", "hmac", "broken", "es384", "idp-rs", "idp-ed"):
        assert keys.get(kid) is None, kid
    found = keys.get("idp-es")
    assert found is not None
    assert found.algorithm_name == "ES256"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "cannot read {path}: No such file or directory", id="missing"),
        pytest.param(b"{", "the JWKS is not valid JSON", id="not-json"),
        pytest.param(b"[" * 100_000, "the JWKS is not valid JSON", id="deep"),
        pytest.param(b"\xff", "the JWKS is not valid JSON", id="not-utf8"),
        pytest.param(b"[]", 'the JWKS is not a JSON object with a "keys" list', id="a-list"),
        pytest.param(b'{"keys": {}}', 'the JWKS is not a JSON object with a "keys" list', id="obj"),
        pytest.param(
            b'{"keys": []}',
            "{path} holds no usable signing key (RS256, ES256, EdDSA)",
            id="no-keys",
        ),
        pytest.param(
            b" " * (MAX_JWKS_BYTES + 1),
            f"the JWKS is larger than {MAX_JWKS_BYTES} bytes",
            id="too-large",
        ),
    ],
)
def test_an_unusable_jwks_is_one_error(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "jwks.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(JwksError) as raised:
        KeySet(str(path))
    assert str(raised.value) == message.format(path=path)


NO_HOST = "a JWKS URL must name a host (and a port from 0 to 65535, if any)"
USERINFO = "a JWKS URL must not hold a user name or password"
NOT_TEXT = "a JWKS URL must be ASCII text without spaces or control characters"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param("http://idp.example/jwks", "a JWKS URL must use https", id="plain-http"),
        pytest.param(
            "https://127.0.0.1:1/jwks.json",
            "cannot fetch https://127.0.0.1:1/jwks.json: Connection refused",
            id="refused",
        ),
        pytest.param("https://[/jwks", NO_HOST, id="bad-url"),
        pytest.param("https:///jwks.json", NO_HOST, id="no-host"),
        pytest.param("https://127.0.0.1:99999/jwks", NO_HOST, id="port-past-65535"),
        pytest.param("https://127.0.0.1:k/jwks", NO_HOST, id="port-not-a-number"),
        # The query may carry a credential: it is sent, never shown.
        pytest.param(
            "https://127.0.0.1:1/jwks.json?access_token=s3cret#top",
            "cannot fetch https://127.0.0.1:1/jwks.json: Connection refused",
            id="query-not-shown",
        ),
        # urllib took the password for a port: "nonnumeric port: 's3cret@127.0.0.1'", a
        # traceback (InvalidURL); with a number, it sent the credential to the host.
        pytest.param("https://k:s3cret@127.0.0.1/jwks", USERINFO, id="user-and-password"),
        pytest.param("https://k:1@127.0.0.1:1/jwks", USERINFO, id="numeric-password"),
        pytest.param("https://s3cret@127.0.0.1:1/jwks", USERINFO, id="user"),
        # http.client's InvalidURL (a traceback), quoting the URL.
        pytest.param("https://127.0.0.1:1/a b?s3cret", NOT_TEXT, id="space"),
        pytest.param("https://127.0.0.1:1/a\r\nX: s3cret", NOT_TEXT, id="control"),
        pytest.param("https://127.0.0.1:1/\u00e9", NOT_TEXT, id="not-ascii"),
        # Not "an https URL with a host": it names one, which IDNA refuses.
        pytest.param(
            "https://idp..example/jwks",
            "cannot fetch https://idp..example/jwks: its host is not a valid name",
            id="empty-label",
        ),
    ],
)
def test_an_unreachable_jwks_url_is_one_error(source: str, message: str) -> None:
    with pytest.raises(JwksError) as raised:
        KeySet(source)
    assert str(raised.value) == message


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_unknown_kid_reloads_the_file_at_most_once_per_interval(
    tmp_path: Path, idp: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    clock = Clock()
    keys = KeySet(str(path), clock=clock)
    verifier = JwtVerifier(keys, RULES)
    rotated = Issuer("rotated")
    token = rotated.sign(claims("alpha", "u1"))
    assert await verifier.verify_token(token) is None  # not published yet: reloaded, not found

    path.write_text(json.dumps(rotated.jwks()), encoding="utf-8")
    clock.now += MIN_REFRESH_SECONDS - 1
    assert await verifier.verify_token(token) is None  # too soon to reload again
    clock.now += 1
    assert await verifier.verify_token(token) is not None  # reloaded: the new key is there
    assert keys.get("idp-rs") is None  # and the retired one is gone

    path.write_text("{", encoding="utf-8")
    clock.now += MIN_REFRESH_SECONDS
    with caplog.at_level(logging.WARNING, logger="ticket_tools.serve.tokens"):
        assert await verifier.verify_token(idp.sign(claims("alpha", "u1"))) is None
    assert caplog.messages == [
        "JWKS reload failed, keeping the loaded keys: the JWKS is not valid JSON"
    ]
    assert await verifier.verify_token(token) is not None  # the loaded keys still serve


def test_a_reload_raced_by_another_request_is_skipped(
    tmp_path: Path, idp: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    keys = KeySet(str(path), clock=Clock())
    keys.refresh()
    loaded = keys.get("idp-rs")
    assert loaded is not None
    path.unlink()
    keys.refresh()  # within the interval: not even read, so the missing file is no error
    assert keys.get("idp-rs") is loaded
    assert caplog.records == []  # a reload that ran would have logged its failure


@pytest.fixture
def jwks_server(tmp_path: Path, idp: Issuer) -> Iterator[JwksHttpsServer]:
    """The provider's JWKS over TLS on loopback, its certificate trusted via SSL_CERT_FILE."""
    server = JwksHttpsServer(tmp_path / "tls", idp.jwks())
    yield server
    server.close()


def test_jwks_from_an_https_url(
    jwks_server: JwksHttpsServer, idp: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(jwks_server.cert_path))
    keys = KeySet(jwks_server.url, clock=Clock())
    assert keys.get("idp-ed") is not None
    assert jwks_server.hits == 1


def test_an_untrusted_certificate_is_refused(
    jwks_server: JwksHttpsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the self-signed certificate is unknown
    with pytest.raises(JwksError) as raised:
        KeySet(jwks_server.url)
    assert str(raised.value) == (
        f"cannot fetch {jwks_server.url}: its certificate is not trusted (self-signed certificate)"
    )


def test_a_jwks_url_answering_an_error_status_is_named_by_it(
    jwks_server: JwksHttpsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(jwks_server.cert_path))
    missing = jwks_server.url.replace("/jwks.json", "/missing.json")
    with pytest.raises(JwksError) as raised:
        KeySet(missing)
    assert str(raised.value) == f"cannot fetch {missing}: HTTP 404"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        # http.client's own exceptions, not OSErrors: a traceback at start-up, a 500 on reload.
        pytest.param(b"", "it closed the connection without an answer", id="no-answer"),
        pytest.param(b"SSH-2.0-OpenSSH_9.6\r\n", "its answer is not valid HTTP", id="status-line"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n{}",
            "its answer ended before the length it announced",
            id="cut-short",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\n" + b"X-Pad: y\r\n" * 101 + b"\r\n",
            "its answer is not valid HTTP",
            id="too-many-headers",
        ),
        # A redirect to plain http is not followed: the keys would travel unchecked.
        pytest.param(
            b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/jwks.json\r\n"
            b"Content-Length: 0\r\n\r\n",
            "HTTP 302",
            id="redirect-to-http",
        ),
    ],
)
def test_a_jwks_url_answering_what_is_not_http_is_one_error_and_a_failed_reload(
    jwks_server: JwksHttpsServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    answer: bytes,
    reason: str,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(jwks_server.cert_path))
    clock = Clock()
    keys = KeySet(jwks_server.url, clock=clock)
    loaded = keys.get("idp-ed")
    jwks_server.raw["/jwks.json"] = answer
    with caplog.at_level(logging.WARNING, logger="ticket_tools.serve.tokens"):
        keys.refresh()
    assert caplog.messages == [
        f"JWKS reload failed, keeping the loaded keys: cannot fetch {jwks_server.url}: {reason}"
    ]
    assert (loaded, keys.get("idp-ed")) == (keys.get("idp-ed"), loaded)
    assert loaded is not None
    with pytest.raises(JwksError) as raised:
        KeySet(jwks_server.url)
    assert str(raised.value) == f"cannot fetch {jwks_server.url}: {reason}"


def test_a_redirect_to_another_https_url_is_followed(
    jwks_server: JwksHttpsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(jwks_server.cert_path))
    moved = jwks_server.url.replace("/jwks.json", "/old.json")
    jwks_server.raw["/old.json"] = (
        f"HTTP/1.1 301 Moved\r\nLocation: {jwks_server.url}\r\nContent-Length: 0\r\n\r\n"
    ).encode()
    keys = KeySet(moved, clock=Clock())
    assert keys.get("idp-ed") is not None
    assert jwks_server.hits == 2
