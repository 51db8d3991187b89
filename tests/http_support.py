"""Helpers of the HTTP tests alone: the tokens a server must refuse, and a JWKS endpoint.

The issuer, the claims of a valid token and the server launcher are shared with the
benchmarks and the load harness: testkit/tokens.py and testkit/server.py.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import http.server
import ipaddress
import json
import random
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from testkit.tokens import Issuer, claims
from ticket_tools.serve.tokens import LEEWAY_SECONDS, MAX_TOKEN_CHARS

TokenMaker = Callable[[Issuer, Issuer], str]
"""Make a token from the trusted provider and a stranger (same kids, other keys)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segments(header: dict[str, object], payload: dict[str, object]) -> str:
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"


def _segments_list() -> str:
    return _b64(json.dumps(["RS256"]).encode())


def hs256_with_public_key(idp: Issuer) -> str:
    """Sign as HS256 with the RSA public key's PEM as the secret: the classic confusion attack."""
    kid = idp.kid("RS256")
    pem = (
        idp.keys[kid][1]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_input = _segments({"alg": "HS256", "typ": "JWT", "kid": kid}, claims("alpha", "u1"))
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def payload_edited(idp: Issuer) -> str:
    """Take alpha's valid token and swap in a payload naming beta, keeping the signature."""
    header, _, signature = idp.sign(claims("alpha", "u1")).split(".")
    return f"{header}.{_b64(json.dumps(claims('beta', 'u1')).encode())}.{signature}"


def alg_none(idp: Issuer) -> str:
    """An unsigned token (alg none) naming a trusted kid."""
    return _segments({"alg": "none", "kid": idp.kid("RS256")}, claims("alpha", "u1")) + "."


def without(name: str) -> dict[str, object]:
    """Return valid alpha claims without `name`."""
    valid = claims("alpha", "u1")
    del valid[name]
    return valid


def _now() -> int:
    # Read when the token is made: a suite can run for minutes after this module loads.
    return int(time.time())


REFUSED: dict[str, TokenMaker] = {
    "expired": lambda idp, _: idp.sign(claims("alpha", "u1", exp=_now() - LEEWAY_SECONDS - 60)),
    "not-yet-valid": lambda idp, _: idp.sign(
        claims("alpha", "u1", nbf=_now() + LEEWAY_SECONDS + 60)
    ),
    "wrong-issuer": lambda idp, _: idp.sign(claims("alpha", "u1", iss="https://evil.example/")),
    "wrong-audience": lambda idp, _: idp.sign(claims("alpha", "u1", aud="https://other.example/")),
    "key-not-in-jwks": lambda _, other: jwt.encode(
        claims("alpha", "u1"),
        other.keys["idp-rs"][1],
        algorithm="RS256",
        headers={"kid": "other-rs"},
    ),
    "trusted-kid-other-key": lambda _, other: other.sign(claims("alpha", "u1")),
    "alg-none": lambda idp, _: alg_none(idp),
    "hs256-public-key-as-secret": lambda idp, _: hs256_with_public_key(idp),
    "payload-edited-after-signing": lambda idp, _: payload_edited(idp),
    "no-tenant-claim": lambda idp, _: idp.sign(without("tenant")),
    "tenant-not-a-string": lambda idp, _: idp.sign(claims(7, "u1")),
    "tenant-a-list": lambda idp, _: idp.sign(claims(["alpha"], "u1")),
    "tenant-empty": lambda idp, _: idp.sign(claims("", "u1")),
    "tenant-null": lambda idp, _: idp.sign(claims(None, "u1")),
    "no-subject": lambda idp, _: idp.sign(without("sub")),
    "empty-subject": lambda idp, _: idp.sign(claims("alpha", "")),
    "no-expiry": lambda idp, _: idp.sign(without("exp")),
    "no-audience": lambda idp, _: idp.sign(without("aud")),
    "es256-header-on-the-rsa-key": lambda idp, _: jwt.encode(
        claims("alpha", "u1"),
        idp.keys["idp-es"][1],
        algorithm="ES256",
        headers={"kid": "idp-rs"},
    ),
    "no-kid": lambda idp, _: jwt.encode(
        claims("alpha", "u1"), idp.keys["idp-rs"][1], algorithm="RS256"
    ),
    "kid-not-a-string": lambda idp, _: _segments({"alg": "RS256", "kid": 5}, claims("a", "u")),
    "not-a-jwt": lambda _, __: "not-a-jwt",
    "header-not-base64url": lambda idp, _: (
        "e30=." + idp.sign(claims("alpha", "u1")).split(".", 1)[1]
    ),
    "header-not-json": lambda idp, _: "eyJ." + idp.sign(claims("alpha", "u1")).split(".", 1)[1],
    "header-not-utf8": lambda idp, _: "_w." + idp.sign(claims("alpha", "u1")).split(".", 1)[1],
    "header-a-list": lambda idp, _: _segments_list() + ".x.y",
    "exp-a-numeric-string": lambda idp, _: idp.sign(claims("alpha", "u1", exp=str(_now() + 600))),
    "nbf-a-numeric-string": lambda idp, _: idp.sign(claims("alpha", "u1", nbf=str(_now() - 60))),
    "iat-a-numeric-string": lambda idp, _: idp.sign(claims("alpha", "u1", iat=str(_now()))),
    "iat-a-bool": lambda idp, _: idp.sign(claims("alpha", "u1", iat=True)),
    "over-the-length-limit": lambda idp, _: idp.sign(
        claims("alpha", "u1", padding="x" * MAX_TOKEN_CHARS)
    ),
}


PROTOCOL = "2025-11-25"


def post(
    url: str,
    body: bytes | Mapping[str, object] | list[object],
    bearer: str | None,
    headers: Mapping[str, str] | None = None,
    *,
    method: str = "POST",
) -> tuple[int, dict[str, str], bytes]:
    """Send `body` to the server as raw HTTP; return status, headers (lower-case) and body."""
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if bearer is not None:
        sent["Authorization"] = f"Bearer {bearer}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - loopback
        url, data=data, headers={**sent, **(headers or {})}, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            status, answer, got = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, answer, got = error.code, error.headers, error.read()
    return status, {k.lower(): v for k, v in answer.items()}, got


def rpc(method: str, params: dict[str, object], request_id: int = 1) -> dict[str, object]:
    """Return a JSON-RPC request."""
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


INITIALIZE = rpc(
    "initialize",
    {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
)


def open_session(url: str, bearer: str) -> str:
    """Initialize a session over raw HTTP; return its id."""
    status, headers, _ = post(url, INITIALIZE, bearer)
    assert status == 200
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    sid = headers["mcp-session-id"]
    assert post(url, initialized, bearer, {"Mcp-Session-Id": sid})[0] == 202
    return sid


class JwksHttpsServer:
    """An identity provider's JWKS endpoint over TLS on 127.0.0.1, with a self-signed certificate.

    `document` is served at /jwks.json and may be replaced at any time (a key rotation);
    `hits` counts the fetches. Clients trust it through `cert_path` (SSL_CERT_FILE). A path
    in `raw` is answered with those bytes as they are, then the connection is closed (b"":
    closed without an answer).
    """

    def __init__(self, folder: Path, document: object) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.document = document
        self.raw: dict[str, bytes] = {}
        self.hits = 0
        self.cert_path = folder / "cert.pem"
        key_path = folder / "key.pem"
        _write_self_signed(self.cert_path, key_path)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, key_path)
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                if self.path in owner.raw:
                    self.wfile.write(owner.raw[self.path])
                    self.close_connection = True
                    return
                body = json.dumps(owner.document).encode()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # keep the test output clean

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _write_self_signed(cert_path: Path, key_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def generated_calls(seed: int, count: int) -> list[tuple[str, dict[str, object]]]:
    """Return `count` varied calls, valid and not, the same for a seed every run."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not a secret
    ids = [f"TKT-{n}" for n in range(100, 117)]
    calls: list[tuple[str, dict[str, object]]] = []
    for _ in range(count):
        if rng.random() < 0.4:
            calls.append(("get_ticket", {"ticket_id": rng.choice([*ids, "tkt-104", "TKT-1"])}))
            continue
        args: dict[str, object] = {}
        for name, values in (
            ("status", ["open", "closed", "pending"]),
            ("query", ["login", "SETTINGS", "refund", "", "sso"]),
            ("limit", [1, 2, 5, 10, 11]),
            ("cursor", [*ids, "x"]),
        ):
            if rng.random() < 0.4:
                args[name] = rng.choice(values)
        calls.append(("search_tickets", args))
    return calls
