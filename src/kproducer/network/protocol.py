"""Kafka wire protocol: headers, kio-backed bodies and a zero-copy Produce framer.

Headers (request v0/v1/v2, response v0/v1) are handled here and only here.
Bodies of most APIs go through kio's generated schemas. Produce is framed by
hand for every version: kio's writer copies a ``records`` field into its
output buffer, whereas the producer wants the batches (memoryviews into the
BufferPool) handed to ``socket.sendmsg`` untouched. v0–v2 carry legacy message
sets (magic 0/1) but the framing around the records is the same.

Why one file of ~700 lines: it is the one place that knows the wire framing, and the
hand-written parts (request/response headers, the Produce framer and the parsers of the
responses on the hot path) share the same primitive readers and writers; split apart,
each piece would need the others' internals.
"""

from __future__ import annotations

import importlib
import io
import logging
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from kproducer.network.api_keys import COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION, ApiKey
from kproducer.record.default_record import encode_unsigned_varint
from kproducer.structs import TopicPartition


def _import_kio_serial() -> Any:
    """Import kio.serial without its optional hypothesis hooks.

    kio's phantom types import hypothesis when it is installed, only to register
    test strategies. In an environment that has it (every dev and CI one), that
    lengthens the import and adds tens of thousands of objects that every full
    cyclic-GC pass walks (those passes stall the Sender). When
    nothing has imported hypothesis yet, it is hidden for the length of the import.
    """
    if "hypothesis" in sys.modules:
        return importlib.import_module("kio.serial")
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import hypothesis -> ImportError
    try:
        return importlib.import_module("kio.serial")
    finally:
        if sys.modules.get("hypothesis", 0) is None:
            del sys.modules["hypothesis"]


_kio_serial = _import_kio_serial()
# After kio.serial, so that kio's schema introspection finds its phantom types already imported.
from kproducer.network.bounds import check_response_bounds, read_uvarint, skip_tagged_fields  # noqa: E402

entity_reader = _kio_serial.entity_reader
entity_writer = _kio_serial.entity_writer

__all__ = [
    "ApiKey",
    "CLIENT_VERSIONS",
    "Buffer",
    "ProtocolError",
    "ProduceRequestData",
    "PartitionProduceResponse",
    "ProduceResponseData",
    "RecordError",
    "build_produce_request",
    "parse_produce_response",
    "preload",
    "request_class",
    "response_class",
    "is_flexible",
    "request_header_version",
    "response_header_version",
    "encode_request_header",
    "decode_response_header",
    "encode_request",
    "decode_response",
    "Coordinator",
    "build_find_coordinator_request",
    "find_coordinator_result",
    "build_add_partitions_to_txn_request",
    "add_partitions_to_txn_errors",
    "build_end_txn_request",
    "build_init_producer_id_request",
    "build_add_offsets_to_txn_request",
    "build_txn_offset_commit_request",
    "txn_offset_commit_errors",
    "COORDINATOR_KEY_GROUP",
    "COORDINATOR_KEY_TRANSACTION",
]

logger = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview


class ProtocolError(Exception):
    """Bytes from the broker that cannot be a valid Kafka frame: the connection must be closed."""


# The versions this client implements, per API. Produce stops at 11: v12 changes
# transactional semantics (KIP-890 part 2) and v13 names topics by id.
# AddPartitionsToTxn v4+ is the broker-to-broker batched form.
CLIENT_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.METADATA: (1, 12),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}

_MODULES: Mapping[ApiKey, str] = {
    ApiKey.PRODUCE: "produce",
    ApiKey.METADATA: "metadata",
    ApiKey.FIND_COORDINATOR: "find_coordinator",
    ApiKey.SASL_HANDSHAKE: "sasl_handshake",
    ApiKey.API_VERSIONS: "api_versions",
    ApiKey.CREATE_TOPICS: "create_topics",
    ApiKey.INIT_PRODUCER_ID: "init_producer_id",
    ApiKey.ADD_PARTITIONS_TO_TXN: "add_partitions_to_txn",
    ApiKey.ADD_OFFSETS_TO_TXN: "add_offsets_to_txn",
    ApiKey.END_TXN: "end_txn",
    ApiKey.TXN_OFFSET_COMMIT: "txn_offset_commit",
    ApiKey.SASL_AUTHENTICATE: "sasl_authenticate",
}

