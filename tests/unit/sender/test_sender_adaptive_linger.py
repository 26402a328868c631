"""The adaptive linger in the whole producer, on the scripted client and the fake clock, with a CPU
clock the test moves for the Sender's thread (tests/support/producer_rig.py): a stretched linger
holds the next batches, a full batch and a flush do not wait for it, and without a CPU clock a test
clock keeps linger.ms. The policy itself: tests/unit/accumulator/test_adaptive_linger.py.
"""

from __future__ import annotations

from typing import Any

from kproducer.accumulator.adaptive_linger import MAX_STRETCH_MS, STRETCHED_READY_FACTOR, WINDOW_MS
from kproducer.network.protocol import ApiKey
from tests.support.latch import LATCH_S
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig, flush_in_thread


class CpuClock:
    """The Sender thread's CPU time in ms, moved by the test."""

    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


PARTITIONS = 40  # one leader, and more partitions than MIN_BATCHES


def _rig(make_rig: MakeRig, cpu: CpuClock, config: dict[str, Any] | None = None) -> ProducerRig:
    return make_rig({"linger.ms": 5, **(config or {})}, topics={"t": PARTITIONS}, nodes=1, sender_cpu_clock=cpu)


def _one_per_partition(rig: ProducerRig) -> list[Any]:
    return [rig.send(b"r", partition=p) for p in range(PARTITIONS)]


def _stretch(rig: ProducerRig, cpu: CpuClock) -> int:
    """Two rounds of one record per partition, the second after a window in which the Sender was busy."""
    _one_per_partition(rig)
    rig.clock.advance(5)
    rig.client.prepare(ApiKey.PRODUCE, produce_response())
    rig.run()  # the first drain opens the window
    _one_per_partition(rig)
    rig.clock.advance(WINDOW_MS)
    cpu.ms += 10  # half the window: well over the share
    rig.client.prepare(ApiKey.PRODUCE, produce_response())
    rig.run()
    assert len(rig.produce_bodies()) == 2
    return MAX_STRETCH_MS


def test_a_stretched_linger_holds_the_next_batches_until_it_has_passed(make_rig: MakeRig) -> None:
    cpu = CpuClock()
    rig = _rig(make_rig, cpu)
    stretched = _stretch(rig, cpu)
    futs = _one_per_partition(rig)
    rig.clock.advance(5)
    rig.run()
    assert len(rig.produce_bodies()) == 2  # linger.ms has passed, the effective linger has not
    rig.clock.advance(stretched - 5 - 1)
    rig.run()
    assert len(rig.produce_bodies()) == 2
    rig.clock.advance(1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response())
    rig.run()
    assert len(rig.produce_bodies()) == 3
    assert all(f.exception(0) is None for f in futs)


def test_stretched_a_batch_grows_past_batch_size_and_goes_at_once_when_full(make_rig: MakeRig) -> None:
    """Opened while the linger is stretched, a batch is full at STRETCHED_READY_FACTOR times
    batch.size (it grows as KIP-782 lets a hot batch grow); full, it does not wait for the linger."""
    cpu = CpuClock()
    rig = _rig(make_rig, cpu, {"batch.size": 1024})
    _stretch(rig, cpu)
    futs = [rig.send(b"x" * 600, partition=3) for _ in range(2)]  # past batch.size, under the stretched size
    rig.run()  # the clock has not moved
    assert len(rig.produce_bodies()) == 2
    per_full = STRETCHED_READY_FACTOR * 1024 // 600
    futs += [rig.send(b"x" * 600, partition=3) for _ in range(per_full - 1)]  # past it now
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    rig.run()
    (body,) = rig.produce_bodies()[2:]
    assert len(body.partitions) == 1
    assert [f.result(0).offset for f in futs] == list(range(9, 9 + len(futs)))


def test_stretched_a_batch_that_may_not_grow_is_full_at_batch_size(make_rig: MakeRig) -> None:
    cpu = CpuClock()
    rig = _rig(make_rig, cpu, {"batch.size": 1024, "batch.max.size": 1024})
    _stretch(rig, cpu)
    futs = [rig.send(b"x" * 600, partition=3) for _ in range(2)]  # the second opens a batch behind the first
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    rig.run()  # the clock has not moved
    assert futs[0].result(0).offset == 9


def test_flush_sends_at_once_when_the_linger_is_stretched(make_rig: MakeRig) -> None:
    cpu = CpuClock()
    rig = _rig(make_rig, cpu)
    _stretch(rig, cpu)
    futs = _one_per_partition(rig)
    rig.run()
    assert len(rig.produce_bodies()) == 2
    thread, result = flush_in_thread(rig)
    rig.client.prepare(ApiKey.PRODUCE, produce_response())
    rig.run()  # the clock has not moved: only the flush makes them ready
    thread.join(LATCH_S)
    assert result == [0]
    assert all(f.exception(0) is None for f in futs)


def test_without_a_cpu_clock_a_test_clock_keeps_linger_ms(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 5}, topics={"t": PARTITIONS}, nodes=1)
    for _ in range(3):
        _one_per_partition(rig)
        rig.clock.advance(WINDOW_MS)
        rig.client.prepare(ApiKey.PRODUCE, produce_response())
        rig.run()
    futs = _one_per_partition(rig)
    rig.clock.advance(5)
    rig.client.prepare(ApiKey.PRODUCE, produce_response())
    rig.run()
    assert len(rig.produce_bodies()) == 4  # sent at linger.ms, as configured
    assert all(f.exception(0) is None for f in futs)
