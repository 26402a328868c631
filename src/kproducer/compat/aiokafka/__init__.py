"""aiokafka's producer API on kproducer: change ``from aiokafka import ...`` to ``from kproducer.compat.aiokafka import ...``.

:class:`AIOKafkaProducer` takes aiokafka's constructor keywords and has its
methods, and runs on one :class:`~kproducer.aio.AsyncProducer` (the same
Sender thread and accumulator as every kproducer producer); this module only
translates names, shapes and exceptions. What stays as in aiokafka:

- ``await producer.send(...)`` returns an ``asyncio.Future`` of a
  :class:`~kproducer.compat.aiokafka.structs.RecordMetadata`; a record too large
  for ``max_request_size`` and a serializer's exception raise from ``send()``
  itself, other failures arrive through the future, as aiokafka's exceptions
  (:mod:`kproducer.compat.aiokafka.errors`).
- Serializers are ``f(obj) -> bytes`` and are called for every key and value,
  ``None`` included, on the caller's task.
- Keys go to ``murmur2(key) % partitions`` (aiokafka's DefaultPartitioner and
  the Java client's); a custom ``partitioner(key_bytes, all, available)`` is
  called as aiokafka calls it.
- ``create_batch()`` / ``send_batch()``: a BatchBuilder fills up to
  ``max_batch_size`` bytes as aiokafka's does, and its records go to the given
  partition, in order.

What differs is listed in docs/migrating.md ("From aiokafka").
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from types import TracebackType
from typing import Any

from kproducer.aio import AsyncProducer
from kproducer.compat._common import PeerPartitioner, bootstrap_with_port, refuse
from kproducer.compat.aiokafka import errors
from kproducer.compat.aiokafka import partitioner as _partitioner
from kproducer.compat.aiokafka.structs import OffsetAndMetadata, RecordMetadata, TopicPartition
from kproducer.errors import KafkaError as _KproducerError
from kproducer.record.builder import RECORD_BATCH_OVERHEAD
from kproducer.record.default_record import byte_len, encode_headers, record_size
from kproducer.structs import RecordMetadata as _KRecordMetadata

__all__ = [
    "AIOKafkaProducer",
    "BatchBuilder",
    "BatchRecordMetadata",
    "OffsetAndMetadata",
    "RecordMetadata",
    "TopicPartition",
    "errors",
]

_CLIENT = "aiokafka"
_translate = errors.translate
_missing = object()
_DEFAULT_PARTITIONER = object()
_COMPRESSION = {None: "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


class BatchRecordMetadata:
    """What ``BatchBuilder.append`` returns: the record's offset in the batch, its size and timestamp."""

    __slots__ = ("offset", "size", "timestamp")

    def __init__(self, offset: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    @property
    def crc(self) -> None:
        """None, as aiokafka's for message format v2 (the CRC covers the whole batch)."""
        return None

    def __repr__(self) -> str:
        return f"BatchRecordMetadata(offset={self.offset}, size={self.size}, timestamp={self.timestamp})"


class BatchBuilder:
    """aiokafka's ``BatchBuilder``: records for one ``send_batch`` call, up to ``max_batch_size`` bytes.

    A record is accepted while the batch, in Kafka's v2 record format, stays
    below ``max_batch_size`` (the first record always is): the test of
    aiokafka's compiled record builder, the one its wheels install, so the same
    records fill the same batches. (aiokafka's pure-Python fallback also takes a
    record that ends exactly at ``max_batch_size``.) ``send_batch`` puts them on
    one partition in order.
    """

    def __init__(
        self,
        batch_size: int,
        key_serializer: Callable[[Any], Any] | None,
        value_serializer: Callable[[Any], Any] | None,
    ) -> None:
        self._batch_size = batch_size
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._records: list[tuple[int, Any, Any, list[tuple[str, bytes | None]]]] = []
        self._size = RECORD_BATCH_OVERHEAD
        self._first_timestamp = 0
        self._closed = False

    def append(
        self, *, timestamp: int | None, key: Any, value: Any, headers: Iterable[tuple[str, bytes | None]] | None = None
    ) -> BatchRecordMetadata | None:
        """Add a record (``timestamp`` in ms since the epoch, None for now); None when the batch is full or closed.

        A full batch closes itself, as aiokafka's does.
        """
        if self._closed:
            return None
        key_bytes = key if self._key_serializer is None else self._key_serializer(key)
        value_bytes = value if self._value_serializer is None else self._value_serializer(value)
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        elif type(timestamp) is not int:
            raise TypeError(f"timestamp must be an int (ms since the epoch) or None, got {type(timestamp).__name__}")
        hdrs = list(headers) if headers else []
        offset = len(self._records)
        if not offset:
            self._first_timestamp = timestamp
        size = record_size(
            offset, timestamp - self._first_timestamp, byte_len(key_bytes), byte_len(value_bytes),
            encode_headers(hdrs)[1],
        )
        if offset and self._size + size >= self._batch_size:
            self.close()
            return None
        self._records.append((timestamp, key_bytes, value_bytes, hdrs))
        self._size += size
        return BatchRecordMetadata(offset, size, timestamp)

    def close(self) -> None:
        """Take no more records (``send_batch`` closes the batch too)."""
        self._closed = True

    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        """The batch's size in bytes in the v2 format, uncompressed, its 61-byte header included."""
        return self._size

    def record_count(self) -> int:
        return len(self._records)

    def records(self) -> list[tuple[int, Any, Any, list[tuple[str, bytes | None]]]]:
        """``(timestamp, key, value, headers)`` of each record, serialized, in order."""
        return list(self._records)


class AIOKafkaProducer:
    """aiokafka's ``AIOKafkaProducer`` on kproducer (see the module's documentation).

    The keywords are aiokafka's, with aiokafka's defaults, except that without
    ``enable_idempotence`` the producer is idempotent unless ``acks`` is 0 or 1
    (the Java client's default since Kafka 3.0), where aiokafka takes ``acks=1``
    and no idempotence: pass ``acks=1`` for aiokafka's. Without
    idempotence one request per connection is in flight, so that a retry cannot
    reorder a partition's records (aiokafka sends one batch per partition at a
    time). ``request_timeout_ms`` also bounds the waits of ``send()`` for
    metadata and buffer memory (``max.block.ms``), as in aiokafka.

    ``ssl_context`` is used as it is (kproducer's ``ssl.context``). Refused,
    naming the keyword: ``sasl_mechanism='GSSAPI'`` and the ``sasl_kerberos_*`` keywords
    (no Kerberos), ``sasl_oauth_token_provider`` (aiokafka's providers are
    coroutines; kproducer calls its token provider on its I/O thread).
    """

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        bootstrap_servers: str | Iterable[str] = "localhost",
        client_id: str | None = None,
        metadata_max_age_ms: int = 300000,
        request_timeout_ms: int = 40000,
        api_version: Any = None,
        acks: Any = _missing,
        key_serializer: Callable[[Any], Any] | None = None,
        value_serializer: Callable[[Any], Any] | None = None,
        compression_type: str | None = None,
        max_batch_size: int = 16384,
        partitioner: Any = _DEFAULT_PARTITIONER,
        max_request_size: int = 1048576,
        linger_ms: int = 0,
        retry_backoff_ms: int = 100,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        connections_max_idle_ms: int | None = 540000,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        sasl_mechanism: str = "PLAIN",
        sasl_plain_password: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        sasl_oauth_token_provider: Any = None,
    ) -> None:
        if loop is not None:
            warnings.warn(
                "AIOKafkaProducer: the `loop` parameter is deprecated in aiokafka and unused here: the producer "
                "runs on the loop that calls start()",
                DeprecationWarning,
                stacklevel=2,
            )
        if api_version is not None:
            warnings.warn(
                "AIOKafkaProducer: `api_version` is a no-op (as in aiokafka since 0.13): versions are negotiated",
                DeprecationWarning,
                stacklevel=2,
            )
        sasl = security_protocol.upper().startswith("SASL")
        if sasl and sasl_mechanism.upper() == "GSSAPI":
            raise _refused("sasl_mechanism='GSSAPI'", "kproducer does not speak Kerberos")
        if sasl_kerberos_domain_name is not None or sasl_kerberos_service_name != "kafka":
            raise _refused("sasl_kerberos_*", "kproducer does not speak Kerberos")
        if sasl_oauth_token_provider is not None:
            raise _refused(
                "sasl_oauth_token_provider",
                "aiokafka's token providers are coroutines and kproducer calls its provider on its I/O thread; "
                "use kproducer.AsyncProducer with sasl.oauthbearer.token.provider (a plain callable)",
            )
        if acks not in (0, 1, -1, "all", _missing):
            raise ValueError(f"Invalid ACKS parameter {acks!r}: one of 0, 1, -1, 'all'")
        if compression_type not in _COMPRESSION:
            raise ValueError(f"Invalid compression type {compression_type!r}: one of gzip, snappy, lz4, zstd, None")
        if transactional_id is not None:
            enable_idempotence = True
        if enable_idempotence is None:
            # Not given: idempotent (acks=all), as the Java client, unless acks=0 or 1 asks otherwise.
            enable_idempotence = acks is _missing or acks in ("all", -1)
        if enable_idempotence:
            if acks is _missing:
                acks = "all"
            elif acks not in ("all", -1):
                raise ValueError(f"acks={acks} not supported if enable_idempotence=True")
        elif acks is _missing:
            acks = 1
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_with_port(bootstrap_servers),
            "metadata.max.age.ms": metadata_max_age_ms,
            "request.timeout.ms": request_timeout_ms,
            "max.block.ms": request_timeout_ms,
            "acks": "all" if acks in ("all", -1) else acks,
            "compression.type": _COMPRESSION[compression_type],
            "batch.size": max_batch_size,
            "max.request.size": max_request_size,
            "linger.ms": linger_ms,
            "retry.backoff.ms": retry_backoff_ms,
            "security.protocol": security_protocol,
            "connections.max.idle.ms": -1 if connections_max_idle_ms is None else connections_max_idle_ms,
            "enable.idempotence": bool(enable_idempotence),
        }
        if not enable_idempotence:
            config["max.in.flight.requests.per.connection"] = 1
        if ssl_context is not None:
            config["ssl.context"] = ssl_context
        if client_id is not None:
            config["client.id"] = client_id
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
            config["transaction.timeout.ms"] = transaction_timeout_ms
        if sasl:
            config["sasl.mechanism"] = sasl_mechanism
            if sasl_plain_username is not None:
                config["sasl.username"] = sasl_plain_username
            if sasl_plain_password is not None:
                config["sasl.password"] = sasl_plain_password
        if partitioner is not _DEFAULT_PARTITIONER and not _is_aiokafka_default(partitioner):
            config["partitioner.class"] = PeerPartitioner(partitioner)
        self._producer = AsyncProducer(config)
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_batch_size = max_batch_size
        self._transactional = transactional_id is not None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start the producer; a transactional one also registers its ``transactional_id`` (InitProducerId)."""
        try:
            await self._producer.start()
            self._loop = asyncio.get_running_loop()
            if self._transactional:
                await self._producer.init_transactions()
        except _KproducerError as e:
            raise _translate(e)

    async def stop(self) -> None:
        """Flush what was sent, then close the connections (never blocking the loop)."""
        try:
            await self._producer.stop()
        except _KproducerError as e:
            raise _translate(e)

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged or failed, and its future resolved."""
        try:
            await self._producer.flush()
        except _KproducerError as e:
            raise _translate(e)

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, waiting for its metadata (up to ``request_timeout_ms``)."""
        try:
            infos = await self._producer.partitions_for(topic)
        except _KproducerError as e:
            raise _translate(e)
        return {info.partition for info in infos}

    # ------------------------------------------------------------------ send
    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future resolves to its RecordMetadata (or raises its error)."""
        key_bytes = key if self._key_serializer is None else self._key_serializer(key)
        value_bytes = value if self._value_serializer is None else self._value_serializer(value)
        try:
            fut = await self._producer.send(
                topic, value_bytes, key_bytes, partition=partition, timestamp=timestamp_ms,
                headers=list(headers) if headers else None,
            )
        except _KproducerError as e:
            raise _translate(e)
        if fut.done() and not fut.cancelled():
            error = fut.exception()
            if error is not None:
                # Failed before it reached a batch (too large...): aiokafka raises these from send().
                raise _translate(error)
        return self._relay(fut)

    def _relay(self, fut: asyncio.Future[_KRecordMetadata]) -> asyncio.Future[RecordMetadata]:
        """The future aiokafka's send() returns: aiokafka's RecordMetadata, aiokafka's exceptions."""
        loop = self._loop or asyncio.get_running_loop()
        out: asyncio.Future[RecordMetadata] = loop.create_future()
        fut.add_done_callback(partial(_settle, out))
        return out

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    def create_batch(self) -> BatchBuilder:
        """An empty BatchBuilder of up to ``max_batch_size`` bytes, with the producer's serializers."""
        return BatchBuilder(self._max_batch_size, self._key_serializer, self._value_serializer)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[RecordMetadata]:
        """Send the batch's records to ``partition`` of ``topic``, in order.

        The future resolves to the metadata of the batch's first record (its offset
        is where the batch starts), or raises the first failure among its records.
        """
        batch.close()
        records = batch.records()
        if not records:
            raise ValueError("send_batch: the batch has no records")
        futures: list[asyncio.Future[RecordMetadata]] = []
        for timestamp, key_bytes, value_bytes, hdrs in records:
            try:
                fut = await self._producer.send(
                    topic, value_bytes, key_bytes, partition=partition, timestamp=timestamp, headers=hdrs or None
                )
            except _KproducerError as e:
                raise _translate(e)
            futures.append(self._relay(fut))
        gathered = asyncio.gather(*futures)
        loop = self._loop or asyncio.get_running_loop()
        out: asyncio.Future[RecordMetadata] = loop.create_future()

        def done(g: asyncio.Future[list[RecordMetadata]]) -> None:
            if out.done():
                if not g.cancelled():
                    g.exception()  # retrieved: the outcome went nowhere else
                return
            if g.cancelled():
                out.cancel()
                return
            error = g.exception()
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(g.result()[0])

        gathered.add_done_callback(done)
        return out

    # ------------------------------------------------------------------ transactions
    def _ensure_transactional(self) -> None:
        if not self._transactional:
            raise errors.IllegalOperation("You need to configure transaction_id to use transactions")

    async def begin_transaction(self) -> None:
        self._ensure_transactional()
        try:
            await self._producer.begin_transaction()
        except _KproducerError as e:
            raise _translate(e)

    async def commit_transaction(self) -> None:
        """Send the transaction's records, wait for them, and commit."""
        self._ensure_transactional()
        try:
            await self._producer.commit_transaction()
        except _KproducerError as e:
            raise _translate(e)

    async def abort_transaction(self) -> None:
        self._ensure_transactional()
        try:
            await self._producer.abort_transaction()
        except _KproducerError as e:
            raise _translate(e)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AIOKafkaProducer]:
        """``async with producer.transaction():`` begins; commits on success, aborts on an exception.

        The exception is re-raised after the abort. As in aiokafka, no abort is
        attempted when the producer is in a fatal state (fenced...).
        """
        self._ensure_transactional()
        try:
            async with self._producer.transaction():
                yield self
        except _KproducerError as e:
            raise _translate(e)

    async def send_offsets_to_transaction(
        self, offsets: Mapping[Any, int | OffsetAndMetadata | tuple[int, str]], group_id: str
    ) -> None:
        """Commit a consumer group's offsets (``{TopicPartition: offset}``) with the open transaction."""
        self._ensure_transactional()
        if not group_id or not isinstance(group_id, str):
            raise ValueError(group_id)
        normalized = {
            tp: OffsetAndMetadata(*value) if isinstance(value, tuple) and not isinstance(value, OffsetAndMetadata)
            else value
            for tp, value in offsets.items()
        }
        try:
            await self._producer.send_offsets_to_transaction(normalized, group_id)
        except _KproducerError as e:
            raise _translate(e)

    # ------------------------------------------------------------------ kproducer's extras
    @property
    def producer(self) -> AsyncProducer:
        """The kproducer AsyncProducer underneath (metrics, kproducer's own API)."""
        return self._producer

    def __repr__(self) -> str:
        return f"<kproducer.compat.aiokafka.AIOKafkaProducer on {self._producer!r}>"


