"""librdkafka's partitioners against references written from librdkafka's documented algorithms and its test vectors."""

from __future__ import annotations

import binascii
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.librdkafka_partitioners import (
    LIBRDKAFKA_PARTITIONERS,
    STICKY,
    ConsistentPartitioner,
    ConsistentRandomPartitioner,
    Fnv1aPartitioner,
    Fnv1aRandomPartitioner,
    LibrdkafkaPartitioner,
    Murmur2Partitioner,
    Murmur2RandomPartitioner,
    RandomPartitioner,
    fnv1a,
)
from kproducer.murmur2 import murmur2
from kproducer.partitioner import resolve_partitioner
from tests.unit.partitioner.test_partitioner import make_cluster

# librdkafka's own unit-test vectors (rdfnv1a.c's unittest_fnv1a: Go's hash/fnv results; rdmurmur2.c's
# unittest_murmur2: the Java client's results). The unaligned keys are the same bytes as their suffixes.
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_KEYS = [b"kafka", b"giberish123456789", b"1234", b"234", b"34", b"4"] + [_UNALIGNED[i:] for i in range(4)] + [b""]
FNV1A_VECTORS = [
    0xD33C4E1, 0x77A58295, 0x23BDD03, 0x2DEA3CD2, 0x740FA83E, 0x310CA263, 0x65CBD69C, 0x6E49C79A, 0x69EED356,
    0x6ABCC023, 0x7EE3623B,
]  # fmt: skip
MURMUR2_VECTORS = [
    0xD067CF64, 0x8F552B0C, 0x9FC97B14, 0xE7C009CA, 0x873930DA, 0x5A4B5CA1, 0x78424F1C, 0x4A62B377, 0xE0E4E09E,
    0x62B8B43F, 0x106E08D9,
]  # fmt: skip


def _signed32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def reference_fnv1a(data: bytes) -> int:
    """rdfnv1a.c read literally: int32 arithmetic, then h = -h when negative, returned as uint32."""
    h = _signed32(0x811C9DC5)
    for byte in data:
        h = _signed32(h ^ byte)
        h = _signed32(h * 0x01000193)
    if h < 0:
        h = _signed32(-h)
    return h & 0xFFFFFFFF


def reference(name: str, key: bytes, n: int) -> int | None:
    """librdkafka's choice for a non-null key (None: not hashed, the sticky/random path)."""
    if name in ("consistent", "consistent_random"):
        if name == "consistent_random" and not key:
            return None
        return (binascii.crc32(key) & 0xFFFFFFFF) % n
    if name in ("murmur2", "murmur2_random"):
        return (murmur2(key) & 0x7FFFFFFF) % n
    if name in ("fnv1a", "fnv1a_random"):
        return reference_fnv1a(key) % n
    raise AssertionError(name)


HASHING = sorted(set(LIBRDKAFKA_PARTITIONERS) - {"random"})


def test_vectors_from_librdkafka_unit_tests() -> None:
    assert [fnv1a(k) for k in LIBRDKAFKA_KEYS] == FNV1A_VECTORS
    assert [reference_fnv1a(k) for k in LIBRDKAFKA_KEYS] == FNV1A_VECTORS
    assert [murmur2(k) & 0xFFFFFFFF for k in LIBRDKAFKA_KEYS] == MURMUR2_VECTORS


@settings(max_examples=400, deadline=None)
@given(key=st.binary(max_size=64), n=st.integers(1, 10_000), name=st.sampled_from(HASHING))
def test_every_hashing_policy_matches_the_reference(key: bytes, n: int, name: str) -> None:
    partitioner = LIBRDKAFKA_PARTITIONERS[name]()
    expected = reference(name, key, n)
    cluster = make_cluster(n)
    got = partitioner.partition("t", key, key, b"v", b"v", cluster)
    assert got == (STICKY if expected is None else expected)
    if expected is not None:
        assert partitioner.for_key(key, n) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_fnv1a_matches_the_int32_reading_of_rdfnv1a(data: bytes) -> None:
    assert fnv1a(data) == reference_fnv1a(data)


def test_negative_fnv_hash_is_negated_and_int_min_stays() -> None:
    # A key whose FNV-1a is negative as int32 is negated; 0x80000000 has no positive twin.
    negative = next(k for k in (bytes([i, j]) for i in range(256) for j in range(256)) if _fnv_raw(k) & 0x80000000)
    assert fnv1a(negative) == (-_signed32(_fnv_raw(negative))) & 0xFFFFFFFF
    assert fnv1a(negative) < 0x80000000


def _fnv_raw(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


@pytest.mark.parametrize("name", sorted(LIBRDKAFKA_PARTITIONERS))
def test_keyless_records_go_to_the_sticky_partition_except_with_random(name: str) -> None:
    partitioner = LIBRDKAFKA_PARTITIONERS[name]()
    cluster = make_cluster(7)
    got = partitioner.partition("t", None, None, b"v", b"v", cluster)
    if name == "random":
        assert 0 <= got < 7
    else:
        assert got == STICKY


def test_empty_keys_follow_each_policy() -> None:
    cluster = make_cluster(5)
    assert ConsistentRandomPartitioner().partition("t", b"", b"", None, None, cluster) == STICKY
    assert ConsistentPartitioner().partition("t", b"", b"", None, None, cluster) == 0  # CRC32(b"") == 0
    assert Murmur2Partitioner().partition("t", b"", b"", None, None, cluster) == (0x106E08D9 & 0x7FFFFFFF) % 5
    assert Murmur2RandomPartitioner().partition("t", b"", b"", None, None, cluster) == (0x106E08D9 & 0x7FFFFFFF) % 5
    assert Fnv1aPartitioner().partition("t", b"", b"", None, None, cluster) == 0x7EE3623B % 5
    assert Fnv1aRandomPartitioner().partition("t", b"", b"", None, None, cluster) == 0x7EE3623B % 5


def test_random_spreads_every_record_and_redraws_once_for_a_partition_without_leader() -> None:
    partitioner = RandomPartitioner(random.Random(7))
    cluster = make_cluster(4, unavailable=[0])
    counts = Counter(partitioner.partition("t", b"k", b"k", None, None, cluster) for _ in range(4000))
    assert set(counts) <= {0, 1, 2, 3} and set(counts) >= {1, 2, 3}
    # Partition 0 is drawn only when both draws land on it: about 1/16 of the time, not 1/4.
    assert counts[0] < counts[1] / 2


@pytest.mark.parametrize("name", sorted(LIBRDKAFKA_PARTITIONERS))
def test_partitioner_class_resolves_librdkafka_names(name: str) -> None:
    resolved = resolve_partitioner(name)
    assert isinstance(resolved, LibrdkafkaPartitioner) and type(resolved).name == name
    assert type(resolve_partitioner(name.upper())) is type(resolved)


def test_unknown_name_lists_librdkafka_policies() -> None:
    from kproducer.errors import ConfigError

    with pytest.raises(ConfigError, match="consistent_random"):
        resolve_partitioner("murmur3_random")
