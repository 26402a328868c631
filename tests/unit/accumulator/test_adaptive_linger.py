"""The adaptive linger (accumulator/adaptive_linger.py) on injected clocks; the producer that
uses it is in tests/unit/sender/test_sender_adaptive_linger.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.accumulator.adaptive_linger import (
    MAX_SENDER_SHARE,
    MAX_STRETCH_MS,
    MIN_BATCHES,
    STRETCHED_READY_FACTOR,
    WINDOW_MS,
    AdaptiveLinger,
)


class CpuClock:
    """The Sender thread's CPU time in ms, moved by the test."""

    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


def _window(policy: AdaptiveLinger, cpu: CpuClock, now: int, *, batches: int, elapsed: int, sender_ms: float) -> int:
    """One window: a drain at ``now + elapsed`` after ``sender_ms`` of Sender CPU; the new time."""
    cpu.ms += sender_ms
    now += elapsed
    policy.on_drain(batches, now)
    return now


def _started(linger_ms: int = 5) -> tuple[AdaptiveLinger, CpuClock, int]:
    cpu = CpuClock()
    policy = AdaptiveLinger(linger_ms, sender_cpu_ms=cpu)
    policy.on_drain(1, 1_000)  # the first drain opens the first window
    return policy, cpu, 1_000


# ---------------------------------------------------------------------- the policy


def test_it_is_linger_ms_until_a_window_says_otherwise() -> None:
    policy, cpu, now = _started()
    assert policy.linger_ms == 5 and not policy.stretched and policy.configured_ms == 5
    # A busy Sender, but the window is not over yet: nothing decided.
    _window(policy, cpu, now, batches=1_000, elapsed=WINDOW_MS - 1, sender_ms=WINDOW_MS - 1)
    assert policy.linger_ms == 5


def test_a_busy_sender_draining_many_batches_stretches_it_to_the_cap() -> None:
    policy, cpu, now = _started()
    _window(policy, cpu, now, batches=MIN_BATCHES, elapsed=40, sender_ms=12)
    # The Sender took 12 ms of 40, above its share: the longest linger, whatever the share.
    assert MAX_SENDER_SHARE * 40 < 12
    assert policy.linger_ms == MAX_STRETCH_MS and policy.stretched


def test_few_batches_leave_it_at_linger_ms_however_busy_the_sender() -> None:
    policy, cpu, now = _started()
    _window(policy, cpu, now, batches=MIN_BATCHES - 1, elapsed=40, sender_ms=40)
    assert policy.linger_ms == 5


def test_a_sender_under_its_share_leaves_it_at_linger_ms() -> None:
    policy, cpu, now = _started()
    _window(policy, cpu, now, batches=10_000, elapsed=100, sender_ms=MAX_SENDER_SHARE * 100 - 1)
    assert policy.linger_ms == 5


def test_a_linger_ms_above_the_cap_stays_linger_ms() -> None:
    policy, cpu, now = _started(linger_ms=MAX_STRETCH_MS + 50)
    _window(policy, cpu, now, batches=1_000, elapsed=1_000, sender_ms=1_000)
    assert policy.linger_ms == MAX_STRETCH_MS + 50 and not policy.stretched


def test_the_producer_s_lingering_budget_caps_it_too() -> None:
    """max_ms (delivery.timeout.ms - request.timeout.ms): a stretched linger never makes a record expire."""
    cpu = CpuClock()
    policy = AdaptiveLinger(5, max_ms=40, sender_cpu_ms=cpu)
    policy.on_drain(1, 0)
    _window(policy, cpu, 0, batches=1_000, elapsed=100, sender_ms=100)
    assert policy.linger_ms == 40
    # No budget at all (delivery.timeout.ms under request.timeout.ms): linger.ms, always.
    policy = AdaptiveLinger(5, max_ms=-1, sender_cpu_ms=cpu)
    policy.on_drain(1, 0)
    _window(policy, cpu, 0, batches=1_000, elapsed=100, sender_ms=100)
    assert policy.linger_ms == 5


