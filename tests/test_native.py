"""The C hot path (kproducer._speedups) against its pure-Python twin (kproducer.record.native.py).

Both must write the same bytes, make the same room decisions and pick the same
partitions; the reader must decode what they write. These tests compare the two
implementations directly, so they run the same whichever one the process uses.
"""

from __future__ import annotations

import os
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.partitioner import murmur2
from kproducer.record import native
from kproducer.record.builder import MemoryRecordsBuilder, _encode_headers
from kproducer.record.reader import read_batches


def _c() -> object:
    """The C module; `make test` builds it, so its absence is a build failure, not a skip."""
    try:
        from kproducer import _speedups
    except ImportError as e:
        pytest.fail(f"kproducer._speedups is not built ({e}); `pip install -e .` compiles src/kproducer/_speedups.c")
    return _speedups


def test_env_switch_selects_implementation() -> None:
    forced = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
    assert native.AVAILABLE is (not forced)
    assert (native.append_record == native.py.append_record) is forced


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_agrees(data: bytes) -> None:
    assert _c().murmur2(data) == murmur2(data) == native.py.murmur2(data)  # type: ignore[attr-defined]


def test_murmur2_java_vectors() -> None:
    # From Kafka's UtilsTest.testMurmur2.
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for data, expected in vectors.items():
        assert _c().murmur2(data) == expected  # type: ignore[attr-defined]


keys_values = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(st.tuples(keys_values, keys_values), min_size=1, max_size=40),
    ts_delta=st.integers(min_value=-(2**40), max_value=2**40),
    limit=st.integers(min_value=61, max_value=4000),
    ratio=st.sampled_from([0.0, 0.3, 1.0, 1.7]),
    headers=st.one_of(st.none(), st.just([("h", b"v"), ("n", None)])),
)
def test_append_record_same_bytes_and_room(
    records: list[tuple[bytes | None, bytes | None]], ts_delta: int, limit: int, ratio: float, headers: list | None
) -> None:
    enc = _encode_headers(headers)[0] if headers else None
    out = []
    for impl in (_c(), native.py):
        buf = bytearray(61)
        pos, n, decisions = 61, 0, []
        for key, value in records:
            new = impl.append_record(buf, pos, limit, 61, ratio, n, ts_delta if n else 0, key, value, enc)  # type: ignore[attr-defined]
            decisions.append(new)
            if new >= 0:
                pos, n = new, n + 1
        out.append((bytes(buf[:pos]), decisions))
    assert out[0] == out[1]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(keys_values, min_size=1, max_size=60),
    keyed=st.booleans(),
    limit=st.integers(min_value=100, max_value=3000),
    ratio=st.sampled_from([0.0, 0.5, 1.2]),
)
def test_append_seq_and_arrow_agree_with_pure(values: list[bytes | None], keyed: bool, limit: int, ratio: float) -> None:
    keys = [v[:3] if v is not None else None for v in values] if keyed else None
    n = len(values)
    results = []
    for impl in (_c(), native.py):
        buf = bytearray(61)
        got = impl.append_seq(buf, 61, limit, 61, ratio, 0, 0, values, keys, None, 0, n, None)  # type: ignore[attr-defined]
        # The bytes written are buf[:pos]; the C side may leave spare capacity after them.
        results.append((got, bytes(buf[: got[0]])))
    assert results[0] == results[1]
    varr = pa.array(values, pa.binary())
    vcol = (varr.buffers()[1], varr.buffers()[2], varr.buffers()[0], varr.offset, len(varr), 4)
    kcol = None
    if keys is not None:
        karr = pa.array(keys, pa.large_binary())
        kcol = (karr.buffers()[1], karr.buffers()[2], karr.buffers()[0], karr.offset, len(karr), 8)
    for impl in (_c(), native.py):
        buf = bytearray(61)
        got = impl.append_arrow(buf, 61, limit, 61, ratio, 0, 0, vcol, kcol, None, 0, n, None)  # type: ignore[attr-defined]
        assert (got, bytes(buf[: got[0]])) == results[0]


def test_append_many_with_indices_and_sliced_arrow() -> None:
    values = [f"value-{i}".encode() for i in range(50)]
    arr = pa.array(values, pa.string()).slice(10, 30)
    col = (arr.buffers()[1], arr.buffers()[2], None, arr.offset, len(arr), 4)
    idx = struct.pack("<3q", 29, 0, 7)
    for impl in (_c(), native.py):
        buf = bytearray(61)
        pos, count = impl.append_arrow(buf, 61, 10_000, 61, 0.0, 0, 0, col, None, idx, 0, 3, None)  # type: ignore[attr-defined]
        assert count == 3
        builder = MemoryRecordsBuilder(bytearray(61), write_limit=10_000)
        for row in (39, 10, 17):
            builder.append(0, None, values[row])
        builder.close()
        assert bytes(buf[61:pos]) == bytes(builder.buffer()[61:])


