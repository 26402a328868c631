"""The C send lane (``kproducer._speedups.SendLane``) against its reference, the Python ``send()`` path.

A hypothesis state machine drives the same operations through two producers built identically
on the broker-free rig (``tests/support/producer_rig.py``): in one, ``send()`` is the C lane; in the
other the lane is switched off (``enabled = False``), so every call runs the Python path. Both
share one injected wall clock, so records' timestamps, and so the batches' bytes, must be equal,
and the sticky partitioner's random draws are replayed from one state for both. After every
step the two must agree on: each queued batch's records bytes and counters, in partition order;
each future's relative offset, timestamp and sizes (and partition and offset once completed);
each topic's sticky partition and the bytes counted to it; the delivery callbacks run, with
their metadata; the Produce requests sent. The lane must have taken sends, or the comparison
proves nothing.

The lane is part of the C extension: in the pure-Python pass (``KPRODUCER_PURE_PYTHON=1``)
there is none, and :func:`test_no_lane_in_the_pure_pass` checks that instead. In the native pass
a missing extension fails the test (it is not skipped).
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from kproducer import partitioner as partitioner_module
from kproducer.accumulator import RecordFuture
from kproducer.network.protocol import ApiKey
from kproducer.partitioner import BuiltInPartitioner
from kproducer.record import native
from tests.support.clock import FakeClock
from tests.support.mock_client import batches_of, produce_response
from tests.support.producer_rig import ProducerRig

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C send lane (test_no_lane_in_the_pure_pass)")

TOPICS = {"a": 1, "b": 3, "c": 8}
#: The v2 batch header (KIP-98): the records start after it.
V2_HEADER = 61
#: partitioner.class values whose keyed rule the lane computes (None: Java's murmur2), and compressions.
PARTITIONERS = [None, "murmur2_random", "consistent", "consistent_random", "fnv1a"]
KEYS = [b"", b"k", b"key-1", b"key-2", b"another key", bytes(range(40))]
VALUE_SIZES = [0, 1, 10, 100, 400, 1000, 1500, 3000]


def _accumulator(rig: ProducerRig) -> Any:
    return rig.producer._accumulator


def _lane(rig: ProducerRig) -> Any:
    return rig.producer._lane


class _Side:
    """One producer of the pair and what its sends and callbacks produced."""

    def __init__(self, config: dict[str, Any], wall: FakeClock, lane_on: bool) -> None:
        self.rig = ProducerRig(config, topics=TOPICS, wall_clock=wall)
        if self.rig.config.enable_idempotence:
            self.rig.init_producer_id()
        lane = _lane(self.rig)
        assert lane is not None, "the native pass built no C send lane: is kproducer._speedups built?"
        lane.enabled = lane_on
        self.futures: list[RecordFuture] = []
        self.calls: list[tuple[Any, ...]] = []

    def callback(self, label: int) -> Any:
        def on_completion(metadata: Any, exc: BaseException | None) -> None:
            meta = None if metadata is None else (metadata.topic, metadata.partition, metadata.offset, metadata.timestamp)
            self.calls.append(("callback", label, meta, repr(exc)))

        return on_completion

    def on_delivery(self, label: int) -> Any:
        def report(err: Any, msg: Any) -> None:
            self.calls.append(
                ("on_delivery", label, repr(err), msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())
            )

        return report

    def queued(self, topics: set[str]) -> dict[str, Any]:
        """Each topic's queued batches by partition, and its sticky partitioner's state."""
        acc = _accumulator(self.rig)
        out: dict[str, Any] = {}
        for topic in sorted(topics):
            deques, part = acc.partition_state(topic)
            assert isinstance(part, BuiltInPartitioner)
            batches = {}
            for p, dq in sorted(deques.items()):
                with dq.lock:
                    rows = []
                    for b in dq.batches:
                        builder = b.builder
                        assert builder.magic == 2
                        start = V2_HEADER
                        rows.append(
                            (
                                bytes(builder.buffer_object[start : start + builder.records_size]),
                                builder.num_records,
                                b.record_count,
                                builder.max_timestamp,
                                b.last_append_ms,
                                b.pinned,
                                b.is_full(),
                                b.is_writable,
                            )
                        )
                batches[p] = rows
            out[topic] = (batches, part.sticky_state())
        return out

    def futures_state(self) -> list[tuple[Any, ...]]:
        rows = []
        for f in self.futures:
            row: tuple[Any, ...] = (f.relative_offset, f.create_timestamp, f.serialized_key_size, f.serialized_value_size)
            if f.done():
                exc = f.exception()
                if exc is not None:
                    row += (repr(exc),)
                else:
                    m = f.value()
                    row += (m.topic, m.partition, m.offset, m.timestamp, m.serialized_key_size, m.serialized_value_size)
            rows.append(row)
        return rows

    def sent(self) -> list[dict[Any, bytes]]:
        return [batches_of(body) for body in self.rig.produce_bodies()]


def _same(what: str, lane: Any, python: Any) -> None:
    """``lane == python``, else an error naming the first difference (the whole states are long)."""
    if lane == python:
        return
    if isinstance(lane, dict) and isinstance(python, dict) and lane.keys() == python.keys():
        for k in lane:
            _same(f"{what}[{k!r}]", lane[k], python[k])
    if isinstance(lane, (list, tuple)) and isinstance(python, (list, tuple)) and len(lane) == len(python):
        for i, (a, b) in enumerate(zip(lane, python, strict=True)):
            _same(f"{what}[{i}]", a, b)
    raise AssertionError(f"{what}: the C lane has {lane!r}, the Python path {python!r}")


def make_machine(config: dict[str, Any]) -> type[RuleBasedStateMachine]:
    class LaneTwin(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.wall = FakeClock(1_700_000_000_000)
            self.lane = _Side(config, self.wall, lane_on=True)
            self.python = _Side(config, self.wall, lane_on=False)
            self.topics: set[str] = set()
            self.labels = 0

        def both(self, op: Any) -> None:
            """``op(side)`` on each side, the sticky partitioner's random draws replayed from one state."""
            rng = partitioner_module._SHARED_RNG
            start = rng.getstate()
            op(self.lane)
            after_lane = rng.getstate()
            rng.setstate(start)
            op(self.python)
            assert rng.getstate() == after_lane, "the two paths drew a different number of random partitions"

        @initialize()
        def lane_takes_sends(self) -> None:
            """Each run starts with sends the lane must take (the first to a partition opens its batch
            in Python), so that no run compares two Python paths."""
            taken = _lane(self.lane.rig).fast_calls
            for key in (b"k", None):
                self.send(topic="c", size=10, key=key, notify="callback", partition=None, repeat=3)
            assert _lane(self.lane.rig).fast_calls - taken == 4, "the C lane did not take the sends it should"

        @rule(
            topic=st.sampled_from(sorted(TOPICS)),
            size=st.sampled_from(VALUE_SIZES) | st.none(),
            key=st.sampled_from(KEYS) | st.none(),
            notify=st.sampled_from(["none", "callback", "on_delivery"]),
            partition=st.none() | st.integers(0, 0),
            repeat=st.integers(1, 12),
        )
        def send(self, topic: str, size: int | None, key: bytes | None, notify: str, partition: int | None, repeat: int) -> None:
            self.topics.add(topic)
            value = None if size is None else bytes([self.labels % 251]) * size

            def op(side: _Side) -> None:
                for i in range(repeat):
                    label = self.labels + i
                    kwargs: dict[str, Any] = {}
                    if notify == "callback":
                        kwargs["callback"] = side.callback(label)
                    elif notify == "on_delivery":
                        kwargs["on_delivery"] = side.on_delivery(label)
                    if partition is not None:
                        kwargs["partition"] = partition
                    side.futures.append(side.rig.producer.send(topic, value, key, **kwargs))

            self.both(op)
            self.labels += repeat

        @rule(ms=st.sampled_from([0, 1, 63, 64, 200, 5_000]))
        def time_passes(self, ms: int) -> None:
            self.wall.advance(ms)
            self.lane.rig.clock.advance(ms)
            self.python.rig.clock.advance(ms)

        @rule()
        def sender_loop(self) -> None:
            """One Sender loop: ready batches drained into Produce requests (not answered yet)."""
            self.both(lambda side: side.rig.run())

        @rule()
        def complete(self) -> None:
            """Answer every Produce request in flight, then a loop to complete them (callbacks run)."""

            def op(side: _Side) -> None:
                pending = side.rig.client.pending(ApiKey.PRODUCE)
                side.rig.client.prepare(ApiKey.PRODUCE, *[produce_response(base_offset=1000) for _ in pending])
                side.rig.run()

            self.both(op)

        @invariant()
        def same_state(self) -> None:
            _same("queued batches and sticky partitions", self.lane.queued(self.topics), self.python.queued(self.topics))
            _same("futures", self.lane.futures_state(), self.python.futures_state())
            _same("delivery callbacks", self.lane.calls, self.python.calls)
            _same("Produce requests", self.lane.sent(), self.python.sent())
            _same("Sender wakeups", self.lane.rig.client.wakeups, self.python.rig.client.wakeups)
            assert _lane(self.python.rig).fast_calls == 0

        def teardown(self) -> None:
            try:
                # Everything left is drained and completed too, and compared once more.
                for _ in range(4):
                    self.sender_loop()
                    self.complete()
                self.same_state()
            finally:
                self.lane.rig.close()
                self.python.rig.close()
                LaneTwin.fast_calls += _lane(self.lane.rig).fast_calls

        fast_calls = 0

    return LaneTwin