def test_stretched_it_stays_while_the_drains_take_many_batches_and_returns_when_they_do_not() -> None:
    policy, cpu, now = _started()
    now = _window(policy, cpu, now, batches=1_000, elapsed=20, sender_ms=10)
    assert policy.linger_ms == MAX_STRETCH_MS
    # Under its share now (the linger did its work): it stays stretched, not back to linger.ms
    # (which would bring the busy Sender back at the next window), and not shorter: a linger set
    # from the Sender's cost would shorten whenever the Sender got cheaper.
    now = _window(policy, cpu, now, batches=1_000, elapsed=250, sender_ms=1)
    assert policy.linger_ms == MAX_STRETCH_MS
    # The callers slowed down: the drains take few batches, and linger.ms is back.
    _window(policy, cpu, now, batches=3, elapsed=100, sender_ms=9)
    assert policy.linger_ms == 5 and not policy.stretched


def test_stretched_a_new_batch_is_full_at_a_multiple_of_batch_size_within_batch_max_size() -> None:
    policy, cpu, now = _started()
    assert policy.ready_size(16_384, 262_144) == 16_384
    _window(policy, cpu, now, batches=1_000, elapsed=20, sender_ms=10)
    assert policy.ready_size(16_384, 262_144) == STRETCHED_READY_FACTOR * 16_384
    assert policy.ready_size(16_384, 40_000) == 40_000  # batch.max.size bounds it
    assert policy.ready_size(16_384, 16_384) == 16_384  # no growth configured: batch.size


def test_the_largest_drain_of_a_window_counts_not_their_sum() -> None:
    policy, cpu, now = _started()
    # A few partitions drained often: many batches in all, none in one drain.
    for _ in range(4):
        now = _window(policy, cpu, now, batches=MIN_BATCHES - 1, elapsed=WINDOW_MS // 4, sender_ms=4)
    assert policy.linger_ms == 5
    # A pass split into requests by max.request.size: one large drain, then the rest of it.
    now = _window(policy, cpu, now, batches=MIN_BATCHES, elapsed=WINDOW_MS // 2, sender_ms=4)
    _window(policy, cpu, now, batches=3, elapsed=WINDOW_MS // 2, sender_ms=4)
    assert policy.linger_ms == MAX_STRETCH_MS


def test_a_clock_that_did_not_move_decides_nothing() -> None:
    policy, cpu, now = _started()
    _window(policy, cpu, now, batches=1_000, elapsed=0, sender_ms=50)
    assert policy.linger_ms == 5


def test_a_negative_linger_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"linger\.ms must be >= 0, got -1"):
        AdaptiveLinger(-1)


@settings(max_examples=300, deadline=None)
@given(
    linger_ms=st.integers(0, 400),
    windows=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 500), st.floats(0, 500, allow_nan=False)), max_size=30
    ),
)
def test_it_stays_between_linger_ms_and_the_cap(linger_ms: int, windows: list[tuple[int, int, float]]) -> None:
    cpu = CpuClock()
    policy = AdaptiveLinger(linger_ms, sender_cpu_ms=cpu)
    now = 0
    for batches, elapsed, sender_ms in windows:
        now = _window(policy, cpu, now, batches=batches, elapsed=elapsed, sender_ms=sender_ms)
        assert linger_ms <= policy.linger_ms <= max(linger_ms, MAX_STRETCH_MS)


@settings(max_examples=200, deadline=None)
@given(
    windows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 500), st.floats(0, 500, allow_nan=False)), max_size=40)
)
def test_fewer_batches_than_a_window_needs_never_stretch_it(windows: list[tuple[int, int, float]]) -> None:
    """However busy the Sender: only a drain of MIN_BATCHES batches or more stretches it."""
    cpu = CpuClock()
    policy = AdaptiveLinger(5, sender_cpu_ms=cpu)
    now = 0
    for batches, elapsed, sender_ms in windows:  # drains of at most 3 batches each
        now = _window(policy, cpu, now, batches=batches, elapsed=elapsed, sender_ms=sender_ms)
        assert policy.linger_ms == 5


def test_the_linger_ms_reference_names_the_cap() -> None:
    """docs/configuration.md is generated from the key table, which states the cap in words."""
    from kproducer.config.keys import CONFIG_KEYS

    (key,) = [k for k in CONFIG_KEYS if k.name == "linger.ms"]
    assert f"up to {MAX_STRETCH_MS} ms" in key.doc
