"""Bearer-token verification for the HTTP server: signed JWTs checked against an IdP's JWKS.

Needs the `mcp` extra (PyJWT with `cryptography` comes with it). A token is accepted only
if all of these hold; otherwise `verify_token` returns None and the SDK answers 401:

- it is at most MAX_TOKEN_CHARS long (checked before anything else is read);
- its header names an allowed asymmetric algorithm (RS256, ES256, EdDSA) and a `kid`
  found in the JWKS, and the key's own algorithm is that one (so `none`, HS256 with the
  public key as the secret, or an ES256 header on an RSA key are all refused);
- the signature verifies; `iss` equals the issuer, `aud` holds the audience; `exp` is in
  the future and `nbf` (if present) in the past, each within LEEWAY_SECONDS; `exp`, `nbf`
  and `iat` are JSON numbers (RFC 7519 §2 NumericDate: PyJWT also takes "1767225600");
- `sub` is a non-empty string (sessions are bound to it) and the tenant claim is a
  non-empty string.

The trusted context of a call is then `context_from_token`: nothing but the token.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio.to_thread
import jwt
from mcp.server.auth.provider import AccessToken

from ticket_tools.cli.inputs import os_reason
from ticket_tools.execute import Context

ALGORITHMS = ("RS256", "ES256", "EdDSA")
"""Asymmetric only: a verifier holding just public keys can never be tricked into HMAC."""
TENANT_CLAIM = "tenant"
"""The claim naming the tenant unless `--tenant-claim` says another."""
READ_SCOPE = "tickets:read"
"""The scope that grants reading tickets unless `--read-scope` says another."""
LEEWAY_SECONDS = 30  # clock skew between the IdP and this server
MIN_REFRESH_SECONDS = 30.0
"""An unknown `kid` reloads the JWKS at most this often, so made-up kids cannot flood the IdP."""
JWKS_TIMEOUT_SECONDS = 10.0
MAX_JWKS_BYTES = 1 << 20  # a real JWKS is a few KB; more is a misconfiguration
REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]
TIME_CLAIMS = ("exp", "nbf", "iat")
MAX_TOKEN_CHARS = 8192
"""An IdP's access token is 1-4 KB (Entra ID caps its group claims so a token stays under
nginx's 8 KiB header line); a longer one is refused unread, so a 1 MB one costs nothing."""

logger = logging.getLogger(__name__)


class JwksError(Exception):
    """The JWKS cannot be read, or holds no usable key; the message never holds key material."""


@dataclass(frozen=True)
class TokenRules:
    """What this server expects of every token, from the command line."""

    issuer: str
    """The `iss` every token must carry, exactly."""
    audience: str
    """A value `aud` must equal (or hold, when it is a list)."""
    tenant_claim: str = TENANT_CLAIM
    """The claim whose value is the tenant: a non-empty string."""
    read_scope: str = READ_SCOPE
    """The scope that grants `can_read_tickets`, in `scope` (space-separated) or `scp` (list)."""


