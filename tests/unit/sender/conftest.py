"""Fixtures of the Sender suite: whole producers on the scripted client and the fake clock (tests/support/producer_rig.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.latch import LATCH_S
from tests.support.producer_rig import ProducerRig

MakeRig = Callable[..., ProducerRig]


@pytest.fixture
def make_rig() -> Iterator[MakeRig]:
    """Build rigs (``make_rig(config, topics=..., init=True)``); each closes at the end, failing what is left."""
    rigs: list[ProducerRig] = []

    def make(config: dict[str, Any] | None = None, *, init: bool = True, **kwargs: Any) -> ProducerRig:
        rig = ProducerRig(config, **kwargs)
        rigs.append(rig)
        if init and rig.config.enable_idempotence:
            rig.init_producer_id()
        return rig

    yield make
    for rig in rigs:
        rig.close()


@pytest.fixture
def rig(make_rig: MakeRig) -> ProducerRig:
    """An idempotent producer at the defaults (linger.ms=0) with producer id 1000, epoch 0; topic t of 2 partitions."""
    return make_rig()


def flush_in_thread(rig: ProducerRig) -> tuple[threading.Thread, list[int]]:
    """``producer.flush()`` on a helper thread (it blocks its caller), once it has woken the Sender.

    The test then drives the Sender until flush() returns: join the thread and read its result.
    """
    woken = threading.Event()
    rig.client.on_wakeup = woken.set
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(rig.producer.flush()), daemon=True)
    thread.start()
    assert woken.wait(LATCH_S), "flush() never woke the Sender"
    return thread, result
