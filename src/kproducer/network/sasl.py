"""SASL mechanisms as sans-I/O authenticators, and where their credentials come from.

The connection's authenticating phase (``connection.KafkaConnection``) sends SaslHandshake, then
one SaslAuthenticate per token an authenticator gives, feeding each answer back to it:

* PLAIN (RFC 4616): one message, ``NUL user NUL password``.
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, KIP-84): client-first, server-first, client-final,
  server-final; the crypto is ``scramp``'s (its server side checks the proof and ours checks the
  server's signature, so a broker that does not know the password cannot pass either).
* OAUTHBEARER (RFC 7628, KIP-255): ``n,,\\x01auth=Bearer <token>\\x01\\x01``. A broker that refuses
  the token answers with an error document, to which the client sends a lone ``\\x01`` and then
  receives SASL_AUTHENTICATION_FAILED; the document is kept for the error message.

Credentials come from librdkafka-style keys (``sasl.username``/``sasl.password``) or from Java's
``sasl.jaas.config`` line, which Spark users pass as ``kafka.sasl.jaas.config``. Tokens for
OAUTHBEARER come from a provider the user gives, or from the built-in OAuth 2 client-credentials
flow (RFC 6749 section 4.4) against ``sasl.oauthbearer.token.endpoint.url``.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kproducer.errors import AuthenticationError, ConfigError

__all__ = [
    "OAuthToken",
    "SaslAuthenticator",
    "SaslSettings",
    "ClientCredentialsTokenProvider",
    "TokenCache",
    "make_authenticator",
]

logger = logging.getLogger(__name__)

class OAuthToken:
    """A bearer token and when it expires (seconds since the epoch); the token never shows in repr."""

    __slots__ = ("value", "expires_at", "principal", "extensions")

    def __init__(
        self,
        value: str,
        expires_at: float,
        principal: str | None = None,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        self.value = value
        expires_at = float(expires_at)
        # Milliseconds since the epoch (the MSK IAM signer's, Java's) are recognised: no date in
        # seconds is that large before the year 5000.
        self.expires_at = expires_at / 1000 if expires_at > 1e11 else expires_at
        self.principal = principal
        self.extensions = dict(extensions or {})

    def __repr__(self) -> str:
        return f"OAuthToken([hidden], expires_at={self.expires_at:.0f}, principal={self.principal!r})"


TokenProvider = Any  # a callable, or an object with a token() method


def _as_token(raw: Any, now_s: float) -> OAuthToken:
    """Accept the shapes token providers commonly return (see sasl.oauthbearer.token.provider)."""
    if isinstance(raw, OAuthToken):
        return raw
    if isinstance(raw, tuple) and len(raw) in (2, 3, 4) and isinstance(raw[0], str):
        # confluent-kafka's oauth_cb: (token, expiry seconds since the epoch[, principal, extensions])
        return OAuthToken(raw[0], float(raw[1]), *(raw[2:]))
    if isinstance(raw, Mapping):
        tok = raw.get("token", raw.get("access_token"))
        if isinstance(tok, str):
            if "expires_at" in raw:
                return OAuthToken(tok, float(raw["expires_at"]), raw.get("principal"))
            if "expires_in" in raw:
                return OAuthToken(tok, now_s + float(raw["expires_in"]), raw.get("principal"))
    value = getattr(raw, "token", None) or getattr(raw, "value", None)
    # azure.identity's AccessToken has expires_on; others expires_at / expiry (a datetime or seconds).
    expiry = getattr(raw, "expires_at", None) or getattr(raw, "expires_on", None) or getattr(raw, "expiry", None)
    if isinstance(value, str) and expiry is not None:
        if hasattr(expiry, "timestamp"):
            expiry = expiry.timestamp()
        return OAuthToken(value, float(expiry), getattr(raw, "principal", None))
    raise AuthenticationError(
        f"the OAUTHBEARER token provider returned {type(raw).__name__}; expected (token, expires_at), "
        "a dict with token and expires_at (or access_token and expires_in), or an object with "
        "token and expires_at"
    )


class TokenCache:
    """Calls the provider for a token and again when the refresh point of the cached one passes.

    The refresh point is ``sasl.login.refresh.buffer.seconds`` before expiry, but never earlier than
    80% of the token's life, so a short-lived token is not fetched on every connection.
    Thread-safe: one producer's I/O thread uses it, but the Spark sink shares providers.
    """

    def __init__(self, provider: TokenProvider, refresh_buffer_s: float = 300.0, clock_s: Callable[[], float] = time.time) -> None:
        self._provider = provider
        self._buffer = refresh_buffer_s
        self._clock = clock_s
        self._token: OAuthToken | None = None
        self._refresh_at = 0.0
        self._lock = threading.Lock()
        self.calls = 0

    def token(self) -> OAuthToken:
        with self._lock:
            now = self._clock()
            if self._token is not None and now < self._refresh_at:
                return self._token
            self.calls += 1
            try:
                fn = getattr(self._provider, "token", None)
                raw = fn() if callable(fn) else self._provider()
            except AuthenticationError:
                raise
            except Exception as e:
                raise AuthenticationError(
                    f"the OAUTHBEARER token provider raised {type(e).__name__}: {e}"
                ) from e
            tok = _as_token(raw, now)
            if tok.expires_at <= now:
                raise AuthenticationError(
                    f"the OAUTHBEARER token provider returned a token that expired "
                    f"{now - tok.expires_at:.0f}s ago"
                )
            life = tok.expires_at - now
            self._refresh_at = now + max(life - self._buffer, 0.8 * life)
            self._token = tok
            return tok


class ClientCredentialsTokenProvider:
    """The OAuth 2 client-credentials grant (RFC 6749 section 4.4), as Java's
    OAuthBearerLoginCallbackHandler with ``sasl.oauthbearer.token.endpoint.url`` does.

    POSTs ``grant_type=client_credentials`` (and ``scope``) with HTTP basic authentication of the
    client id and secret, and reads ``access_token`` and ``expires_in`` from the JSON answer.
    """

    def __init__(
        self, url: str, client_id: str, client_secret: str, scope: str | None = None, timeout_s: float = 10.0
    ) -> None:
        self.url = url
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"ClientCredentialsTokenProvider({self.url!r}, client_id={self.client_id!r})"

    def token(self) -> OAuthToken:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = base64.b64encode(
            f"{urllib.parse.quote(self.client_id)}:{urllib.parse.quote(self._secret)}".encode()
        ).decode()
        req = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = json.loads(resp.read().decode())
        except urllib.error.HTTPError as e:
            detail = e.read(500).decode(errors="replace")
            raise AuthenticationError(
                f"token endpoint {self.url} refused the client credentials of {self.client_id!r}: "
                f"HTTP {e.code} {detail}"
            ) from e
        except (OSError, ValueError) as e:
            raise AuthenticationError(f"token endpoint {self.url} failed: {e}") from e
        if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
            raise AuthenticationError(f"token endpoint {self.url} answered without an access_token")
        expires_in = float(body.get("expires_in", 3600))
        return OAuthToken(body["access_token"], time.time() + expires_in)


# ---------------------------------------------------------------------------- authenticators


class SaslAuthenticator(Protocol):
    """One SASL exchange, bytes in and out (see the module docstring)."""

    mechanism: str

    def first_message(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for the broker, or None when the exchange is complete."""
        ...

    def failure_detail(self) -> str: ...


