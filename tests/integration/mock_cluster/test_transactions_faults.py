"""Transactions under faults on librdkafka's mock cluster (3 brokers): coordinator moves, injected
coordinator errors, leader moves mid-transaction, a broker down during commit. A commit completes
or fails with a retriable error; what the markers show is never half a transaction."""

from __future__ import annotations

import itertools

import pytest

from kproducer import Producer
from kproducer.errors import KafkaTimeoutError, ProducerFencedError
from kproducer.transaction_manager import TransactionState
from tests.support.mock_cluster import MockCluster
from tests.support.txn_reader import TopicView, read_transactional_topics

_ids = itertools.count()
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, PRODUCE = 10, 22, 24, 26, 0


def _producer(mock: MockCluster, tid: str, **extra: object) -> Producer:
    cfg: dict[str, object] = {"bootstrap.servers": mock.bootstrap, "transactional.id": tid, "linger.ms": 5}
    cfg.update(extra)
    return Producer(cfg)


def _assert_whole(view: TopicView, committed: list[bytes], aborted: list[bytes] = ()) -> None:  # type: ignore[assignment]
    assert sorted(r.value for r in view.committed) == sorted(committed)  # each exactly once
    assert sorted(r.value for r in view.aborted) == sorted(aborted)
    assert view.open == []


def test_coordinator_errors_are_retried_and_the_coordinator_followed(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 3)
    tid = f"moves-{next(_ids)}"
    mock_cluster.coordinator_set("transaction", tid, 1)
    mock_cluster.push_request_errors(FIND_COORDINATOR, [15, 15])  # COORDINATOR_NOT_AVAILABLE twice
    mock_cluster.push_request_errors(INIT_PRODUCER_ID, [14, 16])  # LOAD_IN_PROGRESS, NOT_COORDINATOR
    p = _producer(mock_cluster, tid)
    values: list[bytes] = []
    try:
        p.init_transactions(30)
        for txn in range(3):
            if txn == 1:
                mock_cluster.coordinator_set("transaction", tid, 2)
                mock_cluster.push_request_errors(ADD_PARTITIONS, [16, 51, 51])  # NOT_COORDINATOR, CONCURRENT_TRANSACTIONS x2
            if txn == 2:
                mock_cluster.coordinator_set("transaction", tid, 3)
                mock_cluster.push_request_errors(END_TXN, [16, 51, 15])
            with p.transaction(timeout=30):
                for i in range(30):
                    v = f"{txn}-{i}".encode()
                    values.append(v)
                    p.send(topic_name, v, key=f"k{i % 5}".encode())
    finally:
        p.close(30)
    _assert_whole(read_transactional_topics(mock_cluster.bootstrap, [topic_name]), values)


def test_leader_moves_mid_transaction(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 2)
    p = _producer(mock_cluster, f"leader-{next(_ids)}")
    values: list[bytes] = []
    try:
        p.init_transactions(30)
        with p.transaction(timeout=30):
            for i in range(200):
                if i == 100:
                    p.flush(30)
                    mock_cluster.partition_set_leader(topic_name, 0, 3)
                    mock_cluster.partition_set_leader(topic_name, 1, 1)
                    mock_cluster.push_request_errors(PRODUCE, [6, 6])  # NOT_LEADER_OR_FOLLOWER until refreshed
                v = f"m-{i}".encode()
                values.append(v)
                p.send(topic_name, v, partition=i % 2)
    finally:
        p.close(30)
    _assert_whole(read_transactional_topics(mock_cluster.bootstrap, [topic_name]), values)


def test_coordinator_down_during_commit_then_commit_again(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 2)
    tid = f"down-{next(_ids)}"
    mock_cluster.coordinator_set("transaction", tid, 2)
    # Partitions led by brokers that stay up: only the coordinator goes down.
    mock_cluster.partition_set_leader(topic_name, 0, 1)
    mock_cluster.partition_set_leader(topic_name, 1, 3)
    p = _producer(mock_cluster, tid, **{"request.timeout.ms": 2000, "delivery.timeout.ms": 7000})
    values = [f"d-{i}".encode() for i in range(50)]
    try:
        p.init_transactions(30)
        p.begin_transaction()
        for v in values:
            p.send(topic_name, v)
        p.flush(30)
        mock_cluster.broker_set_down(2)
        with pytest.raises(KafkaTimeoutError, match="call commit_transaction\\(\\) again"):
            p.commit_transaction(1.0)
        assert p.transaction_state is TransactionState.COMMITTING_TRANSACTION
        # Not visible, not aborted: still open while the coordinator is away.
        view = read_transactional_topics(mock_cluster.bootstrap, [topic_name])
        assert view.committed == [] and view.aborted == [] and len(view.open) == len(values)
        mock_cluster.broker_set_up(2)
        p.commit_transaction(30)  # the same commit, completed
        assert p.transaction_state is TransactionState.READY
    finally:
        p.close(30)
    _assert_whole(read_transactional_topics(mock_cluster.bootstrap, [topic_name]), values)


def test_a_fenced_end_txn_is_fatal(mock_cluster: MockCluster, topic_name: str) -> None:
    """The mock does not check epochs: the fenced answer is injected."""
    mock_cluster.create_topic(topic_name, 1)
    p = _producer(mock_cluster, f"fenced-{next(_ids)}")
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic_name, b"x")
        p.flush(30)
        mock_cluster.push_request_errors(END_TXN, [90])
        with pytest.raises(ProducerFencedError, match="fenced by a newer producer"):
            p.commit_transaction(30)
        with pytest.raises(ProducerFencedError):
            p.begin_transaction()
    finally:
        p.close(5)


def test_retriable_produce_errors_inside_a_transaction_still_commit_once(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    p = _producer(mock_cluster, f"retry-{next(_ids)}")
    values = [f"r-{i}".encode() for i in range(20)]
    try:
        p.init_transactions(30)
        mock_cluster.push_request_errors(PRODUCE, [19, 7, 19])  # NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT
        with p.transaction(timeout=30):
            for v in values:
                p.send(topic_name, v)
    finally:
        p.close(30)
    _assert_whole(read_transactional_topics(mock_cluster.bootstrap, [topic_name]), values)
