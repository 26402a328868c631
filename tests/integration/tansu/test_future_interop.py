"""RecordFuture and the standard library: concurrent.futures.wait / as_completed, asyncio.wrap_future, await.

The futures come from a real producer on Tansu (and, for failures, from records
the producer itself fails), so each check goes through the batch latch the
Sender opens. A RecordFuture must stay free of per-record synchronization until
one of these functions waits on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
from typing import Any

import pytest

from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
from kproducer.errors import KafkaError, RecordTooLargeError
from kproducer.producer import Producer
from kproducer.structs import RecordMetadata, TopicPartition
from tests.support.readback import create_topic
from tests.support.tansu import TansuBroker


def _producer(tansu: TansuBroker, **kw: Any) -> Producer:
    cfg: dict[str, Any] = {"bootstrap.servers": tansu.bootstrap, "linger.ms": 5, "max.block.ms": 10_000}
    cfg.update({k.replace("_", "."): v for k, v in kw.items()})
    return Producer(cfg)


def test_record_future_is_a_concurrent_future_without_a_lock(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with _producer(tansu) as p:
        f = p.send(topic_name, b"v")
        assert isinstance(f, cf.Future)
        # Nothing waited on it the standard library's way: no waiter list, no lock of its own.
        assert getattr(f, "_stdlib_waiters", None) is None
        assert not hasattr(f, "__dict__") or not f.__dict__
        md = f.result(10)
        assert isinstance(md, RecordMetadata) and md.topic == topic_name
        assert getattr(f, "_stdlib_waiters", None) is None
        assert f.cancel() is False and not f.cancelled()
        with pytest.raises(TypeError, match="completed by its producer"):
            f.set_result(None)


def test_wait_all_completed_with_some_done_before(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    with _producer(tansu) as p:
        early = [p.send(topic_name, b"e%d" % i) for i in range(50)]
        p.flush(10)
        late = [p.send(topic_name, b"l%d" % i) for i in range(2000)]
        done, not_done = cf.wait(early + late, timeout=20, return_when=cf.ALL_COMPLETED)
        assert not not_done and len(done) == 2050
        assert all(f.done() and f.exception() is None for f in done)
        # The waiter lists were emptied again by wait().
        assert all(not f._waiters for f in early + late)  # type: ignore[attr-defined]


def test_wait_first_completed_returns_as_soon_as_one_is(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu, linger_ms=50) as p:
        fs = [p.send(topic_name, b"x%d" % i) for i in range(10)]
        done, _ = cf.wait(fs, timeout=20, return_when=cf.FIRST_COMPLETED)
        assert done, "wait(FIRST_COMPLETED) returned no future before its timeout"
        assert all(f.done() for f in done)


def test_wait_first_exception_sees_a_failed_record(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu, max_request_size=2000, linger_ms=200) as p:
        ok = [p.send(topic_name, b"ok%d" % i) for i in range(5)]
        bad = p.send(topic_name, b"z" * 5000)  # too large: fails through its future
        done, _ = cf.wait([*ok, bad], timeout=20, return_when=cf.FIRST_EXCEPTION)
        assert bad in done
        assert isinstance(bad.exception(), RecordTooLargeError)


def test_as_completed_yields_each_future_once(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 4)
    with _producer(tansu) as p:
        fs = [p.send(topic_name, b"a%d" % i, b"k%d" % (i % 13)) for i in range(3000)]
        seen = list(cf.as_completed(fs, timeout=30))
        assert len(seen) == len(fs) and set(map(id, seen)) == set(map(id, fs))
        offsets = {(f.result().partition, f.result().offset) for f in seen}
        assert len(offsets) == len(fs), "two records reported the same offset"


def test_wait_races_with_completion_from_many_threads(tansu: TansuBroker, topic_name: str) -> None:
    """Waiters join while the Sender completes batches: none may miss a completion or hear it twice."""
    create_topic(tansu.bootstrap, topic_name, 2)
    errors: list[BaseException] = []
    with _producer(tansu, linger_ms=0) as p:

        def worker(w: int) -> None:
            try:
                for r in range(20):
                    fs = [p.send(topic_name, b"w%d-%d-%d" % (w, r, i)) for i in range(25)]
                    got = list(cf.as_completed(fs, timeout=30))
                    assert len(got) == 25 and len(set(map(id, got))) == 25
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "an as_completed() call hung"
    assert errors == []


def test_wrap_future_and_await_inside_a_running_loop(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with _producer(tansu) as p:

        async def main() -> list[RecordMetadata]:
            wrapped = asyncio.wrap_future(p.send(topic_name, b"wrapped"))
            direct = p.send(topic_name, b"awaited")
            gathered = await asyncio.gather(*(p.send(topic_name, b"g%d" % i) for i in range(100)))
            return [await wrapped, await direct, *gathered]

        out = asyncio.run(main())
        assert len(out) == 102 and all(isinstance(md, RecordMetadata) and md.offset >= 0 for md in out)


def test_await_raises_the_records_exception(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu, max_request_size=2000) as p:

        async def main() -> None:
            with pytest.raises(RecordTooLargeError):
                await p.send(topic_name, b"z" * 5000)
            fut = asyncio.wrap_future(p.send(topic_name, b"z" * 5000))
            with pytest.raises(RecordTooLargeError):
                await fut

        asyncio.run(main())


def test_wait_for_timeout_does_not_unsend(tansu: TansuBroker, topic_name: str) -> None:
    """A loop-side timeout cancels the asyncio wrapper, never the record (a RecordFuture cannot be cancelled)."""
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu, linger_ms=300) as p:

        async def main() -> RecordFuture:
            f = p.send(topic_name, b"late")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.wrap_future(f), 0.001)
            return f

        f = asyncio.run(main())
        assert not f.cancelled()
        assert f.result(20).offset >= 0


def test_split_record_notifies_stdlib_waiters_once() -> None:
    """A record moved to another batch (MESSAGE_TOO_LARGE split) completes its waiters when the new batch does."""
    tp = TopicPartition("t", 0)
    old, new = ProduceRequestResult(tp), ProduceRequestResult(tp)
    f = RecordFuture(old, 0, 1, -1, 1)
    results: list[RecordMetadata] = []

    def waiter() -> None:
        results.extend(fut.result() for fut in cf.as_completed([f], timeout=10))

    t = threading.Thread(target=waiter)
    t.start()
    old.moved = [(new, 3)]
    old.set(-1, -1, lambda _i: KafkaError("split"))
    old.done()
    assert t.is_alive() or results == [], "the waiter must follow the record to its new batch"
    new.set(100, -1, None)
    new.done()
    t.join(10)
    assert [md.offset for md in results] == [103]


def test_done_callback_may_read_the_result_and_flush_waits_for_callbacks(tansu: TansuBroker, topic_name: str) -> None:
    """A done-callback calling result() must not wait on the latch it runs before; flush() returns after it."""
    create_topic(tansu.bootstrap, topic_name, 1)
    seen: list[RecordMetadata] = []
    with _producer(tansu, linger_ms=20) as p:
        futs = [p.send(topic_name, b"c%d" % i) for i in range(200)]
        for f in futs:
            f.add_done_callback(lambda f: seen.append(f.result(5)))
        assert p.flush(20) == 0
        # Callbacks run before the batch's latch opens, so flush() found them all done.
        assert len(seen) == 200 and all(md.offset >= 0 for md in seen)
