"""A whole Producer on the scripted client (``MockClient``) and the fake clock, its Sender driven loop by loop.

Java's ``SenderTest`` builds a Sender over a ``MockClient`` and ``MockTime`` and calls
``runOnce()``; this rig builds the producer the way a user does (a config mapping) with the
``_clock``, ``_client`` and ``_metadata`` seams and no I/O thread, and each
:meth:`ProducerRig.run` is one ``Producer.run_sender_once()``. Tests send through the public
``send()``, script the brokers' answers on the client, move the clock, and look at what came out:
futures, callbacks, the requests the client saw, metrics. Nothing here reads a private field, so
the tests stay valid however the record path is arranged inside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kproducer import Producer
from kproducer.accumulator import RecordFuture
from kproducer.config import ProducerConfig
from kproducer.metadata import Metadata
from kproducer.network.protocol import ApiKey
from kproducer.record.reader import DefaultRecordBatch
from kproducer.structs import TopicPartition
from tests.support.clock import FakeClock
from tests.support.mock_client import MockClient, batches_of, init_producer_id_response

__all__ = ["ProducerRig", "Outcomes", "START_MS"]

#: The fake clock's reading when a rig starts.
START_MS = 10_000
#: The partition most tests send to.
TP0 = TopicPartition("t", 0)


class Outcomes:
    """Delivery callbacks in the order they ran: (label, offset or None, exception or None)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, int | None, BaseException | None]] = []

    def callback(self, label: Any) -> Callable[[Any, BaseException | None], None]:
        def on_completion(metadata: Any, exc: BaseException | None) -> None:
            self.calls.append((label, None if metadata is None else metadata.offset, exc))

        return on_completion

    def labels(self) -> list[Any]:
        return [label for label, _o, _e in self.calls]


class ProducerRig:
    """A Producer with no I/O thread, a MockClient serving ``topics`` and a FakeClock at START_MS.

    ``wall_clock``: what stamps records sent without a timestamp (default: the system's wall clock).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        topics: Mapping[str, int] | None = None,
        nodes: int = 2,
        serve_metadata: bool = True,
        known_topics: bool = True,
        build_producer: bool = True,
        wall_clock: Callable[[], int] | None = None,
        sender_cpu_clock: Callable[[], float] | None = None,
    ) -> None:
        """``build_producer=False``: the test builds the Producer from :meth:`seams` (an
        ``AsyncProducer`` does, in ``start()``) and sets :attr:`producer` to it.
        ``sender_cpu_clock``: the Sender thread's CPU ms, which turns the adaptive linger on
        (without it the linger is linger.ms, as the fake clock does not move with CPU time)."""
        conf: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 0, **(config or {})}
        cfg = ProducerConfig(conf)
        self.config = cfg
        self.clock = FakeClock(START_MS)
        self.metadata = Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            allow_auto_topic_creation=cfg.allow_auto_create_topics,
            clock_ms=self.clock,
        )
        self.client = MockClient(
            self.clock,
            self.metadata,
            max_in_flight=cfg.max_in_flight_requests_per_connection,
            broker_topics=dict({"t": 2} if topics is None else topics),
            nodes=nodes,
            serve_metadata=serve_metadata,
        )
        self._wall_clock = wall_clock
        self._sender_cpu_clock = sender_cpu_clock
        self.producer: Producer
        if build_producer:
            self.producer = Producer(conf, **self.seams())
        self.outcomes = Outcomes()
        if known_topics and self.client.broker_topics:
            # As the producer's first send() would: the topics are known before the test sends.
            for topic in self.client.broker_topics:
                self.metadata.add_topic(topic, self.clock())
            self.client.answer_metadata()

    def seams(self) -> dict[str, Any]:
        """What builds a Producer on this rig: its clock, scripted client and metadata, no I/O thread."""
        return {
            "_clock": self.clock,
            "_wall_clock": self._wall_clock,
            "_client": self.client,
            "_metadata": self.metadata,
            "_start_io_thread": False,
            "_sender_cpu_clock": self._sender_cpu_clock,
        }

    # ------------------------------------------------------------ driving
    def run(self, loops: int = 1) -> None:
        """``loops`` runs of the Sender's loop (Java's ``sender.runOnce()``)."""
        for _ in range(loops):
            self.producer.run_sender_once()

    def run_until(self, done: Callable[[], bool], loops: int = 50, step_ms: int = 0) -> int:
        """Run the loop (moving the clock ``step_ms`` before each) until ``done()``; the loops it took."""
        for i in range(loops):
            if done():
                return i
            self.clock.advance(step_ms)
            self.producer.run_sender_once()
        assert done(), f"not done after {loops} Sender loops"
        return loops

    def init_producer_id(self, producer_id: int = 1000, epoch: int = 0) -> None:
        """Answer the idempotent producer's InitProducerId in the first loop."""
        self.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(producer_id, epoch))
        self.run()
        assert (self.producer.producer_id, self.producer.producer_epoch) == (producer_id, epoch)

    def send(
        self,
        value: bytes = b"v",
        *,
        topic: str = "t",
        partition: int | None = 0,
        key: bytes | None = None,
        label: Any = None,
    ) -> RecordFuture:
        """``producer.send``; with ``label``, its callback is recorded in :attr:`outcomes`."""
        callback = None if label is None else self.outcomes.callback(label)
        return self.producer.send(topic, value, key, partition=partition, callback=callback)

    def close(self) -> None:
        self.producer.close(0)

    # ------------------------------------------------------------ what the brokers saw
    def produce_bodies(self) -> list[Any]:
        return self.client.requests(ApiKey.PRODUCE)

    def produce_nodes(self) -> list[int]:
        return [r.node_id for r in self.client.sent if r.api_key == ApiKey.PRODUCE]

    def sent_api_keys(self) -> list[ApiKey]:
        """Every request sent, by API, in order (metadata requests are not requests of this client)."""
        return [ApiKey(r.api_key) for r in self.client.sent]

    def batches(self, tp: TopicPartition = TP0) -> list[DefaultRecordBatch]:
        """Every batch sent for ``tp``, in the order the requests went out (retries included)."""
        out = []
        for body in self.produce_bodies():
            data = batches_of(body).get(tp)
            if data is not None:
                out.append(DefaultRecordBatch(memoryview(data)))
        return out

    def values(self, tp: TopicPartition = TP0) -> list[list[bytes | None]]:
        """The record values of every batch sent for ``tp``, batch by batch."""
        return [[r.value for r in b.records()] for b in self.batches(tp)]

    def sequences(self, tp: TopicPartition = TP0) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, base sequence, record count) of every batch sent for ``tp``."""
        return [(b.producer_id, b.producer_epoch, b.base_sequence, b.record_count) for b in self.batches(tp)]
