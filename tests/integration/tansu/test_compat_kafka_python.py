"""kproducer.compat.kafka against kafka-python itself, on Tansu: the same programs, once on kafka-python and
once with only their imports switched (tests/support/peer_programs.py), write the same records to the same
partitions in the same order (read back by confluent-kafka, read_committed) and observe the same things in
their callbacks, errbacks and futures, transactions included.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from typing import Any

import pytest

from kproducer.compat.kafka import KafkaProducer
from kproducer.compat.kafka import errors as compat_errors
from kproducer.errors import KafkaError as KproducerError
from tests.support.latch import wait_until
from tests.support.peer_programs import load
from tests.support.readback import ConsumedRecord, create_topic, read_topic
from tests.support.tansu import TansuBroker

_ids = itertools.count()


def _records(records: list[ConsumedRecord]) -> list[tuple[Any, ...]]:
    """What two runs must share: partition, offset, key, value, headers (not topic or timestamp)."""
    return [(r.partition, r.offset, r.key, r.value, r.headers) for r in records]


def _run_both(
    tansu: TansuBroker, name: str, partitions: int, expected: int, *extra: str
) -> tuple[Any, Any, Any, Any]:
    out = []
    for switched in (False, True):
        run = f"{'kproducer' if switched else 'kafka-python'}-{next(_ids)}"
        topic = f"compat-kafka-{name}-{run}"
        create_topic(tansu.bootstrap, topic, partitions)
        program = load(name, "kafka", switched=switched)
        with warnings.catch_warnings():
            # kafka-python warns that a plain function is not a kafka.serializer.Serializer.
            warnings.simplefilter("ignore", DeprecationWarning)
            observed = program.main(tansu.bootstrap, topic, *(f"{e}-{run}" for e in extra))
        out.append((observed, _records(read_topic(tansu.bootstrap, topic, expected, partitions=partitions))))
    (peer_obs, peer_records), (ours_obs, ours_records) = out
    return peer_obs, ours_obs, peer_records, ours_records


def test_send_program_same_records_same_partitions_same_callbacks(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "kafka_send", 3, 62)
    assert ours_records == peer_records
    assert ours_obs == peer_obs
    assert sum(1 for o in ours_obs if o[0] == "success") == 60  # 59 callbacks before flush, 1 after
    assert {r[0] for r in ours_records} == {0, 1, 2}


def test_too_large_and_send_after_close_raise_kafka_pythons_exceptions(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "kafka_errors", 3, 2)
    assert ours_obs == peer_obs
    assert ours_obs[0] == ("too large", "MessageSizeTooLargeError", 10, True, False)
    assert ours_obs[-1] == ("after close", "IllegalStateError", True)
    assert ours_records == peer_records


def test_transaction_program_same_committed_records(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(
        tansu, "kafka_transaction", 2, 7, "txn", "group"
    )
    assert ours_obs == peer_obs
    assert ours_obs[1] == ("aborted", True, "TransactionAbortedError")
    assert ours_records == peer_records
    assert b"aborted" not in [r[3] for r in ours_records]


def test_a_record_failing_through_its_future_reaches_the_errback_as_kafka_pythons_error(tansu: TansuBroker) -> None:
    # kafka-python waits for the topic's metadata inside send() and raises KafkaTimeoutError there;
    # kproducer never blocks send() on metadata: the record fails through its future at max.block.ms,
    # with the Java client's error for a topic absent from metadata, under kafka-python's name for it.
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, max_block_ms=300, allow_auto_create_topics=False)
    got: list[Any] = []
    done = threading.Event()
    future = producer.send(f"no-such-topic-{next(_ids)}", b"v", key=b"k")
    future.add_callback(lambda md: got.append(("callback", md)))
    future.add_errback(lambda e: (got.append(("errback", type(e).__name__, isinstance(e, KproducerError))), done.set()))
    wait_until(done.is_set, "the errback ran")
    assert got == [("errback", "UnknownTopicOrPartitionError", True)]
    assert future.failed() and not future.succeeded() and future.is_done and future.value is None
    assert isinstance(future.exception, compat_errors.UnknownTopicOrPartitionError)
    assert isinstance(future.exception, compat_errors.InvalidMetadataError) and future.exception.retriable
    with pytest.raises(compat_errors.UnknownTopicOrPartitionError):
        future.get(1)
    producer.close()


def test_get_with_a_timeout_raises_kafka_timeout_error(tansu: TansuBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, linger_ms=60_000, batch_size=1_000_000)
    topic = f"compat-kafka-get-timeout-{next(_ids)}"
    create_topic(tansu.bootstrap, topic, 1)
    future = producer.send(topic, b"waits for linger", key=b"k")
    with pytest.raises(compat_errors.KafkaTimeoutError, match="Timeout after waiting"):
        future.get(timeout=0.05)
    assert not future.is_done
    producer.flush()
    assert future.get(0).offset == 0
    producer.close()


def test_configuration_names_unknown_and_refused() -> None:
    with pytest.raises(compat_errors.KafkaConfigurationError, match="Unrecognized configs: \\['no_such'\\]"):
        KafkaProducer(bootstrap_servers="localhost", no_such=1)
    with pytest.raises(ValueError, match="'ssl_crlfile'"):
        KafkaProducer(bootstrap_servers="localhost", ssl_crlfile="/x.pem")
    with pytest.raises(ValueError, match="'sasl_kerberos_name'.*Kerberos"):
        KafkaProducer(bootstrap_servers="localhost", sasl_kerberos_name="k")
    # kafka-python's defaults, given explicitly, are accepted.
    KafkaProducer(bootstrap_servers="localhost:1", metrics_enabled=True, metric_reporters=[], retries=float("inf"),
                  max_block_ms=100).close(0)


def test_custom_partitioner_and_serializer_classes_as_kafka_python(tansu: TansuBroker) -> None:
    peer_obs, ours_obs, peer_records, ours_records = _run_both(tansu, "kafka_partitioner", 3, 21)
    assert ours_obs == peer_obs
    assert ours_records == peer_records
    assert ours_obs[-1] == ("tombstone", 0, -1)
    assert {o[1] for o in ours_obs[:-1]} == {0, 1, 2}


def test_get_inside_a_callback_raises_illegal_state_and_loses_nothing(tansu: TansuBroker) -> None:
    # Callbacks run on the producer's I/O thread: get() of a record still pending there would wait for
    # itself. It raises kafka-python's IllegalStateError naming the deadlock (not a timeout), at once.
    topic = f"compat-kafka-get-in-callback-{next(_ids)}"
    create_topic(tansu.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap)
    seen: list[Any] = []
    done = threading.Event()

    def inner(_md: Any) -> None:
        second = producer.send(topic, b"second", key=b"k")
        try:
            second.get(30)
        except Exception as e:  # noqa: BLE001 - what it raises is the observation
            seen.append((type(e).__name__, isinstance(e, compat_errors.IllegalStateError), "deadlock" in str(e)))
        done.set()

    producer.send(topic, b"first", key=b"k").add_callback(inner)
    wait_until(done.is_set, "the callback ran")
    assert seen == [("IllegalStateError", True, True)]
    producer.flush()
    producer.close()
    assert [r.value for r in read_topic(tansu.bootstrap, topic, 2)] == [b"first", b"second"]


def test_flush_does_not_time_out_because_of_records_sent_meanwhile(tansu: TansuBroker) -> None:
    # A record sent while flush() waits (here by a callback, as another thread could) is not one flush()
    # waited for: kafka-python's flush() returns, and raises KafkaTimeoutError only when its timeout ran out.
    topic = f"compat-kafka-flush-meanwhile-{next(_ids)}"
    create_topic(tansu.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap, linger_ms=1000)
    producer.send(topic, b"first", key=b"k").add_callback(lambda _md: producer.send(topic, b"second", key=b"k"))
    producer.flush(60)
    producer.flush(60)
    producer.close()
    assert [r.value for r in read_topic(tansu.bootstrap, topic, 2)] == [b"first", b"second"]