# First flexible version of each API (KIP-482), from Kafka's message JSON specs.
_FIRST_FLEXIBLE: Mapping[int, int] = {
    ApiKey.PRODUCE: 9,
    ApiKey.METADATA: 9,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.SASL_HANDSHAKE: 1 << 15,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 5,
    ApiKey.INIT_PRODUCER_ID: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.SASL_AUTHENTICATE: 2,
}


@cache
def request_class(api_key: int, version: int) -> Any:
    """kio's generated request class for ``api_key`` at ``version``."""
    mod = importlib.import_module(f"kio.schema.{_MODULES[ApiKey(api_key)]}.v{version}.request")
    return next(v for k, v in vars(mod).items() if k.endswith("Request") and isinstance(v, type))


@cache
def response_class(api_key: int, version: int) -> Any:
    """kio's generated response class for ``api_key`` at ``version``."""
    mod = importlib.import_module(f"kio.schema.{_MODULES[ApiKey(api_key)]}.v{version}.response")
    return next(v for k, v in vars(mod).items() if k.endswith("Response") and isinstance(v, type))


def preload(api_keys: Iterable[ApiKey]) -> None:
    """Import kio's classes for ``api_keys`` at this client's highest versions, with their writer and reader.

    A producer calls this while it is being made, on the caller's thread: otherwise
    the first connection's Sender thread imports them (tens of schema modules and
    their dataclasses), and it does so while the caller is already busy in send(),
    getting the GIL back only once per switch interval after each file read. That
    made the first Metadata answer arrive 240-550 ms after the first send instead
    of a few ms (benchmarks/RESULTS.md, "The GIL and the Sender's system calls"). A
    broker that negotiates lower versions still gets them loaded lazily.
    """
    for key in api_keys:
        version = CLIENT_VERSIONS[key][1]
        entity_writer(request_class(key, version))
        entity_reader(response_class(key, version))


def is_flexible(api_key: int, version: int) -> bool:
    return version >= _FIRST_FLEXIBLE.get(api_key, 1 << 15)


def request_header_version(api_key: int, version: int) -> int:
    """v2 for flexible requests, v1 otherwise (v0 is ControlledShutdown v0 only, not sent by a producer)."""
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """v1 for flexible responses; ApiVersions always answers with v0 so that any client can read it."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


# ------------------------------------------------------------------ primitives
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HDR = struct.Struct(">hhi")
_PART_HEAD = struct.Struct(">ii")  # partition index + legacy records length
# A flexible version's partition index and compact records length (the length + 1 as an unsigned
# varint) for lengths under 2**21, the varint's bytes packed with the index in one call: a
# request carries one per batch, a thousand of them over a thousand partitions.
_FLEX_PART_HEAD = (struct.Struct(">iB"), struct.Struct(">iBB"), struct.Struct(">iBBB"))
# A batch smaller than this is copied into the request's current chunk rather than passed as a
# view of its own: each buffer costs the selector a memoryview, a deque entry and an iovec slot (a
# few hundred ns, and a sendmsg call per 512 of them), where copying a few KiB costs less. Keyed
# records over a thousand partitions make requests of a thousand small batches; a full batch.size
# batch (16 KiB) still reaches sendmsg uncopied.
COPY_BATCH_BELOW = 4096
# The fixed start of a partition's produce response, by version: index, error code, base offset,
# then log-append time (v2+) and log start offset (v5+); one unpack instead of five reads.
_PRODUCE_PART = (struct.Struct(">ihq"), struct.Struct(">ihqq"), struct.Struct(">ihqqq"))
# A flexible partition response's tail when all is well: empty record_errors (compact array,
# length + 1 = 1), null error_message (0), no tagged fields (0).
_NO_ERRORS_NO_TAGS = b"\x01\x00\x00"


def _legacy_string(s: str | None) -> bytes:
    if s is None:
        return b"\xff\xff"
    b = s.encode()
    return _I16.pack(len(b)) + b


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return encode_unsigned_varint(len(b) + 1) + b


# ------------------------------------------------------------------ headers
def encode_request_header(
    header_version: int, api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Request header v0 (no client id), v1 (client id), v2 (v1 + empty tagged fields).

    client_id stays a legacy int16 string even in v2, as Kafka specifies.
    """
    head = _HDR.pack(api_key, api_version, correlation_id)
    if header_version == 0:
        return head
    head += _legacy_string(client_id)
    if header_version >= 2:
        head += b"\x00"
    return head