class KeySet:
    """The IdP's signing keys by `kid`, loaded from a JWKS file or https URL.

    `refresh` reloads them (when a token names an unknown `kid`, the IdP may have rotated
    its keys); a failed reload keeps the keys already loaded.
    """

    def __init__(self, source: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        if source.startswith("http://"):
            raise JwksError("a JWKS URL must use https")
        self._source = source
        self._shown = _shown_url(source) if source.startswith("https://") else source
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, jwt.PyJWK] = self._load()
        # The first reload may come at once: the IdP may rotate right after we start.
        self._reloaded_at: float | None = None

    def get(self, kid: str) -> jwt.PyJWK | None:
        """Return the loaded key with this `kid`, or None."""
        return self._keys.get(kid)

    def may_refresh(self) -> bool:
        """Say whether a reload is allowed now (at most one per MIN_REFRESH_SECONDS)."""
        last = self._reloaded_at
        return last is None or self._clock() - last >= MIN_REFRESH_SECONDS

    def refresh(self) -> None:
        """Reload the keys if allowed now; on failure keep the old ones and log why."""
        with self._lock:
            if not self.may_refresh():
                return  # another request reloaded them meanwhile
            self._reloaded_at = self._clock()
            try:
                self._keys = self._load()
            except JwksError as error:
                logger.warning("JWKS reload failed, keeping the loaded keys: %s", error)

    def _load(self) -> dict[str, jwt.PyJWK]:
        document = _parse_jwks(self._read())
        keys: dict[str, jwt.PyJWK] = {}
        for entry in document:
            key = _usable_key(entry)
            if key is not None:
                keys[entry["kid"]] = key
        if not keys:
            raise JwksError(f"{self._shown} holds no usable signing key ({', '.join(ALGORITHMS)})")
        return keys

    def _read(self) -> bytes:
        if not self._source.startswith("https://"):
            try:
                return Path(self._source).read_bytes()
            except OSError as error:
                raise JwksError(f"cannot read {self._source}: {os_reason(error)}") from None
        try:
            request = urllib.request.Request(  # noqa: S310 - https only, checked above
                self._source, headers={"Accept": "application/json"}
            )
            with _OPENER.open(request, timeout=JWKS_TIMEOUT_SECONDS) as response:
                body: bytes = response.read(MAX_JWKS_BYTES + 1)
        except (OSError, ValueError, http.client.HTTPException) as error:
            # URLError and HTTPError are OSErrors; a malformed URL is a ValueError; an answer
            # that is not HTTP (a bad status line, a body cut short) is an HTTPException. The
            # server's certificate is checked against the system CAs (or SSL_CERT_FILE).
            raise JwksError(f"cannot fetch {self._shown}: {_fetch_reason(error)}") from None
        return body


