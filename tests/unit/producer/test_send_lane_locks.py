"""The C send lane (``kproducer._speedups.SendLane``) takes the locks the Python ``send()`` path takes.

Every append takes the partition deque's lock for real (a non-blocking try, then a blocking
acquire when another thread holds it) and releases it on every way out; a keyless record's bytes
are counted to the sticky partition under the partitioner's lock. Nothing relies on the GIL to
stand in for a lock. The locks are replaced by recording ones, so each call is seen.

The lane is part of the C extension: these tests run in the native pass, where a missing
extension fails them; the pure-Python pass has no lane (``test_send_lane_twin.py`` checks that).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from kproducer.network.protocol import ApiKey
from kproducer.record import native
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C send lane (test_no_lane_in_the_pure_pass)")


def _accumulator(rig: ProducerRig) -> Any:
    return rig.producer._accumulator


def _lane(rig: ProducerRig) -> Any:
    return rig.producer._lane


class _RecordingLock:
    """A threading.Lock that records its calls; ``busy`` non-blocking tries report it taken."""

    def __init__(self, busy: int = 0) -> None:
        self._lock = threading.Lock()
        self.busy = busy
        self.calls: list[str] = []
        self.waiting = threading.Event()  # set when a blocking acquire() starts

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking and self.busy > 0:
            self.busy -= 1
            self.calls.append("try-busy")
            return False
        if blocking:
            self.calls.append("acquire")
            self.waiting.set()
            return self._lock.acquire(blocking, timeout)
        got = self._lock.acquire(False)
        self.calls.append("try" if got else "try-busy")
        return got

    def release(self) -> None:
        self.calls.append("release")
        self._lock.release()

    def locked(self) -> bool:
        self.calls.append("locked")
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("keyed", [False, True])
@native_only
def test_the_lane_takes_the_deque_and_partitioner_locks_for_every_append(keyed: bool) -> None:
    """Every append takes the partition deque's lock (and, keyless, the sticky partitioner's) for real:
    a non-blocking try, a blocking acquire when that fails, and a release on every path."""
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    rig = ProducerRig({"batch.size": 16384}, topics={"a": 1})
    try:
        rig.init_producer_id()
        key = b"k" if keyed else None
        futures = [rig.producer.send("a", b"first", key)]  # the Python path: registers the topic, opens a batch
        deques, part = _accumulator(rig).partition_state("a")
        dq_lock = deques[0].lock = _RecordingLock(busy=2)
        p_lock = _RecordingLock(busy=1)
        part._lock = p_lock  # the partitioner's own lock, watched (a test's look inside)
        lane = _lane(rig)
        before = lane.fast_calls
        futures += [rig.producer.send("a", b"v%d" % i, key) for i in range(5)]
        assert lane.fast_calls - before == 5, "the lane did not take the sends"
        # The first two tries find the deque lock busy: those appends wait with a blocking acquire.
        assert dq_lock.calls == ["try-busy", "acquire", "release", "try-busy", "acquire", "release"] + [
            "try",
            "release",
        ] * 3
        if keyed:
            assert p_lock.calls == []  # a keyed record counts no sticky bytes
        else:
            assert p_lock.calls == ["try-busy", "acquire", "release"] + ["try", "release"] * 4
        # A record that does not fit the batch's room is handed to Python (which grows the batch,
        # KIP-782): the lane released the lock before that.
        dq_lock.calls.clear()
        futures.append(rig.producer.send("a", b"x" * 20_000, key))
        assert lane.fast_calls - before == 5
        assert dq_lock.calls[:2] == ["try", "release"]
        assert dq_lock.calls.count("release") == dq_lock.calls.count("try") + dq_lock.calls.count("acquire")
        assert "locked" not in dq_lock.calls + p_lock.calls
        assert not dq_lock._lock.locked() and not p_lock._lock.locked()
        # And the records went out as sent, in order, under the locks the test put there.
        rig.client.prepare(ApiKey.PRODUCE, *[produce_response(base_offset=0) for _ in range(4)])
        rig.run_until(lambda: all(f.done() for f in futures), loops=20)
        assert [f.result().offset for f in futures] == list(range(7))
        assert rig.values(TopicPartition("a", 0)) == [[b"first", *(b"v%d" % i for i in range(5)), b"x" * 20_000]]
    finally:
        rig.close()


@native_only
def test_a_lane_append_waits_for_a_deque_lock_another_thread_holds() -> None:
    """The lane blocks in acquire() while another thread holds the deque's lock, letting go of the GIL
    (this thread goes on meanwhile), writes nothing until it has the lock, then appends."""
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    rig = ProducerRig({"batch.size": 16384}, topics={"a": 1})
    try:
        rig.init_producer_id()
        first = rig.producer.send("a", b"first", b"k")  # the Python path: registers the topic, opens a batch
        deques, _part = _accumulator(rig).partition_state("a")
        dq = deques[0]
        batch = dq.batches[-1]
        lock = dq.lock = _RecordingLock()
        lane = _lane(rig)
        before = lane.fast_calls
        futures: list[Any] = []
        lock._lock.acquire()  # held by this thread, as a draining Sender would
        try:
            caller = threading.Thread(target=lambda: futures.append(rig.producer.send("a", b"late", b"k")))
            caller.start()
            assert lock.waiting.wait(60), "the lane never waited for the lock"
            # This thread runs while the caller waits (its acquire() let go of the GIL), and nothing
            # was written to the batch without the lock.
            assert batch.record_count == 1 and not futures
        finally:
            lock._lock.release()
        caller.join(60)
        assert not caller.is_alive()
        assert lock.calls == ["try-busy", "acquire", "release"]
        assert lane.fast_calls - before == 1 and batch.record_count == 2
        rig.client.prepare(ApiKey.PRODUCE, produce_response(base_offset=0))
        rig.run_until(lambda: futures[0].done(), loops=20)
        assert (first.result().offset, futures[0].result().offset) == (0, 1)
        assert rig.values(TopicPartition("a", 0)) == [[b"first", b"late"]]
    finally:
        rig.close()


@pytest.mark.parametrize("keyed", [False, True])
@native_only
def test_the_lane_takes_the_native_lock_through_c_and_waits_for_its_holder(keyed: bool) -> None:
    """With the deque's own ``kproducer._speedups.Lock`` (what the native pass creates), the lane takes
    and releases it through C: it is free after every send, and a send waits while another thread holds it."""
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    rig = ProducerRig({"batch.size": 16384}, topics={"a": 1})
    try:
        rig.init_producer_id()
        key = b"k" if keyed else None
        futures = [rig.producer.send("a", b"first", key)]
        deques, part = _accumulator(rig).partition_state("a")
        dq_lock = deques[0].lock
        assert type(dq_lock) is native.c.Lock, "the native pass must create the deque lock with new_lock()"
        assert type(part._lock) is native.c.Lock  # the partitioner's own lock (a test's look inside)
        lane = _lane(rig)
        before = lane.fast_calls
        for i in range(3):
            futures.append(rig.producer.send("a", b"v%d" % i, key))
            assert lane.fast_calls - before == i + 1, "the lane did not take the send"
            assert not dq_lock.locked() and not part._lock.locked(), "the lane left a lock held"
        # Another thread holds the deque lock: a send in a second thread waits for it.
        started, done = threading.Event(), threading.Event()
        sent: list[Any] = []

        def sender() -> None:
            started.set()
            sent.append(rig.producer.send("a", b"waited", key))
            done.set()

        with dq_lock:
            worker = threading.Thread(target=sender)
            worker.start()
            assert started.wait(60), "the sender thread did not start"
            assert not done.wait(0.2), "send() returned while another thread held the deque lock"
        worker.join(60)
        assert done.is_set() and not worker.is_alive(), "send() did not finish after the lock was released"
        assert lane.fast_calls - before == 4, "the lane did not take the waiting send"
        assert not dq_lock.locked() and not part._lock.locked()
        futures += sent
        rig.client.prepare(ApiKey.PRODUCE, *[produce_response(base_offset=0) for _ in range(2)])
        rig.run_until(lambda: all(f.done() for f in futures), loops=20)
        assert [f.result().offset for f in futures] == list(range(5))
        assert rig.values(TopicPartition("a", 0)) == [[b"first", b"v0", b"v1", b"v2", b"waited"]]
    finally:
        rig.close()
