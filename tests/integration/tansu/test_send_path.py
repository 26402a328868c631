"""One send path that never waits for metadata: send(), send_batch(), send_arrow() and the C lane.

Against Tansu (one of them behind a counting proxy that sees every connection the
producer makes), read back with confluent-kafka's consumer:

* a single thread sending to 500 new topics makes a few dozen Metadata requests;
* send() to an unreachable bootstrap returns at once, its futures fail at max.block.ms;
* per-partition order across the metadata wait, keyed and keyless, over known and new topics;
* an explicit partition beyond the count refreshes metadata on a backoff, not in a storm;
* bulk and single sends place records the same way around a muted partition.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from kproducer import Producer
from kproducer.admin import create_topics
from kproducer.errors import (
    InvalidTopicError,
    KafkaTimeoutError,
    PartitionMutedError,
    UnknownTopicOrPartitionError,
)
from kproducer.structs import TopicPartition
from tests.support.counting_proxy import METADATA, CountingProxy
from tests.support.latch import wait_until
from tests.support.readback import create_topic, read_topic, read_topics
from tests.support.tansu import TansuBroker, free_port, start_tansu


def _record_parking(p: Producer) -> set[str]:
    """The topics whose records ``p``'s router queues to wait (filled as they park).

    Checked instead of "the future is not done yet", which a fast Sender can beat: the
    metadata may arrive and release the record before the test looks.
    """
    parked_topics: set[str] = set()
    enqueue = p._router._enqueue

    def counting_enqueue(topic: str, *args: Any) -> bool:
        parked_topics.add(topic)
        return enqueue(topic, *args)

    p._router._enqueue = counting_enqueue  # type: ignore[method-assign]
    return parked_topics


@pytest.fixture(scope="module")
def proxied() -> Iterator[tuple[TansuBroker, CountingProxy]]:
    """A Tansu that advertises a counting proxy's port: every producer connection is counted."""
    proxy_port = free_port()
    broker = start_tansu(advertised_port=proxy_port)
    proxy = CountingProxy(proxy_port, broker.port)
    proxy.start()
    try:
        yield broker, proxy
    finally:
        proxy.stop()
        broker.stop()


def _proxy_bootstrap(proxy: CountingProxy) -> str:
    return f"127.0.0.1:{proxy.listen_port}"


def _metadata_requests(proxy: CountingProxy) -> int:
    return proxy.snapshot()[0].get(METADATA, 0)


def _assert_memory_returns(p: Producer) -> None:
    """Every byte parked records were charged comes back to buffer.memory (the Sender frees batches last)."""
    total = p.config.buffer_memory
    # The last batches are freed just after their futures complete: wait for it (a latch; a
    # loaded machine may take seconds), fail naming what is missing if it never happens.
    wait_until(
        lambda: p._pool.available_memory() == total,
        f"every byte of buffer.memory ({total}) is free again",
    )


def test_one_thread_500_new_topics_shares_metadata_requests(proxied: tuple[TansuBroker, CountingProxy]) -> None:
    _broker, proxy = proxied
    bootstrap = _proxy_bootstrap(proxy)
    names = [f"fanout-{i:03d}" for i in range(500)]
    for i in range(0, len(names), 100):
        create_topics(bootstrap, {n: 1 for n in names[i : i + 100]})
    proxy.reset()
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        futs = [p.send(n, b"v-" + n.encode(), b"k") for n in names]
        assert p.flush(60) == 0
        metas = [f.result(10) for f in futs]
    requests = _metadata_requests(proxy)
    # Before: one request per new topic (each first send() waited for its own answer).
    assert requests <= 40, f"{requests} Metadata requests for 500 new topics sent back to back"
    assert [m.topic for m in metas] == names
    got = read_topics(_broker.bootstrap, {n: 1 for n in names}, 500, timeout=60)
    assert [(r.topic, r.offset, r.key, r.value) for r in got] == [(n, 0, b"k", b"v-" + n.encode()) for n in names]


def test_unreachable_bootstrap_send_returns_and_futures_fail_with_reachability() -> None:
    port = free_port()  # nothing listens there
    calls: list[BaseException | None] = []
    with Producer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 1500}) as p:
        t0 = time.monotonic()
        futs = [p.send("t", v, callback=lambda _m, e: calls.append(e)) for v in (b"a", b"b", b"c")]
        # Each send() returned before any record's max.block.ms ran out: they did not wait.
        assert not any(f.done() for f in futs)
        errors = [f.exception(30) for f in futs]
        waited = time.monotonic() - t0
        _assert_memory_returns(p)
        p.close(0)
    assert waited >= 1.4
    for e in errors:
        assert isinstance(e, KafkaTimeoutError), repr(e)
        assert "'t' not present in metadata after 1500 ms" in str(e)
        assert f"127.0.0.1:{port}" in str(e)
    assert len(calls) == 3 and all(isinstance(e, KafkaTimeoutError) for e in calls)


