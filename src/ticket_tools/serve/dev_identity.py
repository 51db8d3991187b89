"""A local identity provider: signing keys, their JWKS, and tokens `serve http` accepts.

Needs the `mcp` extra (PyJWT with `cryptography`); every key, JWK and signature is theirs.
`ticket-tools dev-token` (cli/dev_token.py) writes one ES256 key, its JWKS and a token per
tenant, for trying and testing `serve http` on one's own machine; testkit's `Issuer`, the
identity provider of the tests, benchmarks and load harness, is made of the same pieces.

For local use only: such a key is made here and trusted by nothing but a server given its
JWKS, and its issuer (DEV_ISSUER) is a name that resolves nowhere.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from ticket_tools.serve.tokens import ALGORITHMS, READ_SCOPE, TENANT_CLAIM

DEV_ISSUER = "https://dev-token.ticket-tools.invalid/"
"""The `iss` of every dev token: `.invalid` (RFC 2606) never resolves, so no host that
follows the issuer to sign a user in can mistake it for a real provider."""
DEV_ALGORITHM = "ES256"  # a small key, made at once, and a short token
DEV_SUBJECT = "dev-user"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def new_key(alg: str) -> PrivateKey:
    """Return a new private key for `alg`: RS256, ES256 or EdDSA (tokens.ALGORITHMS)."""
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"not one of {', '.join(ALGORITHMS)}")


def public_jwk(key: PrivateKey, kid: str, alg: str) -> dict[str, Any]:
    """Return the public half of `key` as the JWKS entry a provider publishes for it."""
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        entry = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        entry = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        entry = OKPAlgorithm.to_jwk(public, as_dict=True)
    return {**entry, "kid": kid, "alg": alg, "use": "sig"}


def sign(
    claims: Mapping[str, object],
    key: PrivateKey,
    *,
    kid: str,
    alg: str,
    headers: Mapping[str, object] | None = None,
) -> str:
    """Return a compact JWT of `claims`, signed with `key`, its header naming `kid`."""
    return jwt.encode(dict(claims), key, algorithm=alg, headers={"kid": kid, **(headers or {})})


@dataclass(frozen=True)
class DevIdentity:
    """One signing key of a local identity, with the tokens it signs."""

    key: PrivateKey
    kid: str

    @classmethod
    def new(cls) -> DevIdentity:
        """Make a new ES256 key, with a `kid` of its own (a server reloads its JWKS for it)."""
        return cls(new_key(DEV_ALGORITHM), f"dev-{secrets.token_hex(8)}")

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        """Return the JWKS `serve http --jwks` reads: this key's public half alone."""
        return {"keys": [public_jwk(self.key, self.kid, DEV_ALGORITHM)]}

    def private_pem(self) -> bytes:
        """Return the private key as unencrypted PKCS #8 PEM."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def token(
        self,
        tenant: str,
        audience: str,
        *,
        now: int,
        seconds: int,
        subject: str = DEV_SUBJECT,
        can_read: bool = True,
    ) -> str:
        """Return a token for `tenant` and `audience`, valid `seconds` from `now`.

        `serve http --issuer DEV_ISSUER --audience AUDIENCE` with the default tenant claim
        and read scope accepts it; it holds the read scope when `can_read`.
        """
        claims: dict[str, object] = {
            "iss": DEV_ISSUER,
            "aud": audience,
            "sub": subject,
            TENANT_CLAIM: tenant,
            "iat": now,
            "exp": now + seconds,
        }
        if can_read:
            claims["scope"] = READ_SCOPE
        return sign(claims, self.key, kid=self.kid, alg=DEV_ALGORITHM)