def test_partition_groups_keep_order_and_put_null_keys_last() -> None:
    keys = [f"k{i % 13}".encode() if i % 5 else None for i in range(200)]
    for impl in (_c(), native.py):
        groups = impl.partition_seq(keys, 0, 200, 7)  # type: ignore[attr-defined]
        assert len(groups) == 8
        rows = [list(struct.unpack(f"<{len(g) // 8}q", g)) for g in groups]
        for p, r in enumerate(rows[:7]):
            assert r == sorted(r)
            assert all((murmur2(keys[i]) & 0x7FFFFFFF) % 7 == p for i in r)  # type: ignore[arg-type]
        assert rows[7] == [i for i in range(200) if i % 5 == 0]
    arr = pa.array(keys, pa.binary())
    col = (arr.buffers()[1], arr.buffers()[2], arr.buffers()[0], 0, 200, 4)
    assert _c().partition_arrow(col, 0, 200, 7) == native.py.partition_arrow(col, 0, 200, 7) == _c().partition_seq(keys, 0, 200, 7)  # type: ignore[attr-defined]


def test_builder_try_append_and_append_many_decode() -> None:
    builder = MemoryRecordsBuilder(bytearray(1024), write_limit=1024, compression="lz4")
    assert builder.try_append(1000, b"k", b"v" * 10, [("h", b"x")])
    assert builder.try_append(1005, None, None)
    n = builder.append_many(1010, [b"a" * 20] * 500, None, None, 0, 500, None)
    assert 0 < n < 500
    builder.close()
    (batch,) = list(read_batches(builder.buffer()))
    recs = list(batch.records())
    assert len(recs) == 2 + n
    assert (recs[0].key, recs[0].value, list(recs[0].headers)) == (b"k", b"v" * 10, [("h", b"x")])
    assert (recs[1].key, recs[1].value, recs[1].timestamp) == (None, None, 1005)
    assert [r.offset for r in recs] == list(range(2 + n))
    assert recs[-1].value == b"a" * 20 and recs[-1].timestamp == 1010


def test_bad_input_errors_name_the_culprit() -> None:
    for impl in (_c(), native.py):
        with pytest.raises(TypeError, match="values\\[1\\] must be bytes"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a", 5], None, None, 0, 2, None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="same length"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a"], [b"k", b"l"], None, 0, 1, None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="out of range"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a"], None, None, 0, 2, None)  # type: ignore[attr-defined]
        with pytest.raises(TypeError, match="key must be bytes"):
            impl.append_record(bytearray(61), 61, 1000, 61, 0.0, 0, 0, "text", b"v", None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="num_partitions"):
            impl.partition_seq([b"a"], 0, 1, 0)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="offset width"):
            impl.append_arrow(bytearray(61), 61, 1000, 61, 0.0, 0, 0, (b"", b"", None, 0, 0, 2), None, None, 0, 0, None)  # type: ignore[attr-defined]


def test_gil_released_by_crc32c_and_cramjam_for_large_buffers() -> None:
    """CRC-32C and compression of a large buffer let another thread run (the GIL is released around them).

    With a huge switch interval no thread is forced off the GIL, and the spinner
    gives it up after every step (sleep(0)); so the spinner advances during a
    call only if that call released the GIL. A GIL-holding call (bytes.count) is
    the control.
    """
    import sys
    import threading
    import time

    import cramjam
    import crc32c

    data = os.urandom(1 << 20) * 32  # 32 MiB: each call takes milliseconds
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)

    def progress_during(work: object) -> int:
        t = threading.Thread(target=spin)
        t.start()
        time.sleep(0.01)
        before = counter[0]
        work()  # type: ignore[operator]
        progressed = counter[0] - before
        stop.set()
        t.join()
        stop.clear()
        return progressed

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        held = progress_during(lambda: data.count(b"\x01"))
        released = {
            # Hardware CRC-32C does 32 MiB in a few ms: repeat it so the window is long enough.
            "crc32c": progress_during(lambda: [crc32c.crc32c(data) for _ in range(8)]),
            "zstd": progress_during(lambda: cramjam.zstd.compress(data, level=1)),
            "lz4": progress_during(lambda: cramjam.lz4.compress_block(data)),
        }
    finally:
        sys.setswitchinterval(old)
    assert held <= 2, f"control: the spinner advanced {held} times during a GIL-holding call"
    for name, steps in released.items():
        assert steps > 2, f"{name} on 32 MiB let the spinner advance only {steps} times: is the GIL held?"
