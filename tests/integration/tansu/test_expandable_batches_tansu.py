"""Batches that grow past batch.size, end to end against Tansu (read back, and the memory bound)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

from kproducer.accumulator.accumulator import ReadyCheckResult
from kproducer.producer import Producer
from tests.support.accumulator import queued_batches
from tests.support.paths import REPO_ROOT
from tests.support.readback import create_topic, read_topic


def test_send_into_grown_batches_end_to_end(tansu: Any, topic_name: str) -> None:
    """While the Sender may not drain, send() (the C lane natively) fills batches past batch.size."""
    create_topic(tansu.bootstrap, topic_name, 1)
    n = 6000
    values = [f"{i:08d}".encode() * 12 for i in range(n)]  # 96 B
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 2}) as p:
        p.send(topic_name, b"warm").result(30)  # metadata known, the lane registered
        acc = p._accumulator
        gate = threading.Event()
        real_ready = acc.ready
        acc.ready = lambda cluster, now: real_ready(cluster, now) if gate.is_set() else ReadyCheckResult(set(), 5, set())  # type: ignore[method-assign]
        futures = [p.send(topic_name, v) for v in values]
        sizes = [b.estimated_size_in_bytes() for b in queued_batches(acc, 0, topic_name)]
        gate.set()
        p.flush(30)
        metrics = p.metrics()
    assert [f.result(0).offset for f in futures] == list(range(1, n + 1))
    assert max(sizes) > 16384 * 2, sizes  # grown past batch.size while undrained
    assert max(sizes) <= 262144
    assert metrics["batch-size-max"] > 16384 * 2
    got = read_topic(tansu.bootstrap, topic_name, n + 1)
    assert [r.value for r in got] == [b"warm", *values]


_RSS_CHILD = textwrap.dedent(
    """
    import sys
    from kproducer.producer import Producer

    def peak_mb():
        # VmHWM: this process image's peak RSS (ru_maxrss would carry the parent's across exec).
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024

    bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    payload = bytes(1000)
    with Producer({"bootstrap.servers": bootstrap}) as p:
        p.send(topic, payload).result(60)
        base = peak_mb()
        send = p.send
        for _ in range(n):
            send(topic, payload)
        p.flush(120)
        errors = p.metrics().get("record-error-total", 0.0)
    print(base, peak_mb(), int(errors))
    """
)


def test_many_partitions_keyless_peak_rss_within_buffer_memory_plus_64_mb(tansu: Any, topic_name: str) -> None:
    """1,000 partitions, keyless sticky sends at the defaults: peak RSS <= buffer.memory (32 MiB) + 64 MiB."""
    create_topic(tansu.bootstrap, topic_name, 1000)
    root = REPO_ROOT
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, tansu.bootstrap, topic_name, "80000"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    base_mb, peak_mb, errors = (int(x) for x in proc.stdout.split())
    assert errors == 0
    print(f"peak RSS {peak_mb} MB, after start-up {base_mb} MB")
    assert peak_mb <= 32 + 64, f"peak RSS {peak_mb} MB (after start-up {base_mb} MB)"
