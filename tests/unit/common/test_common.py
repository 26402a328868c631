"""kproducer.common: the shared clock, backoff and class loader."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproducer.common import ExponentialBackoff, load_object, monotonic_ms
from kproducer.errors import ConfigError


def test_monotonic_ms_is_integer_milliseconds_of_the_monotonic_clock() -> None:
    before = time.monotonic_ns() // 1_000_000
    now = monotonic_ms()
    after = time.monotonic_ns() // 1_000_000
    assert isinstance(now, int) and before <= now <= after


@given(
    initial=st.integers(0, 10_000),
    maximum=st.integers(0, 100_000),
    jitter=st.sampled_from([0.0, 0.2, 1.0]),
    attempts=st.integers(0, 64),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_java_exponential_backoff(initial: int, maximum: int, jitter: float, attempts: int, seed: int) -> None:
    b = ExponentialBackoff(initial, maximum, jitter=jitter, rng=random.Random(seed))
    cap = max(initial, maximum)
    value = b.backoff(attempts)
    assert 0 <= value <= cap  # the jitter never takes it past the maximum
    if cap == initial:
        assert value == initial  # constant, without jitter
    else:
        term = min(initial * 2**attempts, cap)
        assert int(term * (1 - jitter)) - 1 <= value <= min(cap, int(term * (1 + jitter)) + 1)


def test_backoff_without_jitter_doubles_to_exactly_the_maximum() -> None:
    b = ExponentialBackoff(100, 1000, jitter=0.0)
    assert [b.backoff(a) for a in range(6)] == [100, 200, 400, 800, 1000, 1000]
    with pytest.raises(ValueError, match="jitter"):
        ExponentialBackoff(100, 1000, jitter=1.5)


def test_load_object_reads_both_path_forms() -> None:
    assert load_object("kproducer.common:ExponentialBackoff") is ExponentialBackoff
    assert load_object("kproducer.common.ExponentialBackoff") is ExponentialBackoff
    assert load_object("kproducer.common:ExponentialBackoff.backoff") is ExponentialBackoff.backoff


def test_load_object_without_a_key_raises_pythons_errors() -> None:
    with pytest.raises(ImportError, match="not a 'module:Name' path"):
        load_object("nodots")
    with pytest.raises(ImportError):
        load_object("no_such_module_xyz:Thing")
    with pytest.raises(AttributeError):
        load_object("kproducer.common:Nope")


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        ("nodots", r"^some\.class: 'nodots' is not a known name nor a dotted path; must be a class"),
        ("no_such_module_xyz:T", r"^some\.class: cannot import module 'no_such_module_xyz' from 'no_such_module_xyz:T'"),
        ("kproducer.common:Nope", r"^some\.class: module 'kproducer.common' has no attribute 'Nope'"),
    ],
)
def test_load_object_with_a_key_names_it(path: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_object(path, "some.class", "must be a class")
