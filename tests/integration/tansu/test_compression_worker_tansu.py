"""lz4 and zstd batches compressed by the native worker thread, end to end against Tansu.

Every record is read back with confluent-kafka (librdkafka decompresses them) and
compared exactly: partition, offset order, key, value. In the native pass the
full batches must have gone through the worker; in the pure-Python pass
(``KPRODUCER_PURE_PYTHON=1``) the producer has no worker and the same records go
through the Python codecs.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kproducer.producer import Producer
from kproducer.record import c_extension
from tests.support.compression import count_python_compressions
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_send_and_send_arrow_through_the_worker_read_back_exactly(
    tansu: TansuBroker, topic_name: str, codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    python_compressions = count_python_compressions(monkeypatch)
    keyed = [(f"k{i % 7}".encode(), (f"{codec}-{i:06d}-" + "payload " * (i % 40)).encode()) for i in range(30_000)]
    bulk = [(f"arrow-{i:06d}-" + "row " * (i % 30)).encode() for i in range(40_000)]
    with Producer(
        {"bootstrap.servers": tansu.bootstrap, "compression.type": codec, "linger.ms": 5, "acks": "all"}
    ) as p:
        worker = p._accumulator.compression_worker
        if c_extension.pure_python_forced():
            assert worker is None, "KPRODUCER_PURE_PYTHON=1 must keep the Python codecs"
        else:
            assert worker is not None, "the native pass has no compression worker (is liblz4/libzstd missing?)"
            p._accumulator.compression_worker = _Counting(worker)
        futures = [p.send(topic_name, v, k) for k, v in keyed]
        table = pa.table({"value": pa.array(bulk, type=pa.binary())})
        bulk_future = p.send_arrow(table, topic_name, partition=2)
        assert p.flush(60) == 0
        metadata = [f.result(1) for f in futures]
        bulk_future.result(1)
        m = p.metrics()
    got = read_topic(tansu.bootstrap, topic_name, len(keyed) + len(bulk))
    assert len(got) == len(keyed) + len(bulk)
    by_position = {(r.partition, r.offset): r for r in got}
    for (key, value), md in zip(keyed, metadata, strict=True):
        r = by_position[(md.partition, md.offset)]
        assert (r.key, r.value) == (key, value)
    # Per partition, the keyed records appear in send order.
    for partition in range(3):
        offsets = [md.offset for md in metadata if md.partition == partition]
        assert offsets == sorted(offsets)
    arrow_rows = [r.value for r in got if r.partition == 2 and r.value is not None and r.value.startswith(b"arrow-")]
    assert arrow_rows == bulk
    assert 0 < m["compression-rate-avg"] < 0.5, m["compression-rate-avg"]
    if worker is not None:
        submitted = p._accumulator.compression_worker.submitted  # type: ignore[union-attr]
        # Only batches drained before they filled (linger, flush) are compressed in Python.
        assert submitted >= 10 and len(python_compressions) < submitted, (submitted, len(python_compressions))


class _Counting:
    """The producer's worker, counting the batches handed to it."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.submitted = 0

    def submit(self, *args: Any) -> Any:
        self.submitted += 1
        return self.worker.submit(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.worker, name)
