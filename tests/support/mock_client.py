"""A scripted network client for driving the Sender deterministically, on the fake clock.

Modelled on the Java client's ``MockClient`` and ``MockTime``: the Sender is built
with :class:`MockClient` (it satisfies ``kproducer.network.kafka_client.KafkaClient``) and the
tests' :class:`~tests.support.clock.FakeClock`; a test scripts responses per API (``client.prepare(...)``),
calls ``sender.run_once()`` and looks at what was sent. Nothing sleeps: ``poll``
answers every in-flight request that has a scripted response, in send order, and
returns at once.

Response helpers build bodies with the attributes the producer reads (the same
names as kio's generated classes).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from kio.serial import entity_reader

from kproducer.errors import KafkaError
from kproducer.metadata import Cluster, Metadata
from kproducer.network.client import ClientRequest, ClientResponse
from kproducer.network.protocol import (
    ApiKey,
    PartitionProduceResponse,
    ProduceRequestData,
    ProduceResponseData,
    RecordError,
    request_class,
)
from kproducer.structs import Node, PartitionInfo, TopicPartition
from tests.support.clock import FakeClock

__all__ = [
    "MockClient",
    "DISCONNECT",
    "make_cluster",
    "set_cluster",
    "produce_response",
    "init_producer_id_response",
    "find_coordinator_response",
    "add_partitions_response",
    "error_response",
    "txn_offset_commit_response",
    "batches_of",
    "records_of",
]


class _Disconnect:
    def __repr__(self) -> str:
        return "DISCONNECT"


#: A scripted "response" that fails the request as a lost connection.
DISCONNECT = _Disconnect()

Responder = Any  # a body, DISCONNECT, or a callable(request body) -> body / DISCONNECT


@dataclass
class MockClient:
    """Answers requests from per-API scripts; every node is ready unless made otherwise."""

    clock: FakeClock
    metadata: Metadata | None = None
    max_in_flight: int = 5
    #: Negotiated version per API (what ``send`` passes to a request builder).
    versions: dict[int, int] = field(
        default_factory=lambda: {
            int(ApiKey.PRODUCE): 9,
            int(ApiKey.FIND_COORDINATOR): 4,
            int(ApiKey.INIT_PRODUCER_ID): 4,
            int(ApiKey.ADD_PARTITIONS_TO_TXN): 3,
            int(ApiKey.ADD_OFFSETS_TO_TXN): 3,
            int(ApiKey.END_TXN): 3,
            int(ApiKey.TXN_OFFSET_COMMIT): 3,
        }
    )
    unready: set[int] = field(default_factory=set)
    #: Nodes that refused the client's TLS handshake or SASL credentials, with the error (they are unready too).
    refusals: dict[int, KafkaError] = field(default_factory=dict)
    #: Nodes whose connection has not come up, with since when (the test makes them unready too).
    stalled: dict[int, int] = field(default_factory=dict)
    sent: list[ClientRequest] = field(default_factory=list)
    sent_bodies: list[Any] = field(default_factory=list)
    _scripts: dict[int, deque[Responder]] = field(default_factory=dict)
    _in_flight: list[tuple[ClientRequest, Any]] = field(default_factory=list)
    wakeups: int = 0
    #: The deadline of every ``wakeup_by`` (a new batch's: when it becomes sendable), in order.
    wakeup_deadlines: list[int] = field(default_factory=list)
    #: Called on every wakeup (a test's latch: another thread asked the Sender to run).
    on_wakeup: Callable[[], None] | None = None
    closed: bool = False
    #: The timeout of every poll, in order (a Sender that spins polls with 0).
    poll_timeouts: list[int] = field(default_factory=list)
    #: The cluster as the brokers see it, served to ``metadata`` (topic -> partition count; partition
    #: p led by node p % ``nodes`` unless ``leaders`` says otherwise). A topic not here is answered
    #: UNKNOWN_TOPIC_OR_PARTITION.
    broker_topics: dict[str, int] = field(default_factory=dict)
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    nodes: int = 2
    #: Answer a metadata request whenever ``metadata`` says one is due (in ``poll``), as the real
    #: client's metadata updater does; off, metadata changes only through :meth:`answer_metadata`.
    serve_metadata: bool = False
    #: The topics of every metadata request answered (None: all topics), in order.
    metadata_requests: list[list[str] | None] = field(default_factory=list)
    #: A request with no scripted answer fails after this long, as the real client's
    #: ``request.timeout.ms`` (with every other unanswered request to its node: the connection closes).
    request_timeout_ms: int | None = None

    # ------------------------------------------------------------ scripting
    def prepare(self, api_key: int, *responses: Responder) -> None:
        """Queue responses for the next requests of ``api_key``, in order."""
        self._scripts.setdefault(int(api_key), deque()).extend(responses)

    def prepared(self, api_key: int) -> int:
        """How many responses queued by :meth:`prepare` for ``api_key`` are still unused."""
        return len(self._scripts.get(int(api_key), ()))

    def requests(self, api_key: int) -> list[Any]:
        """Bodies sent for ``api_key`` so far, in order."""
        return [b for r, b in zip(self.sent, self.sent_bodies, strict=True) if r.api_key == api_key]

    def pending(self, api_key: int | None = None) -> list[ClientRequest]:
        return [r for r, _b in self._in_flight if api_key is None or r.api_key == api_key]

    # ------------------------------------------------------------ KafkaClient
    def ready(self, node_id: int, now: int) -> bool:
        return node_id not in self.unready and self.in_flight_request_count(node_id) < self.max_in_flight

    def send(self, request: ClientRequest, now: int) -> None:
        if not self.ready(request.node_id, now):
            raise AssertionError(f"the Sender sent to node {request.node_id}, which is not ready")
        body = request.request
        if callable(body) and not isinstance(body, ProduceRequestData) and not hasattr(body, "__api_key__"):
            body = body(self.versions.get(int(request.api_key), 0))
        request.api_version = self.versions.get(int(request.api_key), 0)
        request.send_ms = now
        self.sent.append(request)
        self.sent_bodies.append(body)
        self._in_flight.append((request, body))

    def answer_metadata(self, now: int | None = None) -> list[str] | None:
        """Send ``metadata``'s next request and answer it from ``broker_topics`` now; the topics asked for."""
        assert self.metadata is not None, "the client has no Metadata to answer into"
        now = self.clock() if now is None else now
        topics = self.metadata.topics_for_request(now)
        self.metadata_requests.append(topics)
        names = list(self.broker_topics) if topics is None else topics
        self.metadata.handle_response(
            metadata_response(names, self.broker_topics, self.nodes, self.leaders), topics, now
        )
        return topics

    def poll(self, timeout_ms: int, now: int) -> list[ClientResponse]:
        self.poll_timeouts.append(timeout_ms)
        if self.serve_metadata and self.metadata_request_due(now):
            self.answer_metadata(now)
        done: list[ClientResponse] = []
        remaining: list[tuple[ClientRequest, Any]] = []
        timed_out_nodes = {
            r.node_id
            for r, _b in self._in_flight
            if self.request_timeout_ms is not None
            and r.expect_response
            and not self._scripts.get(int(r.api_key))
            and now - r.send_ms >= self.request_timeout_ms
        }
        for request, body in self._in_flight:
            if not request.expect_response:
                done.append(ClientResponse(request, None, now))
                continue
            script = self._scripts.get(int(request.api_key))
            if not script:
                if request.node_id in timed_out_nodes:
                    from kproducer.errors import KafkaTimeoutError

                    error = KafkaTimeoutError(f"request to node {request.node_id} timed out (mock)")
                    done.append(ClientResponse(request, None, now, disconnected=True, timed_out=True, error=error))
                else:
                    remaining.append((request, body))
                continue
            responder = script.popleft()
            answer = responder(body) if callable(responder) else responder
            if answer is DISCONNECT:
                from kproducer.errors import NetworkError

                done.append(
                    ClientResponse(request, None, now, disconnected=True, error=NetworkError("mock disconnect"))
                )
            else:
                done.append(ClientResponse(request, answer, now))
        self._in_flight = remaining
        # Let go of the answered bodies before the callbacks run, as the real client has sent
        # them by then: a body's views of a batch buffer would keep it from the BufferPool.
        request = body = None  # type: ignore[assignment]
        for resp in done:
            if resp.request.callback is not None:
                resp.request.callback(resp)
        return done

    def wakeup(self) -> None:
        self.wakeups += 1
        if self.on_wakeup is not None:
            self.on_wakeup()

    def wakeup_by(self, deadline_ms: int) -> None:
        # This client never waits in poll(): every call counts as a wakeup, as it would for a
        # NetworkClient whose Sender is not waiting. The deadlines are kept for the tests.
        self.wakeup_deadlines.append(deadline_ms)
        self.wakeup()

    def close(self) -> None:
        self.closed = True

    def least_loaded_node(self, now: int) -> int | None:
        nodes = sorted(self.metadata.cluster.nodes) if self.metadata is not None else []
        ready = [n for n in nodes if n not in self.unready]
        return ready[0] if ready else (nodes[0] if nodes else None)

    def connection_delay(self, node_id: int, now: int) -> int:
        return 0

    def authentication_error(self, node_id: int) -> KafkaError | None:
        return self.refusals.get(node_id)

    def stalled_connections(self, now: int, after_ms: int) -> dict[int, int]:
        return {node: since for node, since in self.stalled.items() if now - since >= after_ms}

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return sum(1 for r, _b in self._in_flight if node_id is None or r.node_id == node_id)

    def in_flight_requests_by_node(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for r, _b in self._in_flight:
            out[r.node_id] = out.get(r.node_id, 0) + 1
        return out

    def metadata_request_due(self, now: int) -> bool:
        return self.serve_metadata and self.metadata is not None and self.metadata.time_to_next_update(now) == 0

    def max_usable_produce_magic(self) -> int:
        return 2


# ---------------------------------------------------------------- metadata
def make_cluster(topics: Mapping[str, int], nodes: int = 2) -> Cluster:
    """Partition p of each topic led by node p % nodes."""
    node_list = [Node(i, "127.0.0.1", 9092 + i) for i in range(nodes)]
    parts = [PartitionInfo(t, p, p % nodes) for t, n in topics.items() for p in range(n)]
    return Cluster(node_list, parts)


def set_cluster(metadata: Metadata, cluster: Cluster) -> None:
    """Install a cluster snapshot as if a metadata response had brought it (no network in these tests)."""
    metadata._cluster = cluster  # noqa: SLF001 - a test seam on purpose


def metadata_response(
    names: Iterable[str], topics: Mapping[str, int], nodes: int, leaders: Mapping[TopicPartition, int]
) -> Any:
    """A Metadata response body (the fields ``Metadata`` reads) for ``names``: unknown ones UNKNOWN_TOPIC_OR_PARTITION."""
    brokers = [SimpleNamespace(node_id=i, host="127.0.0.1", port=9092 + i, rack=None) for i in range(nodes)]
    answer = []
    for name in names:
        count = topics.get(name)
        parts = [
            SimpleNamespace(
                error_code=0,
                partition_index=p,
                leader_id=leaders.get(TopicPartition(name, p), p % nodes),
                leader_epoch=0,
                replica_nodes=[p % nodes],
                isr_nodes=[p % nodes],
                offline_replicas=[],
            )
            for p in range(count or 0)
        ]
        answer.append(SimpleNamespace(name=name, error_code=0 if count else 3, is_internal=False, partitions=parts))
    return SimpleNamespace(brokers=brokers, cluster_id="mock", controller_id=0, topics=answer)


# ---------------------------------------------------------------- response bodies
def produce_response(
    codes: Mapping[TopicPartition, int] | int = 0,
    base_offset: int = 0,
    message: str | None = None,
    *,
    record_errors: tuple[tuple[int, str | None], ...] = (),
    throttle_time_ms: int = 0,
) -> Callable[[ProduceRequestData], ProduceResponseData]:
    """A Produce response for every partition of the request: one code for all, or per partition.

    ``record_errors`` (KIP-467: batch index, message) go with every failed partition.
    """

    def respond(req: ProduceRequestData) -> ProduceResponseData:
        out = {}
        for i, tp in enumerate(req.partitions):
            code = codes if isinstance(codes, int) else codes.get(tp, 0)
            out[tp] = PartitionProduceResponse(
                code,
                message if code else None,
                base_offset + 100 * i if code == 0 else -1,
                -1,
                -1,
                tuple(RecordError(index, text) for index, text in record_errors) if code else (),
            )
        return ProduceResponseData(out, throttle_time_ms)

    return respond


def init_producer_id_response(producer_id: int = 1000, epoch: int = 0, error_code: int = 0) -> Any:
    return SimpleNamespace(error_code=error_code, producer_id=producer_id if not error_code else -1, producer_epoch=epoch)


def find_coordinator_response(node_id: int = 0, error_code: int = 0) -> Any:
    """A pre-v4 shaped answer (one key); the producer reads both shapes."""
    return SimpleNamespace(error_code=error_code, error_message=None, node_id=node_id, host="127.0.0.1", port=9092 + node_id)


def add_partitions_response(codes: Mapping[TopicPartition, int] | int = 0) -> Callable[[Any], Any]:
    """Answers for every partition the request names."""

    def respond(req: Any) -> Any:
        topics = []
        for t in req.v3_and_below_topics:
            results = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p)
                code = codes if isinstance(codes, int) else codes.get(tp, 0)
                results.append(SimpleNamespace(partition_index=p, partition_error_code=code))
            topics.append(SimpleNamespace(name=t.name, results_by_partition=results))
        return SimpleNamespace(results_by_topic_v3_and_below=topics)

    return respond