class PlainAuthenticator:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\x00" + username.encode() + b"\x00" + password.encode()

    def __repr__(self) -> str:
        return "PlainAuthenticator([hidden])"

    def first_message(self) -> bytes:
        return self._token

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None

    def failure_detail(self) -> str:
        return ""


class ScramAuthenticator:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        import scramp

        self.mechanism = mechanism
        self._client = scramp.ScramClient([mechanism], username, password)
        self._step = 0

    def __repr__(self) -> str:
        return f"ScramAuthenticator({self.mechanism}, [hidden])"

    def first_message(self) -> bytes:
        self._step = 1
        first: str = self._client.get_client_first()
        return first.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        import scramp

        try:
            if self._step == 1:
                self._client.set_server_first(challenge.decode())
                self._step = 2
                final: str = self._client.get_client_final()
                return final.encode()
            if self._step == 2:
                self._client.set_server_final(challenge.decode())
                self._step = 3
                return None
        except (scramp.ScramException, UnicodeDecodeError) as e:
            raise AuthenticationError(f"{self.mechanism} exchange failed: {e}") from e
        raise AuthenticationError(f"{self.mechanism}: unexpected message after the exchange ended")

    def failure_detail(self) -> str:
        return ""


class OAuthBearerAuthenticator:
    mechanism = "OAUTHBEARER"

    def __init__(self, tokens: TokenCache) -> None:
        self._tokens = tokens
        self._sent = False
        self._error_document = ""

    def first_message(self) -> bytes:
        tok = self._tokens.token()
        ext = "".join(f"{k}={v}\x01" for k, v in sorted(tok.extensions.items()))
        self._sent = True
        return f"n,,\x01auth=Bearer {tok.value}\x01{ext}\x01".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None
        # RFC 7628 section 3.2.2: an error document; answer with a lone kvsep, the broker then fails us.
        self._error_document = challenge.decode(errors="replace")
        return b"\x01"

    def failure_detail(self) -> str:
        return self._error_document


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one producer authenticates with; ``make()`` builds a fresh authenticator per connection."""

    mechanism: str
    username: str | None = None
    password: Any = None  # a Password
    tokens: TokenCache | None = None

    def __repr__(self) -> str:
        return f"SaslSettings({self.mechanism}, username={self.username!r})"

    def make(self) -> SaslAuthenticator:
        return make_authenticator(self)


def make_authenticator(settings: SaslSettings) -> SaslAuthenticator:
    if settings.mechanism == "PLAIN":
        return PlainAuthenticator(settings.username or "", settings.password.value)
    if settings.mechanism.startswith("SCRAM-"):
        return ScramAuthenticator(settings.mechanism, settings.username or "", settings.password.value)
    if settings.mechanism == "OAUTHBEARER":
        assert settings.tokens is not None
        return OAuthBearerAuthenticator(settings.tokens)
    raise ConfigError(f"sasl.mechanism {settings.mechanism} is not supported")