def decode_response_header(header_version: int, buf: memoryview) -> tuple[int, int]:
    """Returns (correlation_id, offset of the body)."""
    if len(buf) < 4:
        raise ProtocolError(f"response of {len(buf)} bytes is shorter than its header")
    (correlation_id,) = _I32.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        pos = skip_tagged_fields(buf, pos, ProtocolError)
    return correlation_id, pos


# ------------------------------------------------------------------ generic bodies
def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Buffer]:
    """The size-prefixed frame of one request, as buffers for ``sendmsg``."""
    header = encode_request_header(
        request_header_version(api_key, api_version), api_key, api_version, correlation_id, client_id
    )
    if isinstance(body, ProduceRequestData):
        parts: list[Buffer] = [b"", header, *body.buffers]
        size = len(header) + body.size
    else:
        out = io.BytesIO()
        entity_writer(type(body))(out, body)
        payload = out.getvalue()
        parts = [b"", header, payload]
        size = len(header) + len(payload)
    parts[0] = _I32.pack(size)
    return parts


def body_version(api_key: int, body: Any) -> int:
    if isinstance(body, ProduceRequestData):
        return body.version
    return int(body.__version__)


def decode_response(api_key: int, api_version: int, buf: memoryview, offset: int) -> Any:
    """Decode a response body (the header already consumed up to ``offset``)."""
    if api_key == ApiKey.PRODUCE:
        parts, throttle = parse_produce_response(api_version, buf[offset:])
        return ProduceResponseData(parts, throttle)
    if api_key == ApiKey.API_VERSIONS and len(buf) - offset >= 2:
        # A broker that does not know our ApiVersions version answers UNSUPPORTED_VERSION in v0 format.
        (code,) = _I16.unpack_from(buf, offset)
        if code == 35:
            # Some brokers (librdkafka's mock) send this error in a non-v0 layout: fall back to
            # "no versions known", which makes the connection retry ApiVersions at v0.
            try:
                v0 = response_class(api_key, 0)
                check_response_bounds(v0, buf, offset)
                return entity_reader(v0)(buf, offset)[0]
            except Exception:
                return UnsupportedApiVersions()
    cls = response_class(api_key, api_version)
    try:
        check_response_bounds(cls, buf, offset)  # kio's reader would abort the process on a huge count
        value, size = entity_reader(cls)(buf, offset)
    except Exception as e:
        raise ProtocolError(f"cannot decode {ApiKey(api_key).name} v{api_version} response: {e}") from e
    return value


@dataclass(slots=True, frozen=True)
class UnsupportedApiVersions:
    """An UNSUPPORTED_VERSION ApiVersions answer whose body could not be read."""

    error_code: int = 35
    api_keys: tuple[Any, ...] = ()


# ------------------------------------------------------------------ Produce
@dataclass(slots=True)
class ProduceRequestData:
    """A framed Produce body: small header chunks interleaved with the batches themselves."""

    version: int
    acks: int
    timeout_ms: int
    transactional_id: str | None
    buffers: list[Buffer]
    size: int
    partitions: tuple[TopicPartition, ...] = field(default=())

    api_key: int = ApiKey.PRODUCE