def test_invalid_topic_fails_at_once_through_the_future(tansu: TansuBroker) -> None:
    seen: list[BaseException | None] = []
    with Producer({"bootstrap.servers": tansu.bootstrap}) as p:
        fut = p.send("bad topic/name", b"v", callback=lambda _m, e: seen.append(e))
        assert fut.done()
        err = fut.exception(0)
        bulk = p.send_batch("", [b"a", b"b"])
        assert bulk.done()
    assert isinstance(err, InvalidTopicError) and "'bad topic/name'" in str(err)
    assert seen == [err]
    assert all(isinstance(e, InvalidTopicError) for e in bulk.exceptions(0))


def test_order_per_partition_across_the_metadata_wait(tansu: TansuBroker, topic_name: str) -> None:
    known, new_a, new_b = f"{topic_name}-known", f"{topic_name}-a", f"{topic_name}-b"
    for t in (known, new_a, new_b):
        create_topic(tansu.bootstrap, t, 3)
    sent: list[tuple[str, bytes | None, bytes, Any]] = []
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 2}) as p:
        p.partitions_for(known)
        parked_topics = _record_parking(p)

        def burst(first: int, count: int) -> None:
            for i in range(first, first + count):
                topic = (known, new_a, new_b)[i % 3]
                key = None if i % 4 == 0 else b"key-%d" % (i % 7)
                value = b"%d" % i
                if i % 5 == 0:
                    fut: Any = p.send_batch(topic, [value], [key] if key is not None else None)
                else:
                    fut = p.send(topic, value, key)
                sent.append((topic, key, value, fut))

        burst(0, 300)  # the new topics' records wait for metadata; the known topic's go on
        parked_during = {new_a, new_b} <= parked_topics
        sent[1][3].result(10)  # the first record of a new topic is delivered: its metadata came
        burst(300, 300)  # after the metadata arrived
        assert p.flush(30) == 0
        _assert_memory_returns(p)
    assert parked_during, "the first burst was expected to find the new topics without metadata"
    placed: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    key_partition: dict[tuple[str, bytes], set[int]] = defaultdict(set)
    for topic, key, value, fut in sent:
        md = fut.result(10)
        md = md[0] if isinstance(md, list) else md
        placed[(topic, md.partition)].append(value)
        if key is not None:
            key_partition[(topic, key)].add(md.partition)
    assert all(len(parts) == 1 for parts in key_partition.values()), "one key went to two partitions"
    got = read_topics(tansu.bootstrap, {known: 3, new_a: 3, new_b: 3}, len(sent))
    read: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    for r in got:
        assert r.value is not None
        read[(r.topic, r.partition)].append(r.value)
    assert read == placed  # every partition holds its records in send order, none lost or doubled


def test_explicit_partition_beyond_count_refreshes_on_a_backoff(
    proxied: tuple[TansuBroker, CountingProxy], topic_name: str
) -> None:
    _broker, proxy = proxied
    bootstrap = _proxy_bootstrap(proxy)
    create_topics(bootstrap, {topic_name: 4})
    cfg = {"bootstrap.servers": bootstrap, "max.block.ms": 3000, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000}
    with Producer(cfg) as p:
        p.partitions_for(topic_name)
        proxy.reset()
        fut = p.send(topic_name, b"x", partition=99)
        assert not fut.done()
        other = p.send(topic_name, b"y", partition=1)  # an existing partition is not held up
        assert other.result(10).partition == 1
        err = fut.exception(30)
        requests = _metadata_requests(proxy)
    assert isinstance(err, KafkaTimeoutError), repr(err)
    assert "Partition 99 of topic" in str(err) and "partition count 4" in str(err)
    # Refreshes at 0, 100, 300, 700, 1500 and 2500 ms (100 ms doubling up to 1 s) within 3 s: six.
    # Before: about 150 a second, 450 in 3 s.
    assert 1 <= requests <= 8, f"{requests} Metadata requests while partition 99 was awaited for 3 s"


