"""The transactional producer against real brokers: Tansu and librdkafka's mock cluster.

Neither broker hides aborted records from read_committed consumers, so visibility
is decided from the control markers, read raw with kafka-python's record classes
(tests/support/txn_reader.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import pytest

from kproducer import Producer
from kproducer.coordinator import end_transaction, init_producer_id
from kproducer.errors import (
    IllegalStateError,
    InvalidTransactionTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
)
from kproducer.transaction_manager import TransactionState
from tests.support.mock_cluster import MockCluster
from tests.support.readback import create_topic as confluent_create_topic
from tests.support.tansu import TansuBroker
from tests.support.txn_reader import read_transactional_topics

_ids = itertools.count()


@dataclass
class Broker:
    name: str
    bootstrap: str
    create_topic: Callable[[str, int], None]


@pytest.fixture(params=["tansu", "mock"])
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    if request.param == "tansu":
        tansu: TansuBroker = request.getfixturevalue("tansu")
        yield Broker("tansu", tansu.bootstrap, lambda t, n: confluent_create_topic(tansu.bootstrap, t, n))
    else:
        mock: MockCluster = request.getfixturevalue("mock_cluster")
        yield Broker("mock", mock.bootstrap, lambda t, n: mock.create_topic(t, n))


def _producer(broker: Broker, tid: str | None = None, **extra: object) -> Producer:
    cfg: dict[str, object] = {
        "bootstrap.servers": broker.bootstrap,
        "transactional.id": tid or f"txn-{broker.name}-{next(_ids)}",
        "linger.ms": 5,
    }
    cfg.update(extra)
    return Producer(cfg)


def _topics(broker: Broker, base: str, n: int, partitions: int = 3) -> list[str]:
    names = [f"{base}-{i}" for i in range(n)]
    for t in names:
        broker.create_topic(t, partitions)
    return names


def test_committed_visible_once_aborted_never(broker: Broker, topic_name: str) -> None:
    topics = _topics(broker, topic_name, 2)
    p = _producer(broker)
    try:
        p.init_transactions(30)
        assert p.producer_id >= 0 and p.producer_epoch >= 0
        expected: list[bytes] = []
        aborted: list[bytes] = []
        for txn, commit in enumerate((True, False, True)):
            with pytest.raises(RuntimeError) if not commit else nullcontext(), p.transaction(timeout=30):
                futs = []
                for i in range(40):
                    value = f"t{txn}-r{i}".encode()
                    futs.append(p.send(topics[i % 2], value, key=f"k{i % 7}".encode()))
                    (expected if commit else aborted).append(value)
                if not commit:
                    p.flush(30)  # written, then aborted: the marker must hide them
                    raise RuntimeError("abort this one")
            if commit:
                offsets = [f.result(10).offset for f in futs]
                assert all(o >= 0 for o in offsets)
        assert p.transaction_state is TransactionState.READY
        m = p.metrics()
        for op in ("init", "begin", "commit", "abort"):
            assert m[f"txn-{op}-time-ns-total"] > 0, op
        assert m["txn-send-offsets-time-ns-total"] == 0
    finally:
        p.close(30)
    view = read_transactional_topics(broker.bootstrap, topics)
    assert sorted(r.value for r in view.committed) == sorted(expected)  # exactly once each
    assert sorted(r.value for r in view.aborted) == sorted(aborted)
    assert view.open == []
    # Keys went to the partition the default partitioner picks for them, keyed records stay together.
    by_key: dict[tuple[str, bytes | None], set[int]] = {}
    for r in view.committed + view.aborted:
        by_key.setdefault((r.topic, r.key), set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())
    assert {m.commit for m in view.markers} == {True, False}


def test_records_never_sent_fail_with_transaction_aborted(broker: Broker, topic_name: str) -> None:
    (topic,) = _topics(broker, topic_name, 1)
    # linger.ms far away: the records stay in the accumulator until the abort.
    p = _producer(broker, **{"linger.ms": 60_000, "batch.size": 1 << 20})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        futs = [p.send(topic, f"never-{i}".encode(), key=b"k") for i in range(25)]
        errors: list[BaseException | None] = []
        p.send(topic, b"cb", callback=lambda md, exc: errors.append(exc))
        p.abort_transaction(30)
        for f in futs:
            with pytest.raises(TransactionAbortedError, match="aborted before this record was sent"):
                f.result(10)
        assert len(errors) == 1 and isinstance(errors[0], TransactionAbortedError)
        # The producer goes on: a new transaction commits.
        with p.transaction(timeout=30):
            last = p.send(topic, b"after", key=b"k")
        assert last.result(10).offset >= 0
    finally:
        p.close(30)
    view = read_transactional_topics(broker.bootstrap, [topic])
    assert [r.value for r in view.committed] == [b"after"]
    assert view.aborted == []


def test_second_producer_fences_the_first(tansu: TansuBroker, topic_name: str) -> None:
    """On Tansu, which checks epochs (librdkafka's mock does not: see the injected-error test)."""
    broker = Broker("tansu", tansu.bootstrap, lambda t, n: confluent_create_topic(tansu.bootstrap, t, n))
    (topic,) = _topics(broker, topic_name, 1, partitions=2)
    tid = f"fence-{next(_ids)}"
    first = _producer(broker, tid)
    second = _producer(broker, tid)
    try:
        first.init_transactions(30)
        first.begin_transaction()
        for i in range(10):
            first.send(topic, f"zombie-{i}".encode(), key=b"z", partition=0)
        first.flush(30)
        second.init_transactions(30)  # fences the first and aborts its open transaction
        assert (second.producer_id, second.producer_epoch) > (first.producer_id, first.producer_epoch)
        # The zombie's next write is refused (Tansu drops the connection on a fenced EndTxn
        # instead of answering, so the write is what tells here).
        late = first.send(topic, b"late", key=b"z", partition=0)
        with pytest.raises(ProducerFencedError, match="fenced by a newer producer"):
            late.result(30)
        assert first.transaction_state is TransactionState.FATAL_ERROR
        # Every later call raises the same error until close().
        for call in (
            lambda: first.commit_transaction(5),
            first.begin_transaction,
            lambda: first.send(topic, b"x"),
            lambda: first.abort_transaction(5),
        ):
            with pytest.raises(ProducerFencedError, match="fenced by a newer producer"):
                call()
        with second.transaction(timeout=30):
            second.send(topic, b"winner", key=b"w")
    finally:
        first.close(10)
        second.close(30)
    view = read_transactional_topics(broker.bootstrap, [topic])
    assert [r.value for r in view.committed] == [b"winner"]
    assert sorted(r.value for r in view.aborted) == sorted(f"zombie-{i}".encode() for i in range(10))


def test_transaction_committed_by_id_without_the_producer(broker: Broker, topic_name: str) -> None:
    """What an exactly-once sink's driver does: the writer flushes, someone else commits by id."""
    (topic,) = _topics(broker, topic_name, 1, partitions=2)
    tid = f"direct-{broker.name}-{next(_ids)}"
    writer = _producer(broker, tid)
    try:
        writer.init_transactions(30)
        writer.begin_transaction()
        for i in range(20):
            writer.send(topic, f"d{i}".encode(), key=f"k{i}".encode())
        assert writer.flush(30) == 0
        pid, epoch = writer.producer_id, writer.producer_epoch
        end_transaction(broker.bootstrap, tid, pid, epoch, commit=True, timeout=30, config={"security.protocol": "PLAINTEXT"})
    finally:
        writer.close(0.5)  # its own abort on close finds nothing open, or fails: either way nothing changes
    view = read_transactional_topics(broker.bootstrap, [topic])
    assert sorted(r.value for r in view.committed) == sorted(f"d{i}".encode() for i in range(20))
    assert view.aborted == []
    # Fencing by id (what a driver does to the ids of attempts that lost): a newer epoch.
    new_pid, new_epoch = init_producer_id(broker.bootstrap, tid, timeout=30)
    assert new_pid != pid or new_epoch > epoch


def test_transactional_calls_need_the_right_state(broker: Broker, topic_name: str) -> None:
    (topic,) = _topics(broker, topic_name, 1)
    p = _producer(broker)
    try:
        with pytest.raises(IllegalStateError, match="state UNINITIALIZED: call init_transactions"):
            p.begin_transaction()
        with pytest.raises(IllegalStateError, match="only allowed inside a transaction.*UNINITIALIZED"):
            p.send(topic, b"x")
        p.init_transactions(30)
        with pytest.raises(IllegalStateError, match="init_transactions.*state READY"):
            p.init_transactions(30)
        with pytest.raises(IllegalStateError, match="commit_transaction.*state READY: call begin_transaction"):
            p.commit_transaction(5)
        with pytest.raises(IllegalStateError, match="abort_transaction.*state READY"):
            p.abort_transaction(5)
        with pytest.raises(IllegalStateError, match="only allowed inside a transaction.*state READY"):
            p.send(topic, b"x")
        with pytest.raises(IllegalStateError, match="only allowed inside a transaction"):
            p.send_batch(topic, [b"x"])
        p.begin_transaction()
        with pytest.raises(IllegalStateError, match="begin_transaction.*IN_TRANSACTION"):
            p.begin_transaction()
        p.send_batch(topic, [b"a", b"b"]).result(30)
        import pyarrow as pa

        p.send_arrow(pa.table({"value": pa.array([b"c", b"d"], type=pa.binary())}), topic).result(30)
        with pytest.raises(IllegalStateError, match="init_transactions.*state IN_TRANSACTION"):
            p.init_transactions(5)
        p.commit_transaction(30)
        with pytest.raises(IllegalStateError, match="only allowed inside a transaction"):
            p.send_arrow(pa.table({"value": pa.array([b"e"], type=pa.binary())}), topic)
    finally:
        p.close(30)
    view = read_transactional_topics(broker.bootstrap, [topic])
    assert [r.value for r in view.committed] == [b"a", b"b", b"c", b"d"]


def test_transaction_timeout_above_the_broker_maximum(mock_cluster: MockCluster) -> None:
    """Neither test broker enforces transaction.max.timeout.ms: the mock answers INVALID_TRANSACTION_TIMEOUT on request."""
    mock_cluster.push_request_errors(22, [50])  # InitProducerId -> INVALID_TRANSACTION_TIMEOUT
    p = Producer({"bootstrap.servers": mock_cluster.bootstrap, "transactional.id": "too-long", "transaction.timeout.ms": 2_000_000_000})
    try:
        with pytest.raises(InvalidTransactionTimeoutError):
            p.init_transactions(30)
        assert p.transaction_state is TransactionState.FATAL_ERROR
        with pytest.raises(InvalidTransactionTimeoutError):
            p.begin_transaction()
    finally:
        p.close(5)


def _committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = c.committed([CTP(topic, partition)], timeout=20)
        return int(tp.offset)
    finally:
        c.close()


def test_send_offsets_commits_the_group_offsets_only_with_the_transaction(broker: Broker, topic_name: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    (source, sink) = _topics(broker, topic_name, 2, partitions=1)
    committed_group, aborted_group = f"g-commit-{next(_ids)}", f"g-abort-{next(_ids)}"
    # The consumer's own group metadata (librdkafka's serialized form) is accepted as is.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": committed_group})
    try:
        metadata = consumer.consumer_group_metadata()
    finally:
        consumer.close()
    p = _producer(broker)
    try:
        p.init_transactions(30)
        with p.transaction(timeout=30):
            p.send(sink, b"out-1")
            p.send_offsets_to_transaction([CTP(source, 0, 17)], metadata, timeout=30)
        p.begin_transaction()
        p.send(sink, b"out-2")
        p.send_offsets_to_transaction({CTP(source, 0): 99}, aborted_group, timeout=30)
        p.flush(30)
        p.abort_transaction(30)
    finally:
        p.close(30)
    if broker.name == "tansu":
        # librdkafka's mock accepts TxnOffsetCommit but does not store the offsets (committed()
        # reads nothing even after a commit), so the read-back is Tansu's.
        assert _committed_offset(broker.bootstrap, committed_group, source, 0) == 17
    assert _committed_offset(broker.bootstrap, aborted_group, source, 0) < 0  # nothing committed
    view = read_transactional_topics(broker.bootstrap, [sink])
    assert [r.value for r in view.committed] == [b"out-1"] and [r.value for r in view.aborted] == [b"out-2"]


def test_records_waiting_for_metadata_belong_to_their_transaction(broker: Broker, topic_name: str) -> None:
    # send() does not wait for metadata: right after these sends most records are still parked
    # for their topics' metadata when commit/abort is called, and must still end in that transaction.
    topics = _topics(broker, topic_name, 3)
    late = f"{topic_name}-late"
    broker.create_topic(late, 2)
    p = _producer(broker)
    try:
        p.init_transactions(30)
        p.begin_transaction()
        committed = [p.send(topics[i % 3], f"c{i}".encode(), key=f"k{i}".encode()) for i in range(30)]
        p.commit_transaction(30)
        assert all(f.result(10).offset >= 0 for f in committed)
        p.begin_transaction()
        aborted = [p.send(late, f"a{i}".encode()) for i in range(10)]
        p.abort_transaction(30)
        outcomes = [f.exception(10) for f in aborted]
        assert all(e is None or isinstance(e, TransactionAbortedError) for e in outcomes), outcomes
        assert p.transaction_state is TransactionState.READY
    finally:
        p.close(30)
    view = read_transactional_topics(broker.bootstrap, [*topics, late])
    assert sorted(r.value for r in view.committed) == sorted(f"c{i}".encode() for i in range(30))
    written_then_aborted = {r.value for r in view.aborted}
    assert written_then_aborted == {f"a{i}".encode() for i, e in enumerate(outcomes) if e is None}
    assert view.open == []