def build_produce_request(
    version: int,
    acks: int,
    timeout_ms: int,
    transactional_id: str | None,
    batches: Mapping[TopicPartition, bytes | memoryview],
) -> ProduceRequestData:
    """Frame a Produce request of ``version`` (0–11); only batches under :data:`COPY_BATCH_BELOW` bytes are copied.

    The result's buffers are header chunks, each holding the small batches that follow its
    headers, between the larger batches' own views.
    """
    lo, hi = CLIENT_VERSIONS[ApiKey.PRODUCE]
    if not lo <= version <= hi:
        raise ValueError(f"Produce v{version} is not implemented (supported {lo}..{hi})")
    flexible = version >= 9
    by_topic: dict[str, list[tuple[int, bytes | memoryview]]] = {}
    for tp, data in batches.items():
        plist = by_topic.get(tp.topic)
        if plist is None:
            by_topic[tp.topic] = [(tp.partition, data)]
        else:
            plist.append((tp.partition, data))

    buffers: list[Buffer] = []
    head = bytearray()
    size = 0
    if version >= 3:
        head += _compact_string(transactional_id) if flexible else _legacy_string(transactional_id)
    head += _I16.pack(acks) + _I32.pack(timeout_ms)
    head += encode_unsigned_varint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
    for topic, plist in by_topic.items():
        head += _compact_string(topic) if flexible else _legacy_string(topic)
        head += encode_unsigned_varint(len(plist) + 1) if flexible else _I32.pack(len(plist))
        for partition, data in plist:
            n = len(data) if not isinstance(data, memoryview) else data.nbytes
            if flexible:
                u = n + 1
                if u < 0x80:
                    head += _FLEX_PART_HEAD[0].pack(partition, u)
                elif u < 0x4000:
                    head += _FLEX_PART_HEAD[1].pack(partition, (u & 0x7F) | 0x80, u >> 7)
                elif u < 0x200000:
                    head += _FLEX_PART_HEAD[2].pack(partition, (u & 0x7F) | 0x80, ((u >> 7) & 0x7F) | 0x80, u >> 14)
                else:
                    head += _I32.pack(partition) + encode_unsigned_varint(u)
            else:
                head += _PART_HEAD.pack(partition, n)
            if n < COPY_BATCH_BELOW:
                head += data
            else:
                buffers.append(head)
                size += len(head)
                head = bytearray()
                buffers.append(data)
                size += n
            if flexible:
                head += b"\x00"  # partition tagged fields
        if flexible:
            head += b"\x00"  # topic tagged fields
    if flexible:
        head += b"\x00"  # request tagged fields
    if head:
        buffers.append(head)
        size += len(head)
    return ProduceRequestData(version, acks, timeout_ms, transactional_id, buffers, size, tuple(batches))


class RecordError(NamedTuple):
    batch_index: int
    message: str | None


class PartitionProduceResponse(NamedTuple):
    """One partition's answer in a Produce response.

    A NamedTuple, like the ``TopicPartition`` it is keyed by: immutable, and the parser makes one
    per partition of every response with ``tuple.__new__``. A frozen dataclass's constructor sets
    each field through ``object.__setattr__``, several times the cost, and a response over a
    thousand partitions makes a thousand of them.
    """

    error_code: int
    error_message: str | None
    base_offset: int
    log_append_time: int
    log_start_offset: int
    record_errors: tuple[RecordError, ...]


class ProduceResponseData(NamedTuple):
    responses: dict[TopicPartition, PartitionProduceResponse]
    throttle_time_ms: int


class _Reader:
    """A cursor over a response body that turns short reads into ProtocolError."""

    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: memoryview, flexible: bool) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise ProtocolError(
                f"truncated response: need {n} bytes at {self.pos}, have {len(self.buf) - self.pos}"
            )

    def fixed(self, field: struct.Struct) -> int:
        """One fixed-width integer field (``_I16``, ``_I32``)."""
        self.need(field.size)
        (v,) = field.unpack_from(self.buf, self.pos)
        self.pos += field.size
        return int(v)

    def i16(self) -> int:
        return self.fixed(_I16)

    def i32(self) -> int:
        return self.fixed(_I32)

    def array_len(self) -> int:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, ProtocolError)
            n -= 1
        else:
            n = self.i32()
        if n > len(self.buf):
            raise ProtocolError(f"array length {n} exceeds the response size")
        return max(n, 0)

    def string(self) -> str | None:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos, ProtocolError)
            n -= 1
        else:
            n = self.i16()
        if n < 0:
            return None
        self.need(n)
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return s

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos, ProtocolError)


