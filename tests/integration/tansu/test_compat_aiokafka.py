"""kproducer.compat.aiokafka against aiokafka itself, on Tansu: the same programs, once on aiokafka and once
with only their imports switched (tests/support/peer_programs.py), write the same records to the same
partitions in the same order (read back by confluent-kafka) and observe the same things.

Tansu answers InitProducerId only from version 3 on; aiokafka sends an older version, so an aiokafka
transactional producer cannot start against Tansu. The transactional program therefore runs on the
adapter only, and the test checks that aiokafka still fails there (so that the comparison is added
when it no longer does).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from kproducer.compat.aiokafka import AIOKafkaProducer
from kproducer.compat.aiokafka import errors as compat_errors
from kproducer.errors import RecordTooLargeError
from tests.support.peer_programs import load
from tests.support.readback import ConsumedRecord, create_topic, read_topic
from tests.support.tansu import TansuBroker

_ids = itertools.count()


def _records(records: list[ConsumedRecord]) -> list[tuple[Any, ...]]:
    """What two runs must share: partition, offset, key, value, headers (not topic or timestamp)."""
    return [(r.partition, r.offset, r.key, r.value, r.headers) for r in records]


def _run_both(tansu: TansuBroker, name: str, partitions: int, expected: int) -> tuple[Any, Any, Any, Any]:
    """Run program ``name`` on aiokafka, then on the adapter, each on a fresh topic; their observations and records."""
    out = []
    for switched in (False, True):
        topic = f"compat-aiokafka-{name}-{'kproducer' if switched else 'aiokafka'}-{next(_ids)}"
        create_topic(tansu.bootstrap, topic, partitions)
        program = load(name, "aiokafka", switched=switched)
        observed = asyncio.run(program.main(tansu.bootstrap, topic))
        out.append((observed, _records(read_topic(tansu.bootstrap, topic, expected, partitions=partitions))))
    (peer_obs, peer_records), (ours_obs, ours_records) = out
    return peer_obs, ours_obs, peer_records, ours_records


def test_send_program_same_records_same_partitions_same_observations(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "aiokafka_send", 3, 62)
    assert ours_records == peer_records
    assert ours_obs == peer_obs
    # The keys spread over the partitions (the comparison is not of one partition only).
    assert {r[0] for r in ours_records} == {0, 1, 2}
    assert (next(r for r in ours_records if r[2] == b"user-3" and r[3] == b"null")) is not None


def test_batch_program_fills_and_places_batches_as_aiokafka(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "aiokafka_batch", 2, 300)
    assert ours_obs == peer_obs
    assert ours_records == peer_records
    batches = [o for o in ours_obs if o[0] in ("batch", "last batch")]
    assert len(batches) > 3 and {b[2] for b in batches} == {0, 1}


def test_too_large_raises_aiokafkas_exception(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "aiokafka_errors", 1, 2)
    assert ours_obs == peer_obs
    assert ours_obs[0] == ("send_and_wait", "MessageSizeTooLargeError", 10, True, False)
    assert ours_records == peer_records


def test_transaction_program_on_the_adapter(tansu: TansuBroker) -> None:
    topic = f"compat-aiokafka-txn-{next(_ids)}"
    create_topic(tansu.bootstrap, topic, 2)
    # aiokafka itself: its InitProducerId version is one Tansu refuses (see the module docstring).
    peer = load("aiokafka_transaction", "aiokafka", switched=False)
    import aiokafka.errors

    with pytest.raises(aiokafka.errors.KafkaError):
        asyncio.run(asyncio.wait_for(peer.main(tansu.bootstrap, topic, f"txn-peer-{next(_ids)}", "group-peer"), 60))

    ours = load("aiokafka_transaction", "aiokafka", switched=True)
    group = f"group-{next(_ids)}"
    observed = asyncio.run(ours.main(tansu.bootstrap, topic, f"txn-ours-{next(_ids)}", group))
    assert observed[-2:] == [("outside a transaction", "IllegalOperation"), ("aborted", "the application gives up")]
    assert [o[1] for o in observed[:5]] == [0, 1, 2, 3, 4]
    # confluent-kafka reads read_committed: the aborted record is not there, the committed ones are.
    values = [r.value for r in read_topic(tansu.bootstrap, topic, 6, partitions=2)]
    assert _committed(tansu.bootstrap, group, topic, 0) == 3
    assert sorted(v for v in values if v is not None) == sorted(
        [b"committed-%d" % i for i in range(5)] + [b"committed-explicitly"]
    )


def _committed(bootstrap: str, group: str, topic: str, partition: int) -> int:
    """The group's committed offset, read by confluent-kafka (independent of kproducer)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([CkTopicPartition(topic, partition)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()


def test_errors_are_aiokafkas_names_and_kproducers_classes() -> None:
    error = compat_errors.translate(RecordTooLargeError("too big", topic="t", partition=0))
    assert isinstance(error, compat_errors.MessageSizeTooLargeError)
    assert isinstance(error, compat_errors.BrokerResponseError)
    assert isinstance(error, compat_errors.KafkaError) and isinstance(error, RuntimeError)
    assert isinstance(error, RecordTooLargeError)
    assert error.errno == 10 and error.topic == "t" and error.partition == 0
    assert isinstance(error.__cause__, RecordTooLargeError)
    for name in (
        "KafkaTimeoutError", "RequestTimedOutError", "NotLeaderForPartitionError", "UnknownTopicOrPartitionError",
        "ProducerClosed", "IllegalOperation", "ProducerFenced", "KafkaConnectionError", "InvalidMessageError",
    ):
        assert issubclass(getattr(compat_errors, name), BaseException), name


def test_refused_keywords_are_named() -> None:
    with pytest.raises(compat_errors.KafkaConfigurationError, match="sasl_oauth_token_provider"):
        AIOKafkaProducer(bootstrap_servers="localhost", sasl_oauth_token_provider=object())
    with pytest.raises(ValueError, match="Kerberos"):
        AIOKafkaProducer(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")
    with pytest.raises(TypeError):
        AIOKafkaProducer(no_such_keyword=1)  # type: ignore[call-arg]


def test_transactional_calls_without_transactional_id_raise_illegal_operation(tansu: TansuBroker) -> None:
    async def run() -> None:
        async with AIOKafkaProducer(bootstrap_servers=tansu.bootstrap) as p:
            with pytest.raises(compat_errors.IllegalOperation):
                await p.begin_transaction()

    asyncio.run(run())


def test_custom_and_explicit_default_partitioners_place_records_as_aiokafka(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "aiokafka_partitioner", 3, 24)
    assert ours_obs == peer_obs
    assert ours_records == peer_records
    assert {o[2] for o in ours_obs if o[0] == "custom"} == {0, 1, 2}