@pytest.mark.parametrize("compression", ["none", "lz4"])
@pytest.mark.parametrize("partitioner", PARTITIONERS)
@native_only
def test_send_lane_equals_python_send(partitioner: str | None, compression: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    # The topics' partitioners draw from one generator of the test's own, which threads that other
    # tests left running cannot draw from between the two sides' steps.
    monkeypatch.setattr(partitioner_module, "_SHARED_RNG", random.Random(0))
    config: dict[str, Any] = {"batch.size": 1024, "compression.type": compression, "linger.ms": 0}
    if partitioner is not None:
        config["partitioner.class"] = partitioner
    machine = make_machine(config)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        ),
    )
    # Not vacuous: the lane took sends (its counter), so its appends were compared with Python's.
    assert machine.fast_calls >= 4, f"the C lane took only {machine.fast_calls} sends"  # type: ignore[attr-defined]


def test_no_lane_in_the_pure_pass() -> None:
    """The pure pass runs the Python path only; the native pass always has the lane for this config."""
    rig = ProducerRig({"batch.size": 1024}, topics=TOPICS)
    try:
        if PURE:
            assert native.c is None and _lane(rig) is None, "KPRODUCER_PURE_PYTHON=1 must not use the C lane"
        else:
            assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
            assert _lane(rig) is not None
    finally:
        rig.close()