def parse_produce_response(
    version: int, body: bytes | memoryview
) -> tuple[dict[TopicPartition, PartitionProduceResponse], int]:
    """Decode a Produce response body of ``version`` (0–11)."""
    r = _Reader(memoryview(body), version >= 9)
    fixed = _PRODUCE_PART[2 if version >= 5 else 1 if version >= 2 else 0]
    flexible = version >= 9
    out: dict[TopicPartition, PartitionProduceResponse] = {}
    # Both NamedTuples, made without their generated ``__new__`` (a Python function): see PartitionProduceResponse.
    new = tuple.__new__
    for _ in range(r.array_len()):
        topic = r.string()
        if topic is None:
            raise ProtocolError("null topic name in produce response")
        for _ in range(r.array_len()):
            r.need(fixed.size)
            values = fixed.unpack_from(r.buf, r.pos)
            r.pos += fixed.size
            partition, error_code, base_offset = values[0], values[1], values[2]
            log_append_time = values[3] if version >= 2 else -1
            log_start_offset = values[4] if version >= 5 else -1
            record_errors: tuple[RecordError, ...] = ()
            error_message = None
            if flexible and r.buf[r.pos : r.pos + 3] == _NO_ERRORS_NO_TAGS:
                # The usual tail: no record errors, no error message, no tagged fields.
                r.pos += 3
                out[new(TopicPartition, (topic, partition))] = new(
                    PartitionProduceResponse, (error_code, None, base_offset, log_append_time, log_start_offset, ())
                )
                continue
            if version >= 8:
                errs = []
                for _ in range(r.array_len()):
                    idx = r.i32()
                    msg = r.string()
                    r.tags()
                    errs.append(RecordError(idx, msg))
                record_errors = tuple(errs)
                error_message = r.string()
            r.tags()
            out[new(TopicPartition, (topic, partition))] = new(
                PartitionProduceResponse,
                (error_code, error_message, base_offset, log_append_time, log_start_offset, record_errors),
            )
        r.tags()
    throttle = r.i32() if version >= 1 else 0
    r.tags()
    return out, throttle


# ------------------------------------------------------------------ coordinator and transactions
# Builders for the transactional path, so that its callers (the transaction manager, and code that
# commits or aborts a transaction by id without a producer) do not deal with the shapes that
# change between versions.


class Coordinator(NamedTuple):
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


def build_find_coordinator_request(
    version: int, key: str, key_type: int = COORDINATOR_KEY_TRANSACTION
) -> Any:
    """FindCoordinator for one key; v4 (KIP-699) takes a list of keys, a producer needs one."""
    cls = request_class(ApiKey.FIND_COORDINATOR, version)
    if version >= 4:
        return cls(key_type=key_type, coordinator_keys=(key,))
    if version >= 1:
        return cls(key=key, key_type=key_type)
    if key_type != COORDINATOR_KEY_GROUP:
        # As Java's builder: v0 cannot ask for a transaction coordinator.
        raise ValueError(f"FindCoordinator v0 finds group coordinators only, not key type {key_type}")
    return cls(key=key)


def find_coordinator_result(response: Any, key: str) -> Coordinator:
    """The coordinator of ``key`` in a FindCoordinator response of any version."""
    if hasattr(response, "coordinators"):
        for c in response.coordinators:
            if c.key == key:
                return Coordinator(
                    int(c.error_code), c.error_message, int(c.node_id), str(c.host), int(c.port)
                )
        raise ProtocolError(f"FindCoordinator response does not name key {key!r}")
    return Coordinator(
        int(response.error_code),
        getattr(response, "error_message", None),
        int(response.node_id),
        str(response.host),
        int(response.port),
    )


