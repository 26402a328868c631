"""The one Tansu starter (kproducer.embedded_broker), as the tests, examples and benchmarks use it."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from kproducer.embedded_broker import EmbeddedBroker, free_port, start_embedded_broker
from tests.support import tansu as support


def test_tests_support_is_the_library_starter() -> None:
    assert support.TansuBroker is EmbeddedBroker
    assert support.start_tansu is start_embedded_broker


def test_advertised_port_is_what_metadata_names() -> None:
    adv = free_port()
    with start_embedded_broker(advertised_port=adv) as broker:
        assert broker.advertised_port == adv and broker.port != adv
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        ports = {b.port for b in md.brokers.values()}
        assert ports == {adv}, (ports, broker.log()[-2000:])
    assert broker.process.poll() is not None, "the context manager should stop the broker"


def test_default_advertises_its_own_port(tansu: EmbeddedBroker) -> None:
    assert tansu.advertised_port == tansu.port
    md = AdminClient({"bootstrap.servers": tansu.bootstrap}).list_topics(timeout=10)
    assert {b.port for b in md.brokers.values()} == {tansu.port}