def _shown_url(source: str) -> str:
    """Return an https JWKS URL as it may be shown: its scheme, host, port and path only.

    A query may carry a credential (`?access_token=...`), so it is sent but never shown;
    a user and password are refused (urllib would take them for part of the host, and a
    provider publishes its keys to anyone). `https://idp.example:8443/jwks?key=k#top`
    is shown as `https://idp.example:8443/jwks`.
    """
    if re.fullmatch("[!-~]+", source) is None:
        raise JwksError("a JWKS URL must be ASCII text without spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(source)
        port = parts.port  # a ValueError for a port that is not a number from 0 to 65535
    except ValueError:
        port = -1
    if port == -1 or not parts.hostname:
        raise JwksError("a JWKS URL must name a host (and a port from 0 to 65535, if any)")
    if "@" in parts.netloc:
        raise JwksError("a JWKS URL must not hold a user name or password")
    return f"https://{parts.netloc}{parts.path}"


class _HttpsRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to another https URL: the keys never travel in plain text."""

    def redirect_request(  # noqa: PLR0917 - urllib's own signature
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        """Return the redirected request, or None (the 3xx is then an error) if not https."""
        if not newurl.startswith("https://"):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpsRedirects)


def _fetch_reason(error: OSError | ValueError | http.client.HTTPException) -> str:
    """Say why a JWKS URL could not be fetched: the status, the certificate, the system's reason.

    Never urllib's own message, which can quote the URL it was given.
    """
    if isinstance(error, urllib.error.HTTPError):
        error.close()  # it holds the response, and with it the connection
        return f"HTTP {error.code}"
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, http.client.RemoteDisconnected):
        return "it closed the connection without an answer"
    if isinstance(reason, http.client.IncompleteRead):
        return "its answer ended before the length it announced"
    if isinstance(reason, http.client.HTTPException):
        return "its answer is not valid HTTP"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted ({reason.verify_message})"
    if isinstance(reason, OSError):
        return os_reason(reason)
    return "its host is not a valid name"  # IDNA refuses it (an empty label: a..b)


def _parse_jwks(body: bytes) -> list[Any]:
    if len(body) > MAX_JWKS_BYTES:
        raise JwksError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise JwksError("the JWKS is not valid JSON") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise JwksError('the JWKS is not a JSON object with a "keys" list')
    return keys


def _usable_key(entry: object) -> jwt.PyJWK | None:
    """Return the entry as a verification key, or None for anything this server does not use."""
    if not isinstance(entry, dict) or type(entry.get("kid")) is not str:
        return None
    # "d" is private key material: a JWKS publishes public keys only.
    if entry.get("use", "sig") != "sig" or "d" in entry:
        return None
    try:
        key = jwt.PyJWK(entry)
    except jwt.PyJWTError:
        return None
    return key if key.algorithm_name in ALGORITHMS else None


class JwtVerifier:
    """The SDK's token-verifier hook: a verified token becomes an `AccessToken`, else None."""

    def __init__(self, keys: KeySet, rules: TokenRules) -> None:
        self._keys = keys
        self._rules = rules

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's access info if every check holds, else None."""
        if len(token) > MAX_TOKEN_CHARS:
            return None
        header = _unverified_header(token)
        if header is None:
            return None
        kid = header.get("kid")
        if header.get("alg") not in ALGORITHMS or type(kid) is not str:
            return None
        key = self._keys.get(kid)
        if key is None and self._keys.may_refresh():
            await anyio.to_thread.run_sync(self._keys.refresh)
            key = self._keys.get(kid)
        if key is None:
            return None
        return self._access_token(token, key)

    def _access_token(self, token: str, key: jwt.PyJWK) -> AccessToken | None:
        rules = self._rules
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                audience=rules.audience,
                issuer=rules.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.PyJWTError:
            return None
        subject = claims["sub"]
        tenant = claims.get(rules.tenant_claim)
        if not _non_empty_str(subject) or not _non_empty_str(tenant):
            return None
        if not all(_numeric_date(claims.get(name, 0)) for name in TIME_CLAIMS):
            return None
        client_id = next(
            (claims[name] for name in ("client_id", "azp") if _non_empty_str(claims.get(name))),
            subject,
        )
        return AccessToken(
            token=token,
            client_id=client_id,
            scopes=_scopes(claims),
            # The SDK refuses a token past this time; the leeway is already granted above.
            expires_at=int(claims["exp"]) + LEEWAY_SECONDS,
            resource=rules.audience,
            subject=subject,
            claims=claims,
        )


def _unverified_header(token: str) -> dict[str, Any] | None:
    """Return a compact JWT's header, only to choose the key; None if it is not one.

    Read here rather than with jwt.get_unverified_header, which decodes (and checks the
    alphabet of) the whole token, only for jwt.decode to do it all again.
    """
    segment = token.split(".", 1)[0]
    if re.fullmatch("[A-Za-z0-9_-]+", segment) is None:
        return None
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, RecursionError):
        # binascii.Error and UnicodeDecodeError are ValueErrors.
        return None
    return header if isinstance(header, dict) else None


def context_from_token(token: AccessToken | None, rules: TokenRules) -> Context:
    """Return the trusted context a verified token grants; without a token, one that reads nothing.

    {"sub": "u1", "tenant": "alpha", "scope": "openid tickets:read"} with the default rules
    gives {"tenant": "alpha", "can_read_tickets": True}.
    """
    if token is None:
        return {"tenant": None, "can_read_tickets": False}
    tenant = (token.claims or {}).get(rules.tenant_claim)
    return {"tenant": tenant, "can_read_tickets": rules.read_scope in token.scopes}


def _scopes(claims: dict[str, Any]) -> list[str]:
    """Return the scopes of `scope` (a space-separated string) and `scp` (a list of strings)."""
    scopes: list[str] = []
    scope = claims.get("scope")
    if isinstance(scope, str):
        scopes.extend(scope.split(" "))
    scp = claims.get("scp")
    if isinstance(scp, list):
        scopes.extend(item for item in scp if isinstance(item, str))
    return [scope for scope in scopes if scope]


def _non_empty_str(value: object) -> bool:
    return type(value) is str and value != ""


def _numeric_date(value: object) -> bool:
    # PyJWT has compared int(value) already, so a float here is finite.
    return type(value) in (int, float)
