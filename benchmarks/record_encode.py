"""Record encoding throughput: µs per 100-byte record appended, and compress+close MB/s per codec.

Three append loops: ``append`` after an ``is_full`` check and ``has_room_for`` +
``append`` (the builder's checked Python API), and ``try_append`` (the one call
the accumulator makes per record; native when the C extension is built).

    .venv/bin/python benchmarks/record_encode.py [--records N]
    KPRODUCER_PURE_PYTHON=1 .venv/bin/python benchmarks/record_encode.py   # the pure-Python fallback
"""

from __future__ import annotations

import argparse
import time

from kproducer.record import native
from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.codecs import CompressionType

BATCH_SIZE = 16384
TS = 1_700_000_000_000


def bench_append(n: int, check_room: bool) -> float:
    """µs per record for the accumulator's loop: (has_room_for +) append, new builder per 16 KiB batch."""
    key = b"key-00042"
    value = bytes(range(100))
    builder = MemoryRecordsBuilder(bytearray(BATCH_SIZE), write_limit=BATCH_SIZE)
    start = time.perf_counter()
    for _ in range(n):
        if (check_room and not builder.has_room_for(TS, key, value, None)) or (
            not check_room and builder.is_full()
        ):
            builder = MemoryRecordsBuilder(bytearray(BATCH_SIZE), write_limit=BATCH_SIZE)
        builder.append(TS, key, value, None)
    return (time.perf_counter() - start) / n * 1e6


def bench_try_append(n: int) -> float:
    """µs per record for ``try_append`` (size check and append in one call), new builder per 16 KiB batch."""
    key = b"key-00042"
    value = bytes(range(100))
    builder = MemoryRecordsBuilder(bytearray(BATCH_SIZE), write_limit=BATCH_SIZE)
    start = time.perf_counter()
    for _ in range(n):
        if not builder.try_append(TS, key, value, None):
            builder = MemoryRecordsBuilder(bytearray(BATCH_SIZE), write_limit=BATCH_SIZE)
            builder.try_append(TS, key, value, None)
    return (time.perf_counter() - start) / n * 1e6


def bench_close(codec: CompressionType, batches: int) -> tuple[float, float]:
    """MB/s (of uncompressed batch bytes) for compress + header + CRC at close; and the compression rate."""
    values = [
        (b"user-%05d,event=click,page=/products/%04d,ts=%d," % (i, i % 97, TS + i)).ljust(100, b".")
        for i in range(200)
    ]
    builders = []
    for _ in range(batches):
        b = MemoryRecordsBuilder(bytearray(BATCH_SIZE), compression=codec, write_limit=BATCH_SIZE)
        i = 0
        while b.has_room_for(TS, b"k", values[i % 200], None):
            b.append(TS + i, b"k", values[i % 200], None)
            i += 1
        builders.append(b)
    total = sum(b.uncompressed_size for b in builders)
    start = time.perf_counter()
    for b in builders:
        b.close()
    elapsed = time.perf_counter() - start
    rate = sum(b.compression_rate for b in builders) / len(builders)
    return total / elapsed / 1e6, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    print(f"C extension: {'in use' if native.AVAILABLE else 'not in use (pure Python)'}")
    loops = (
        ("append only (is_full check)", lambda: bench_append(args.records, False)),
        ("has_room_for + append", lambda: bench_append(args.records, True)),
        ("try_append", lambda: bench_try_append(args.records)),
    )
    for label, run in loops:
        best = min(run() for _ in range(3))
        print(f"{label:32s} {best:6.2f} us/record  ({args.records} x 100-byte values, 16 KiB batches)")
    for codec in CompressionType:
        mbps, rate = max(bench_close(codec, args.batches) for _ in range(3))
        print(f"close {codec.name.lower():6s} {mbps:9.1f} MB/s   compression rate {rate:.3f}")


if __name__ == "__main__":
    main()
