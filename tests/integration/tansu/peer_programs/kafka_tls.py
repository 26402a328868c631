"""kafka-python over TLS, both ways its documentation shows: ssl_cafile, and a ready ssl_context."""

from __future__ import annotations

import ssl
from typing import Any

from kafka import KafkaProducer


def main(bootstrap: str, topic: str, cafile: str) -> list[Any]:
    observed: list[Any] = []
    by_file = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=cafile)
    for i in range(5):
        md = by_file.send(topic, b"by-file-%d" % i, key=b"k%d" % (i % 3)).get(30)
        observed.append(("file", i, md.partition, md.offset))
    by_file.close()
    context = ssl.create_default_context(cafile=cafile)
    by_context = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
    for i in range(5):
        md = by_context.send(topic, b"by-context-%d" % i, key=b"k%d" % (i % 3)).get(30)
        observed.append(("context", i, md.partition, md.offset))
    by_context.close()
    return observed