def error_response(error_code: int = 0) -> Any:
    """EndTxn / AddOffsetsToTxn answers: only an error code."""
    return SimpleNamespace(error_code=error_code)


def txn_offset_commit_response(codes: Mapping[TopicPartition, int] | int = 0) -> Callable[[Any], Any]:
    def respond(req: Any) -> Any:
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code = codes if isinstance(codes, int) else codes.get(tp, 0)
                parts.append(SimpleNamespace(partition_index=p.partition_index, error_code=code))
            topics.append(SimpleNamespace(name=t.name, partitions=parts))
        return SimpleNamespace(topics=topics)

    return respond


def partitions_of(produce_body: ProduceRequestData) -> Iterable[TopicPartition]:
    return produce_body.partitions


def batches_of(produce_body: ProduceRequestData) -> dict[TopicPartition, bytes]:
    """The record batch bytes of a Produce request, per partition, read back from its framed bytes.

    v3 and later are decoded by kio's generated reader (an implementation independent of
    ``build_produce_request``); v0-v2, which kio does not have, by hand from the protocol guide's
    layout: acks, timeout, then [topic [partition records]].
    """
    blob = b"".join(bytes(b) for b in produce_body.buffers)
    if produce_body.version >= 3:
        decoded, size = entity_reader(request_class(ApiKey.PRODUCE, produce_body.version))(blob, 0)
        assert size == len(blob) == produce_body.size, "the framed bytes do not match the request's declared size"
        return {TopicPartition(str(t.name), int(p.index)): bytes(p.records or b"") for t in decoded.topic_data
                for p in t.partition_data}  # fmt: skip
    out: dict[TopicPartition, bytes] = {}
    pos = 6  # acks (int16), timeout (int32)
    (topics,) = struct.unpack_from(">i", blob, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", blob, pos)
        topic = blob[pos + 2 : pos + 2 + name_len].decode()
        pos += 2 + name_len
        (partitions,) = struct.unpack_from(">i", blob, pos)
        pos += 4
        for _ in range(partitions):
            partition, length = struct.unpack_from(">ii", blob, pos)
            pos += 8
            out[TopicPartition(topic, partition)] = blob[pos : pos + length]
            pos += length
    assert pos == len(blob) == produce_body.size, "the framed bytes do not match the request's declared size"
    return out


def records_of(produce_body: ProduceRequestData, tp: TopicPartition) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record a Produce request carries for ``tp``, in order."""
    from kproducer.record.reader import DefaultRecordBatch

    batch = DefaultRecordBatch(memoryview(batches_of(produce_body)[tp]))
    return [(r.key, r.value) for r in batch.records()]