def build_add_partitions_to_txn_request(
    version: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> Any:
    """AddPartitionsToTxn v0–v3 (the client form; v4+ is broker to broker), grouped by topic."""
    cls = request_class(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    topic_cls = sys.modules[cls.__module__].AddPartitionsToTxnTopic
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return cls(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )


def add_partitions_to_txn_errors(response: Any) -> dict[TopicPartition, int]:
    """{partition: error code} from an AddPartitionsToTxn v0–v3 response."""
    return {
        TopicPartition(str(t.name), int(p.partition_index)): int(p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def build_end_txn_request(
    version: int, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
) -> Any:
    """EndTxn: commit (``committed``) or abort; the same fields in every version up to 4."""
    return _txn_request(ApiKey.END_TXN, version, transactional_id, producer_id, producer_epoch, committed=committed)


def _txn_request(
    api_key: ApiKey, version: int, transactional_id: str, producer_id: int, producer_epoch: int, **fields: Any
) -> Any:
    """A transaction request: the transactional id, producer id and epoch every one carries, and its own fields."""
    return request_class(api_key, version)(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, **fields
    )


def build_init_producer_id_request(
    version: int,
    transactional_id: str | None,
    transaction_timeout_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> Any:
    """InitProducerId; from v3 (KIP-360) the current producer id and epoch ask the coordinator
    to bump that epoch instead of fencing with a new id (the recovery after an abortable error)."""
    import datetime

    cls = request_class(ApiKey.INIT_PRODUCER_ID, version)
    kwargs: dict[str, Any] = {
        "transactional_id": transactional_id,
        "transaction_timeout": datetime.timedelta(milliseconds=transaction_timeout_ms),
    }
    if version >= 3:
        kwargs["producer_id"] = producer_id
        kwargs["producer_epoch"] = producer_epoch
    return cls(**kwargs)


def build_add_offsets_to_txn_request(
    version: int, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
) -> Any:
    """AddOffsetsToTxn: put the group's offsets topic partition into the transaction."""
    return _txn_request(
        ApiKey.ADD_OFFSETS_TO_TXN, version, transactional_id, producer_id, producer_epoch, group_id=group_id
    )


def build_txn_offset_commit_request(
    version: int,
    transactional_id: str,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets: Mapping[TopicPartition, tuple[int, str | None]],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> Any:
    """TxnOffsetCommit to the group coordinator: ``{partition: (next offset to consume, metadata)}``.

    v3+ (KIP-447) carries the consumer's generation and member id so that a zombie
    member's commit is fenced by the group, not only by the producer epoch.
    """
    cls = request_class(ApiKey.TXN_OFFSET_COMMIT, version)
    mod = sys.modules[cls.__module__]
    part_cls = mod.TxnOffsetCommitRequestPartition
    topic_cls = mod.TxnOffsetCommitRequestTopic
    part_fields = set(getattr(part_cls, "__dataclass_fields__", {}))
    by_topic: dict[str, list[Any]] = {}
    for tp, (offset, metadata) in offsets.items():
        kw: dict[str, Any] = {"partition_index": tp.partition, "committed_offset": offset, "committed_metadata": metadata}
        if "committed_leader_epoch" in part_fields:
            kw["committed_leader_epoch"] = -1
        by_topic.setdefault(tp.topic, []).append(part_cls(**kw))
    kwargs: dict[str, Any] = {
        "group_id": group_id,
        "topics": tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    }
    if version >= 3:
        kwargs.update(generation_id=generation_id, member_id=member_id, group_instance_id=group_instance_id)
    return _txn_request(ApiKey.TXN_OFFSET_COMMIT, version, transactional_id, producer_id, producer_epoch, **kwargs)


def txn_offset_commit_errors(response: Any) -> dict[TopicPartition, int]:
    """{partition: error code} from a TxnOffsetCommit response."""
    return {
        TopicPartition(str(t.name), int(p.partition_index)): int(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def api_version_entries(response: Any) -> dict[int, tuple[int, int]]:
    """{api_key: (min, max)} from an ApiVersions response of any version."""
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def negotiate(
    broker: Mapping[int, tuple[int, int]], client: Mapping[ApiKey, tuple[int, int]] = CLIENT_VERSIONS
) -> dict[int, int]:
    """Per API, the highest version both sides support; APIs with no overlap are left out."""
    out: dict[int, int] = {}
    for key, (c_lo, c_hi) in client.items():
        b = broker.get(int(key))
        if b is None:
            continue
        lo, hi = max(c_lo, b[0]), min(c_hi, b[1])
        if lo <= hi:
            out[int(key)] = hi
    return out


def describe(parts: Sequence[Buffer]) -> int:
    """Total bytes of a buffer list (for logging and metrics)."""
    return sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in parts)