def _settle(out: asyncio.Future[RecordMetadata], fut: asyncio.Future[_KRecordMetadata]) -> None:
    """Done-callback of kproducer's future: settle aiokafka's (skipped if the application cancelled it)."""
    if fut.cancelled():
        if not out.done():
            out.cancel()
        return
    error = fut.exception()
    if out.done():
        return
    if error is not None:
        out.set_exception(_translate(error))
        return
    md = fut.result()
    out.set_result(
        RecordMetadata(
            md.topic, md.partition, md.topic_partition, md.offset, md.timestamp, md.timestamp_type, None,
        )
    )


def _refused(keyword: str, reason: str) -> BaseException:
    """A keyword with no meaning here: aiokafka's KafkaConfigurationError (a ValueError), naming it and why."""
    return refuse(errors.KafkaConfigurationError, _CLIENT, keyword, reason)


def _is_aiokafka_default(partitioner: Any) -> bool:
    """aiokafka's own DefaultPartitioner (murmur2 of the key): kproducer's built-in does the same for keys."""
    cls = type(partitioner) if not isinstance(partitioner, type) else partitioner
    if cls is _partitioner.DefaultPartitioner:
        return True
    return cls.__name__ == "DefaultPartitioner" and cls.__module__.startswith("aiokafka")
