"""Every ``# example:`` block of docs/security.md runs against a real secured cluster and delivers a record."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.secured import PASSWORD, TOKEN, USER, SaslBroker, TlsBroker, TokenEndpoint
from tests.support.tls import Certificates

DOC = REPO_ROOT / "docs" / "security.md"
_BLOCK = re.compile(r"```python\n# example: (?P<name>[\w-]+)\n(?P<code>.*?)```", re.DOTALL)


def _examples() -> dict[str, str]:
    return {m.group("name"): m.group("code") for m in _BLOCK.finditer(DOC.read_text())}


def test_the_page_has_the_examples() -> None:
    assert set(_examples()) == {"tls", "mtls", "scram", "jaas", "oauth-provider", "oidc"}


@pytest.fixture(scope="module")
def clusters(certificates: Certificates) -> Iterator[dict[str, Any]]:
    started: list[Any] = []
    try:
        started.append(TlsBroker(certificates.server))
        started.append(TlsBroker(certificates.server, client_ca=certificates.ca))
        started.append(SaslBroker(certificates))
        yield {"tls": started[0], "mtls": started[1], "sasl": started[2]}
    finally:
        for b in started:
            b.stop()


@pytest.mark.parametrize("name", ["tls", "mtls", "scram", "jaas", "oauth-provider", "oidc"])
def test_example_delivers(name: str, clusters: dict[str, Any], certificates: Certificates, topic_name: str) -> None:
    cluster = clusters.get(name, clusters["sasl"])
    endpoint = TokenEndpoint(clusters["sasl"].front, "my-app", "my-app-secret") if name == "oidc" else None
    namespace: dict[str, Any] = {
        "BOOTSTRAP": cluster.bootstrap,
        "CA_FILE": str(certificates.ca),
        "CLIENT_CERT": str(certificates.client_cert),
        "CLIENT_KEY": str(certificates.client_key),
        "USER": USER,
        "PASSWORD": PASSWORD,
        "TOKEN_URL": endpoint.url if endpoint else "",
        "fetch_token_somehow": lambda: (TOKEN, time.time() + 3600),
    }
    try:
        exec(compile(_examples()[name], f"docs/security.md:{name}", "exec"), namespace)
        producer = namespace["producer"]
        try:
            metadata = producer.send(topic_name, b"from the docs").result(30)
            assert metadata.offset >= 0
        finally:
            producer.close()
    finally:
        if endpoint is not None:
            endpoint.close()
