"""The one identity provider of the tests, the benchmarks and the load harness.

`Issuer` makes a key pair per algorithm, publishes their JWKS and signs tokens with them,
as an identity provider would; `claims` are those of a valid token for a tenant. The keys,
JWKS entries and signatures are the product's own (`ticket_tools.serve.dev_identity`, what
`ticket-tools dev-token` uses), so there is one of each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ticket_tools.serve.dev_identity import PrivateKey, new_key, public_jwk, sign
from ticket_tools.serve.tokens import READ_SCOPE

ISSUER = "https://idp.example.test/"
AUDIENCE = "https://tickets.example.test/mcp"
READ = READ_SCOPE
TOKEN_SECONDS = 3600


class Issuer:
    """An identity provider: one key per algorithm, its JWKS, and tokens signed with them."""

    def __init__(self, prefix: str = "k") -> None:
        self.keys: dict[str, tuple[str, PrivateKey]] = {
            f"{prefix}-{suffix}": (alg, new_key(alg))
            for suffix, alg in (("rs", "RS256"), ("es", "ES256"), ("ed", "EdDSA"))
        }

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        """Return the public JWKS, as the provider publishes it."""
        return {"keys": [public_jwk(key, kid, alg) for kid, (alg, key) in self.keys.items()]}

    def write_jwks(self, path: Path) -> Path:
        """Write the public JWKS to `path` (what `serve --http --jwks PATH` reads); return it."""
        path.write_text(json.dumps(self.jwks()), encoding="utf-8")
        return path

    def kid(self, alg: str = "RS256") -> str:
        """Return the kid of this issuer's key for `alg`."""
        return next(kid for kid, (key_alg, _) in self.keys.items() if key_alg == alg)

    def sign(
        self,
        claims: Mapping[str, object],
        *,
        alg: str = "RS256",
        headers: Mapping[str, object] | None = None,
    ) -> str:
        """Return a JWT of `claims` signed with this issuer's key for `alg`."""
        kid = self.kid(alg)
        return sign(claims, self.keys[kid][1], kid=kid, alg=alg, headers=headers)

    def token(
        self, tenant: str, subject: str, *, can_read: bool = True, seconds: int = TOKEN_SECONDS
    ) -> str:
        """Return a valid RS256 token for `tenant`, with the read scope when `can_read`."""
        scope = f"openid {READ}" if can_read else "openid"
        return self.sign(claims(tenant, subject, scope=scope, exp=int(time.time()) + seconds))


def claims(tenant: object, subject: str, **extra: object) -> dict[str, object]:
    """Return the claims of a valid token for `tenant`, with the read scope unless replaced."""
    now = int(time.time())
    base: dict[str, object] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": subject,
        "iat": now,
        "exp": now + TOKEN_SECONDS,
        "tenant": tenant,
        "scope": f"openid {READ}",
    }
    return {**base, **extra}
