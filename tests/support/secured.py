"""Secured test clusters: Tansu behind stunnel (TLS), the SASL front, or both, started by the tests.

The broker advertises the outermost port, so every connection a client opens (bootstrap and
leader) takes the secured path.
"""

from __future__ import annotations

import http.server
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from kproducer.embedded_broker import EmbeddedBroker, free_port, start_embedded_broker
from tests.support.sasl_front import SaslFront
from tests.support.tls import Certificates, Stunnel

__all__ = [
    "MECHANISMS",
    "PASSWORD",
    "SaslBroker",
    "TOKEN",
    "TlsBroker",
    "TokenEndpoint",
    "USER",
    "assert_refusal_warned_once",
]

USER, PASSWORD = "alice", "alice-s3cret"
TOKEN = "token-for-alice"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def assert_refusal_warned_once(records: list[logging.LogRecord], address: str, words: str) -> None:
    """A broker's refusal (TLS or SASL) is logged at WARNING once, with the broker's address and the cause.

    Once per outage, however many reconnect attempts fail the same way: the
    producer retries with backoff, and only the first refusal is news to an operator.
    """
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING and "refused this client" in r.getMessage()]
    assert warnings, "the first refusal must be logged at WARNING"
    assert address in warnings[0] and words in warnings[0], warnings[0]
    assert len(warnings) == 1, f"the same refusal was warned about more than once: {warnings}"


class TlsBroker:
    """Tansu behind stunnel, advertising the stunnel port."""

    def __init__(self, server_pem: Path, client_ca: Path | None = None) -> None:
        port = free_port()
        self.broker: EmbeddedBroker = start_embedded_broker(advertised_port=port, cluster_id="kproducer-tls")
        try:
            self.stunnel = Stunnel(self.broker.port, server_pem, port=port, client_ca=client_ca)
        except BaseException:
            self.broker.stop()
            raise

    @property
    def bootstrap(self) -> str:
        return self.stunnel.bootstrap

    def stop(self) -> None:
        self.stunnel.stop()
        self.broker.stop()

    def __enter__(self) -> TlsBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SaslBroker:
    """Tansu behind the SASL front (and stunnel when ``tls``), advertising the outermost port."""

    def __init__(
        self,
        certificates: Certificates | None = None,
        *,
        mechanisms: tuple[str, ...] = MECHANISMS,
        session_lifetime_ms: int = 0,
    ) -> None:
        outer = free_port()
        self.tls = certificates is not None
        self.broker: EmbeddedBroker = start_embedded_broker(advertised_port=outer, cluster_id="kproducer-sasl")
        self.stunnel: Stunnel | None = None
        try:
            self.front = SaslFront(
                self.broker.port,
                mechanisms=mechanisms,
                users={USER: PASSWORD},
                session_lifetime_ms=session_lifetime_ms,
                port=0 if self.tls else outer,
            )
            self.front.issue_token(TOKEN, USER, 3600)
            if certificates is not None:
                self.stunnel = Stunnel(self.front.port, certificates.server, port=outer)
        except BaseException:
            self.stop()
            raise
        self.bootstrap = f"127.0.0.1:{outer}"
        self.certificates = certificates

    @property
    def protocol(self) -> str:
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"

    def librdkafka(self, mechanism: str) -> dict[str, Any]:
        """confluent-kafka settings for the same path (the independent reader)."""
        conf: dict[str, Any] = {"security.protocol": self.protocol, "sasl.mechanism": mechanism}
        if mechanism == "OAUTHBEARER":
            conf["oauth_cb"] = lambda _cfg: (TOKEN, time.time() + 3600)
        else:
            conf.update({"sasl.username": USER, "sasl.password": PASSWORD})
        if self.certificates is not None:
            conf["ssl.ca.location"] = str(self.certificates.ca)
        return conf

    def kproducer(self, mechanism: str, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.protocol,
            "sasl.mechanism": mechanism,
            "max.block.ms": 20000,
        }
        if mechanism == "OAUTHBEARER":
            conf["sasl.oauthbearer.token.provider"] = lambda: (TOKEN, time.time() + 3600)
        else:
            conf.update({"sasl.username": USER, "sasl.password": PASSWORD})
        if self.certificates is not None:
            conf["ssl.truststore.location"] = str(self.certificates.ca)
        conf.update(extra)
        return conf

    def stop(self) -> None:
        if self.stunnel is not None:
            self.stunnel.stop()
        if getattr(self, "front", None) is not None:
            self.front.close()
        self.broker.stop()

    def __enter__(self) -> SaslBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TokenEndpoint:
    """An OAuth 2 token endpoint (client-credentials grant) on loopback, issuing tokens to the front."""

    def __init__(self, front: SaslFront, client_id: str, secret: str, lifetime_s: int = 3600) -> None:
        self.requests: list[dict[str, str]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                import base64
                import urllib.parse

                length = int(self.headers.get("Content-Length", 0))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                endpoint.requests.append(form)
                auth = self.headers.get("Authorization", "")
                expected = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
                if auth != expected or form.get("grant_type") != "client_credentials":
                    self.send_response(401)
                    self.end_headers()
                    self.wfile.write(b'{"error":"invalid_client"}')
                    return
                token = f"oidc-token-{len(endpoint.requests)}"
                front.issue_token(token, client_id, lifetime_s)
                body = json.dumps({"access_token": token, "token_type": "bearer", "expires_in": lifetime_s}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
