"""Send loops for the peer clients that more than one benchmark runs the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def confluent_produce(
    cp: Any,
    topic: str,
    payload: bytes,
    count: int,
    every: int = 0,
    callback: Callable[[], Any] | None = None,
    keys: list[bytes] | None = None,
) -> None:
    """confluent-kafka's produce() of ``count`` records, as its own docs advise.

    A full local queue raises BufferError: poll (serving delivery reports) and try
    again. poll(0) every 1,000 records keeps reports flowing without a per-record
    call. With ``every`` > 0, one record in ``every`` carries ``callback()`` as its
    on_delivery (the latency sample every client in compare.py takes). With ``keys``, record i
    carries ``keys[i % len(keys)]``.
    """
    produce, poll = cp.produce, cp.poll
    nkeys = len(keys) if keys else 0
    for i in range(count):
        key = keys[i % nkeys] if keys else None
        while True:
            try:
                if every and i % every == 0:
                    produce(topic, payload, key, on_delivery=callback() if callback is not None else None)
                else:
                    produce(topic, payload, key)
                break
            except BufferError:
                poll(0.05)
        if i % 1000 == 0:
            poll(0)