def test_partition_of_a_new_topic_waits_then_goes(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with Producer({"bootstrap.servers": tansu.bootstrap}) as p:
        futs = [p.send(topic_name, b"%d" % i, partition=i % 2) for i in range(20)]
        assert p.flush(30) == 0
        assert [f.result(1).partition for f in futs] == [i % 2 for i in range(20)]
    got = read_topic(tansu.bootstrap, topic_name, 20)
    assert [r.value for r in got if r.partition == 0] == [b"%d" % i for i in range(0, 20, 2)]


def test_unknown_topic_error_when_auto_create_is_off(tansu: TansuBroker, topic_name: str) -> None:
    with Producer({"bootstrap.servers": tansu.bootstrap, "allow.auto.create.topics": False, "max.block.ms": 600}) as p:
        bulk = p.send_batch(topic_name + "-absent", [b"a", b"b"])
        assert not bulk.done()
        errors = bulk.exceptions(10)
    assert all(isinstance(e, (UnknownTopicOrPartitionError, KafkaTimeoutError)) for e in errors), errors


def test_a_fast_caller_fills_the_parking_share_then_everything_is_delivered(tansu: TansuBroker, topic_name: str) -> None:
    """Records parked for a topic that does not exist yet hold at most half of buffer.memory.

    With the whole buffer parked nothing could be appended once the topic appears (each
    partition's open batch needs memory beyond its records' bytes) and the records would
    wait out max.block.ms. Here the caller blocks at the share; once the topic exists,
    every record is delivered in send order, and the caller's own sends append the parked
    ones, so the topic returns to the direct path (the C lane, natively) while it sends.
    """
    n, value = 1_000, b"v" * 1_000
    conf = {
        "bootstrap.servers": tansu.bootstrap,
        "allow.auto.create.topics": False,
        "buffer.memory": 262_144,
        "max.block.ms": 30_000,
        "linger.ms": 1,
    }
    with Producer(conf) as p:
        futures: list[Any] = []
        sent = threading.Event()

        def produce() -> None:
            for i in range(n):
                futures.append(p.send(topic_name, value + b"%d" % i))
            sent.set()

        caller = threading.Thread(target=produce, daemon=True)
        caller.start()
        router = p._router
        for _ in range(2_000):  # bounded: the caller parks ~128 records, then blocks at the share
            if router._parked_bytes + 1_200 > router._park_limit:
                break
            time.sleep(0.01)
        assert router._parked_bytes + 1_200 > router._park_limit, router._parked_bytes
        assert router._parked_bytes <= router._park_limit
        assert not sent.is_set()
        create_topic(tansu.bootstrap, topic_name, 2)
        caller.join(60)
        assert sent.is_set()
        assert p.flush(60) == 0
        results = [f.result(1) for f in futures]
        if p._lane is not None:
            assert p._lane.fast_calls > 0
    assert router.parked_count == 0
    got = read_topic(tansu.bootstrap, topic_name, n)
    for partition in (0, 1):
        indices = [int(r.value[len(value) :]) for r in got if r.partition == partition]
        assert indices == sorted(indices)
        assert [md.offset for md in results if md.partition == partition] == list(range(len(indices)))
    assert len(got) == n


@pytest.mark.parametrize("beyond", [False, True], ids=["keyed", "keyed-after-a-partition-beyond-the-count"])
def test_a_queue_longer_than_a_release_chunk_keeps_send_order_while_the_caller_goes_on(
    tansu: TansuBroker, topic_name: str, beyond: bool
) -> None:
    """Parked records are appended a chunk at a time (router._RELEASE_CHUNK, _CATCH_UP_CHUNK): later
    sends, which arrive between the chunks, must still wait behind the rest of the queue, also when
    the queue starts with a record for a partition beyond the count (which alone would let them by)."""
    from kproducer import router as router_module

    parked_n, later_n = 3 * router_module._RELEASE_CHUNK, 2_000
    conf = {"bootstrap.servers": tansu.bootstrap, "allow.auto.create.topics": False, "linger.ms": 1, "max.block.ms": 5_000}
    with Producer(conf) as p:
        futures: list[Any] = []
        keys = [b"key-%d" % (i % 11) for i in range(parked_n + later_n)]
        beyond_future = p.send(topic_name, b"beyond", partition=5) if beyond else None
        for i in range(parked_n):  # the topic does not exist yet: every one of these parks
            futures.append(p.send(topic_name, b"%d" % i, keys[i]))
        assert p._router.parked_count == parked_n + beyond
        done = threading.Event()

        def go_on() -> None:
            for i in range(parked_n, parked_n + later_n):
                futures.append(p.send(topic_name, b"%d" % i, keys[i]))
            done.set()

        caller = threading.Thread(target=go_on, daemon=True)
        create_topic(tansu.bootstrap, topic_name, 3)
        router = p._router
        for _ in range(100_000):  # bounded: go on as soon as the first chunk is appended, not before
            if router.parked_count < parked_n + beyond:
                break
            time.sleep(0.0001)
        caller.start()
        caller.join(60)
        assert done.is_set()
        assert p.flush(60) == 0
        results = [f.result(1) for f in futures]
        if beyond_future is not None:
            err = beyond_future.exception(10)
            assert err is not None and "Partition 5 of topic" in str(err), err
    got = read_topic(tansu.bootstrap, topic_name, parked_n + later_n)
    assert len(got) == parked_n + later_n
    by_key: dict[bytes | None, set[int]] = defaultdict(set)
    for r in got:
        by_key[r.key].add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key went to two partitions"
    for partition in range(3):
        indices = [int(r.value or b"-1") for r in got if r.partition == partition]
        assert indices == sorted(indices), f"partition {partition} is out of send order"
        assert [md.offset for md in results if md.partition == partition] == list(range(len(indices)))


# ---------------------------------------------------------------------- circuit breaker: bulk == single
_BREAKER = {"producer.circuit.breaker.class": "failure_rate", "linger.ms": 2}


def _placements(p: Producer, topic: str, keys: list[bytes | None], bulk: bool) -> Counter[tuple[bytes | None, int]]:
    values = [b"v%d" % i for i in range(len(keys))]
    if bulk:
        chosen_keys = None if all(k is None for k in keys) else keys
        mds = p.send_batch(topic, values, chosen_keys).result(30)
    else:
        futs = [p.send(topic, v, k) for v, k in zip(values, keys, strict=True)]
        assert p.flush(30) == 0
        mds = [f.result(10) for f in futs]
    return Counter((k, md.partition) for k, md in zip(keys, mds, strict=True))


@pytest.mark.parametrize(
    "overrides",
    [{}, {"partitioner.ignore.keys": True}, {"partitioner.class": "kproducer.partitioner.RoundRobinPartitioner"}],
    ids=["built-in", "ignore-keys", "round-robin"],
)
def test_bulk_and_single_sends_avoid_a_muted_partition_alike(
    tansu: TansuBroker, topic_name: str, overrides: dict[str, Any]
) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    with Producer({"bootstrap.servers": tansu.bootstrap, **_BREAKER, **overrides}) as p:
        p.partitions_for(topic_name)
        manager = p.circuit_break_manager
        assert manager is not None
        muted = TopicPartition(topic_name, 0)
        manager.mute(muted)
        keyless = [None] * 200
        keyed = [b"key-%d" % (i % 20) for i in range(200)]
        for keys in (keyless, keyed):
            single = _placements(p, topic_name, keys, bulk=False)
            bulk = _placements(p, topic_name, keys, bulk=True)
            assert all(part != 0 for _k, part in single), single
            assert all(part != 0 for _k, part in bulk), bulk
            if keys is keyed and "partitioner.class" not in overrides and not overrides.get("partitioner.ignore.keys"):
                # A key's partition is a function of the key: the same for both paths.
                assert set(single) == set(bulk)
        # An explicit muted partition fails fast, with the same error, in both paths.
        one = p.send(topic_name, b"x", partition=0)
        many = p.send_batch(topic_name, [b"x", b"y"], partition=0)
        assert isinstance(one.exception(5), PartitionMutedError)
        assert all(isinstance(e, PartitionMutedError) for e in many.exceptions(5))
        manager.unmute(muted)


def test_keyed_rows_stay_on_a_muted_partition_without_reroute(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    cfg = {"bootstrap.servers": tansu.bootstrap, **_BREAKER, "producer.circuit.breaker.keyed.reroute": False}
    with Producer(cfg) as p:
        p.partitions_for(topic_name)
        manager = p.circuit_break_manager
        assert manager is not None
        keys = [b"key-%d" % i for i in range(40)]
        unmuted_single = _placements(p, topic_name, keys, bulk=False)
        manager.mute(TopicPartition(topic_name, 0))
        futs = [p.send(topic_name, b"s", k) for k in keys]
        bulk = p.send_batch(topic_name, [b"b"] * len(keys), keys)
        # Records for the muted partition wait in the accumulator; unmute to let them go.
        done = threading.Event()
        bulk.add_done_callback(lambda _f: done.set())
        manager.unmute(TopicPartition(topic_name, 0))
        assert p.flush(30) == 0
        single = Counter((k, f.result(10).partition) for k, f in zip(keys, futs, strict=True))
        bulk_placed = Counter((k, md.partition) for k, md in zip(keys, bulk.result(10), strict=True))
    assert single == bulk_placed == unmuted_single


def test_parked_record_for_a_muted_partition_fails_when_its_metadata_arrives(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with Producer({"bootstrap.servers": tansu.bootstrap, **_BREAKER}) as p:
        manager = p.circuit_break_manager
        assert manager is not None
        manager.mute(TopicPartition(topic_name, 0))
        parked_topics = _record_parking(p)
        muted = p.send(topic_name, b"m", partition=0)  # parked: the topic has no metadata yet
        fine = p.send(topic_name, b"f", partition=1)
        assert parked_topics == {topic_name}, "the records were expected to wait for the topic's metadata"
        err = muted.exception(10)
        assert fine.result(10).partition == 1
        assert p.flush(10) == 0
        _assert_memory_returns(p)
    assert isinstance(err, PartitionMutedError) and f"{topic_name}-0" in str(err)
