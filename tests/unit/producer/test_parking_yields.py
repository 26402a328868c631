"""A caller whose records park (no metadata yet) hands the GIL to the Sender now and then.

The Sender needs the GIL in short slices to connect and fetch the topic's
metadata; a caller looping over send() would otherwise keep it a switch interval
(5 ms) at a time, and the first Metadata answer took 40-60 ms instead of 10-20
(benchmarks/RESULTS.md, "The GIL and the Sender's system calls").
"""

from __future__ import annotations

import pytest

from kproducer import router as router_module
from kproducer.producer import Producer
from tests.support.clock import FakeClock
from tests.support.mock_client import MockClient


def test_every_256th_parked_record_yields_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(router_module, "_yield_gil", calls.append)
    clock = FakeClock(1_000)
    client = MockClient(clock)
    p = Producer(
        {"bootstrap.servers": "localhost:9092", "max.block.ms": 60_000, "enable.idempotence": False},
        _clock=clock,
        _client=client,
        _start_io_thread=False,
    )
    try:
        futures = [p.send("no-metadata-yet", b"x") for _ in range(1024)]
        assert p._router.parked_count == 1024 and not any(f.done() for f in futures)
        assert calls == [0, 0, 0, 0]
    finally:
        p.close(0)
