"""librdkafka's partitioners: kproducer puts every key on the partition confluent-kafka puts it, on a real broker.

Both clients produce the same hypothesis-drawn keys to the same topic, confluent-kafka configured with
``partitioner=<name>`` and kproducer with ``partitioner.class=<name>``; the partitions their delivery
reports name (what the broker acknowledged) must agree key by key, and agree with
``for_key`` computed offline. A read-back with confluent-kafka's consumer checks what kproducer wrote.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproducer.librdkafka_partitioners import LIBRDKAFKA_PARTITIONERS
from kproducer.producer import Producer
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

PARTITION_COUNTS = (1, 2, 3, 5, 8, 13, 31)
HASHING = sorted(set(LIBRDKAFKA_PARTITIONERS) - {"random"})
_topic_ids = itertools.count()


class _Clients:
    """One confluent-kafka and one kproducer producer per partitioner, reused across examples."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._confluent: dict[str, Any] = {}
        self._kproducer: dict[str, Producer] = {}

    def confluent_partitions(self, name: str, topic: str, keys: list[bytes | None]) -> list[int]:
        from confluent_kafka import Producer as ConfluentProducer

        p = self._confluent.get(name)
        if p is None:
            p = self._confluent[name] = ConfluentProducer({"bootstrap.servers": self.bootstrap, "partitioner": name})
        out: list[int] = [-1] * len(keys)
        errors: list[Any] = []

        def report(i: int) -> Any:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(err)
                out[i] = msg.partition()

            return cb

        for i, key in enumerate(keys):
            p.produce(topic, b"v", key, on_delivery=report(i))
        assert p.flush(30) == 0
        assert not errors, errors
        return out

    def kproducer_partitions(self, name: str, topic: str, keys: list[bytes | None]) -> list[int]:
        p = self._kproducer.get(name)
        if p is None:
            p = self._kproducer[name] = Producer({"bootstrap.servers": self.bootstrap, "partitioner.class": name})
        futures = [p.send(topic, b"v", key) for key in keys]
        p.flush(30)
        return [f.result(0).partition for f in futures]

    def lane_calls(self, name: str) -> int | None:
        """Sends the C lane took for this partitioner's producer (None in the pure-Python pass)."""
        lane = self._kproducer[name]._lane
        if os.environ.get("KPRODUCER_PURE_PYTHON"):
            assert lane is None
            return None
        assert lane is not None, f"partitioner.class={name} should keep the C send lane"
        return int(lane.fast_calls)

    def close(self) -> None:
        for cp in self._confluent.values():
            cp.flush(10)
        for kp in self._kproducer.values():
            kp.close(10)


@pytest.fixture(scope="module")
def parity(tansu: TansuBroker) -> Iterator[tuple[_Clients, dict[int, str]]]:
    topics = {n: f"parity-{n}-{next(_topic_ids)}" for n in PARTITION_COUNTS}
    for n, topic in topics.items():
        create_topic(tansu.bootstrap, topic, n)
    clients = _Clients(tansu.bootstrap)
    try:
        yield clients, topics
    finally:
        clients.close()


@pytest.mark.parametrize("name", HASHING)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(st.one_of(st.binary(max_size=48), st.text(max_size=12).map(str.encode)), min_size=1, max_size=40),
    n=st.sampled_from(PARTITION_COUNTS),
)
def test_keys_land_where_confluent_kafka_puts_them(
    parity: tuple[_Clients, dict[int, str]], name: str, keys: list[bytes], n: int
) -> None:
    clients, topics = parity
    topic = topics[n]
    theirs = clients.confluent_partitions(name, topic, list(keys))
    ours = clients.kproducer_partitions(name, topic, list(keys))
    policy = LIBRDKAFKA_PARTITIONERS[name]()
    for key, their, our in zip(keys, theirs, ours, strict=True):
        assert 0 <= our < n
        if name == "consistent_random" and not key:
            continue  # an empty key is keyless for consistent_random: a sticky random partition in both
        assert our == their, f"key {key!r} on {n} partitions: confluent-kafka {their}, kproducer {our}"
        assert policy.for_key(key, n) == their


@pytest.mark.parametrize("name", HASHING)
def test_the_native_pass_computed_them_in_the_c_lane(parity: tuple[_Clients, dict[int, str]], name: str) -> None:
    # Runs after the parity examples above (same module fixture): in the native pass most of their
    # sends took the C lane, so its CRC32/FNV-1a/murmur2 rules were the ones compared; the pure pass
    # compared the Python classes.
    clients, topics = parity
    clients.kproducer_partitions(name, topics[5], [f"warm-{i}".encode() for i in range(50)])
    calls = clients.lane_calls(name)
    assert calls is None or calls > 0


@pytest.mark.parametrize("name", sorted(LIBRDKAFKA_PARTITIONERS))
def test_keyless_records_stick_like_librdkafka(parity: tuple[_Clients, dict[int, str]], name: str) -> None:
    # librdkafka sends keyless records to a sticky partition (random for 'random'); kproducer to KIP-794's.
    clients, topics = parity
    ours = clients.kproducer_partitions(name, topics[8], [None] * 50)
    assert all(0 <= p < 8 for p in ours)
    if name != "random":
        assert len(set(ours)) <= 2, f"{name}: keyless records should stick to a partition, got {sorted(set(ours))}"


def test_what_kproducer_wrote_reads_back_on_confluent_kafkas_partitions(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 6)
    keys = [f"customer-{i}".encode() for i in range(300)]
    with Producer({"bootstrap.servers": tansu.bootstrap, "partitioner.class": "consistent_random"}) as p:
        for key in keys:
            p.send(topic_name, b"x", key)
    from confluent_kafka import Producer as ConfluentProducer

    placed: dict[bytes, int] = {}
    create_topic(tansu.bootstrap, f"{topic_name}-ck", 6)
    cp = ConfluentProducer({"bootstrap.servers": tansu.bootstrap})  # librdkafka's default: consistent_random
    for key in keys:
        cp.produce(f"{topic_name}-ck", b"x", key, on_delivery=lambda err, msg: placed.__setitem__(msg.key(), msg.partition()))
    assert cp.flush(30) == 0
    records = read_topic(tansu.bootstrap, topic_name, len(keys), partitions=6)
    assert len(records) == len(keys)
    assert {r.key: r.partition for r in records} == placed
