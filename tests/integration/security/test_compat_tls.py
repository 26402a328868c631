"""The aiokafka and kafka-python adapters over TLS (stunnel in front of Tansu): a program's own ssl_context
(or kafka-python's ssl_cafile) works with only the import switched, and writes what the peer writes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.peer_programs import load
from tests.support.readback import read_topic
from tests.support.secured import TlsBroker
from tests.support.tls import Certificates

_ids = itertools.count()


@pytest.fixture(scope="module")
def tls_broker(certificates: Certificates) -> Iterator[TlsBroker]:
    with TlsBroker(certificates.server) as b:
        yield b


def _read(broker: TlsBroker, certificates: Certificates, topic: str, n: int) -> list[tuple[Any, ...]]:
    back = read_topic(
        broker.bootstrap, topic, n, security={"security.protocol": "SSL", "ssl.ca.location": str(certificates.ca)}
    )
    return [(r.partition, r.offset, r.key, r.value) for r in back]


@pytest.mark.parametrize("peer", ["aiokafka", "kafka"])
def test_tls_program_on_the_peer_and_on_the_adapter(
    peer: str, tls_broker: TlsBroker, certificates: Certificates
) -> None:
    runs = []
    for switched in (False, True):
        topic = f"compat-tls-{peer}-{'kproducer' if switched else 'peer'}-{next(_ids)}"
        program = load(f"{peer}_tls", peer, switched=switched)
        result = program.main(tls_broker.bootstrap, topic, str(certificates.ca))
        observed = asyncio.run(result) if asyncio.iscoroutine(result) else result
        runs.append((observed, _read(tls_broker, certificates, topic, len(observed))))
    assert runs[1] == runs[0]
    assert len(runs[1][1]) == 10


def test_ssl_context_key_is_used_as_given(tls_broker: TlsBroker, certificates: Certificates) -> None:
    import ssl

    from kproducer import Producer

    topic = f"compat-tls-ssl-context-{next(_ids)}"
    context = ssl.create_default_context(cafile=str(certificates.ca))
    with Producer(
        {"bootstrap.servers": tls_broker.bootstrap, "security.protocol": "SSL", "ssl.context": context}
    ) as p:
        metas = [p.send(topic, b"v%d" % i, key=b"k").result(30) for i in range(3)]
    assert _read(tls_broker, certificates, topic, 3) == [(m.partition, m.offset, b"k", b"v%d" % i) for i, m in enumerate(metas)]


def test_ssl_context_refuses_what_it_would_silently_override(certificates: Certificates) -> None:
    import ssl

    from kproducer import Producer
    from kproducer.errors import ConfigError

    base = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL"}
    with pytest.raises(ConfigError, match="ssl.truststore.location would have no effect"):
        Producer({**base, "ssl.context": ssl.create_default_context(), "ssl.truststore.location": str(certificates.ca)})
    with pytest.raises(ConfigError, match="ssl.context must be an ssl.SSLContext, got dict"):
        Producer({**base, "ssl.context": {}})
