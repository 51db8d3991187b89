"""The local identity provider: its keys, JWKS and tokens, checked by the server's own verifier."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from ticket_tools.serve.dev_identity import DEV_ISSUER, DevIdentity, new_key, public_jwk
from ticket_tools.serve.tokens import JwtVerifier, KeySet, TokenRules, context_from_token

pytestmark = pytest.mark.anyio
AUDIENCE = "http://127.0.0.1:8765/mcp"


@pytest.mark.parametrize(
    ("alg", "kind", "members"),
    [
        pytest.param("RS256", rsa.RSAPrivateKey, ["alg", "e", "key_ops", "kid", "kty", "n", "use"]),
        pytest.param(
            "ES256", ec.EllipticCurvePrivateKey, ["alg", "crv", "kid", "kty", "use", "x", "y"]
        ),
        pytest.param("EdDSA", ed25519.Ed25519PrivateKey, ["alg", "crv", "kid", "kty", "use", "x"]),
    ],
)
def test_a_key_per_algorithm_and_its_public_jwk(alg: str, kind: type, members: list[str]) -> None:
    key = new_key(alg)
    entry = public_jwk(key, "k1", alg)
    assert (isinstance(key, kind), sorted(entry), entry["kid"], entry["alg"]) == (
        True,
        members,
        "k1",
        alg,
    )


def test_an_algorithm_the_server_refuses_is_no_key() -> None:
    with pytest.raises(ValueError, match=r"^not one of RS256, ES256, EdDSA$"):
        new_key("HS256")


@pytest.fixture
def identity() -> DevIdentity:
    return DevIdentity.new()


@pytest.fixture
def verifier(identity: DevIdentity, tmp_path: Path) -> JwtVerifier:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(identity.jwks()), encoding="utf-8")
    return JwtVerifier(KeySet(str(jwks)), TokenRules(DEV_ISSUER, AUDIENCE))


@pytest.mark.parametrize(
    ("can_read", "context"),
    [
        pytest.param(True, {"tenant": "alpha", "can_read_tickets": True}, id="reads"),
        pytest.param(False, {"tenant": "alpha", "can_read_tickets": False}, id="no-read"),
    ],
)
async def test_the_server_accepts_its_tokens_for_their_tenant(
    identity: DevIdentity, verifier: JwtVerifier, can_read: bool, context: dict[str, object]
) -> None:
    token = identity.token("alpha", AUDIENCE, now=int(time.time()), seconds=60, can_read=can_read)
    access = await verifier.verify_token(token)
    assert access is not None
    assert (access.subject, context_from_token(access, TokenRules(DEV_ISSUER, AUDIENCE))) == (
        "dev-user",
        context,
    )


@pytest.mark.parametrize(
    ("audience", "now", "other_key"),
    [
        pytest.param("http://127.0.0.1:9999/mcp", 0, False, id="another-audience"),
        pytest.param(AUDIENCE, -3600, False, id="expired"),
        pytest.param(AUDIENCE, 0, True, id="another-identity"),
    ],
)
async def test_the_server_refuses_its_tokens_elsewhere_or_later(
    identity: DevIdentity, verifier: JwtVerifier, audience: str, now: int, other_key: bool
) -> None:
    signer = DevIdentity.new() if other_key else identity
    token = signer.token("alpha", audience, now=int(time.time()) + now, seconds=60)
    assert await verifier.verify_token(token) is None


def test_the_private_key_is_unencrypted_pkcs8(identity: DevIdentity) -> None:
    pem = identity.private_pem().decode()
    assert (pem.splitlines()[0], pem.splitlines()[-1]) == (
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
    )
