"""The run's identity provider: one RSA key, its JWKS file, and a token per client."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://idp.load.test/"
AUDIENCE = "https://tickets.load.test/mcp"
READ_SCOPE = "tickets:read"
KID = "load-rs256"
TOKEN_SECONDS = 3 * 3600  # longer than any run's budget


class Issuer:
    """Sign RS256 tokens as an identity provider would, and publish the public key."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def write_jwks(self, path: Path) -> None:
        """Write the public JWKS to `path`."""
        entry = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        path.write_text(json.dumps({"keys": [{**entry, "kid": KID, "alg": "RS256", "use": "sig"}]}))

    def token(self, tenant: str, subject: str, *, can_read: bool) -> str:
        """Return a token for `tenant`, with the read scope when `can_read`."""
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": subject,
            "iat": now,
            "exp": now + TOKEN_SECONDS,
            "tenant": tenant,
            "scope": f"openid {READ_SCOPE}" if can_read else "openid",
        }
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": KID})
