"""Read a topic raw and decide transactional visibility from the control markers themselves.

Neither test broker (Tansu, librdkafka's mock cluster) filters aborted records for
read_committed consumers, though both write the control markers. So this module
fetches every batch raw (a hand-framed Fetch v4, read_uncommitted, from each
partition's leader as confluent-kafka's metadata names it) and parses the batches
with kafka-python's record classes, independent of kproducer's reader:

* a data batch carries the producer id and the transactional flag;
* a control batch's single record has a key of (version int16, type int16), where
  type 0 is ABORT and 1 is COMMIT;
* a transactional record is committed when the next control batch of its producer
  id on that partition is a COMMIT, aborted when it is an ABORT, open when there
  is none yet. Non-transactional records are visible at once.

Loopback only; every socket operation has a timeout; loops are bounded.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

from tests.support.raw_produce import _recv_exact, _string

_FETCH = 1
_FETCH_VERSION = 4
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


@dataclass(frozen=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    producer_epoch: int
    transactional: bool


@dataclass(frozen=True)
class ControlMarker:
    topic: str
    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass
class TopicView:
    """What a read_committed consumer should see, decided from the markers."""

    committed: list[RawRecord] = field(default_factory=list)
    aborted: list[RawRecord] = field(default_factory=list)
    open: list[RawRecord] = field(default_factory=list)
    markers: list[ControlMarker] = field(default_factory=list)

    def committed_values(self) -> list[bytes | None]:
        return [r.value for r in self.committed]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def string(self) -> str:
        n = self.take(">h")
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def blob(self) -> bytes | None:
        n = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


def _fetch_raw(host: str, port: int, topic: str, partition: int, offset: int, timeout: float) -> tuple[int, int, bytes]:
    """One Fetch v4 (read_uncommitted): (error code, high watermark, record bytes)."""
    body = struct.pack(">iiiib", -1, 100, 1, 8 << 20, 0)
    body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1)
    body += struct.pack(">iqi", partition, offset, 8 << 20)
    header = struct.pack(">hhi", _FETCH, _FETCH_VERSION, 11) + _string("kproducer-txn-reader")
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        data = _recv_exact(sock, size)
    c = _Cursor(data)
    c.take(">i")  # correlation id
    c.take(">i")  # throttle
    for _ in range(c.take(">i")):
        c.string()
        for _ in range(c.take(">i")):
            c.take(">i")  # partition
            code = c.take(">h")
            hw = c.take(">q")
            c.take(">q")  # last stable offset
            n_aborted = c.take(">i")
            for _ in range(max(n_aborted, 0)):
                c.take(">q")
                c.take(">q")
            records = c.blob() or b""
            return code, hw, records
    raise AssertionError(f"Fetch response for {topic}-{partition} names no partition")


def _leaders(bootstrap: str, topic: str, timeout: float) -> dict[int, tuple[str, int]]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise AssertionError(f"topic {topic!r} not in metadata: {t.error if t else 'missing'}")
    out = {}
    for pid, p in t.partitions.items():
        b = md.brokers[p.leader]
        out[pid] = (b.host, b.port)
    return out


def read_partition_raw(
    host: str, port: int, topic: str, partition: int, timeout: float = 10.0
) -> tuple[list[RawRecord], list[ControlMarker]]:
    """Every record and control marker of one partition, in offset order."""
    from kafka.record.memory_records import MemoryRecords

    records: list[RawRecord] = []
    markers: list[ControlMarker] = []
    offset = 0
    deadline = time.monotonic() + timeout
    for _ in range(10_000):
        if time.monotonic() > deadline:
            raise AssertionError(f"reading {topic}-{partition} raw took longer than {timeout}s")
        code, hw, raw = _fetch_raw(host, port, topic, partition, offset, timeout)
        if code != 0:
            raise AssertionError(f"Fetch {topic}-{partition} at {offset}: error code {code}")
        if offset >= hw:
            break
        mr = MemoryRecords(raw)
        progressed = False
        while True:
            batch = mr.next_batch()
            if batch is None:
                break
            for rec in batch:
                if rec.offset < offset:
                    continue
                if batch.is_control_batch:
                    key = rec.key or b""
                    _version, kind = struct.unpack(">hh", key[:4])
                    markers.append(
                        ControlMarker(topic, partition, rec.offset, batch.producer_id, batch.producer_epoch, kind == CONTROL_COMMIT)
                    )
                else:
                    records.append(
                        RawRecord(
                            topic,
                            partition,
                            rec.offset,
                            rec.key,
                            rec.value,
                            batch.producer_id,
                            batch.producer_epoch,
                            bool(batch.is_transactional),
                        )
                    )
            nxt = batch.base_offset + batch.last_offset_delta + 1
            if nxt > offset:
                offset = nxt
                progressed = True
        if not progressed:
            raise AssertionError(f"Fetch {topic}-{partition} at {offset} returned no whole batch (hw {hw})")
    return records, markers


def read_topic_transactional(bootstrap: str, topic: str, timeout: float = 20.0) -> TopicView:
    """Every partition of ``topic`` read raw, records sorted by (partition, offset) into committed/aborted/open."""
    view = TopicView()
    for partition, (host, port) in sorted(_leaders(bootstrap, topic, timeout).items()):
        records, markers = read_partition_raw(host, port, topic, partition, timeout)
        view.markers.extend(markers)
        # For each record, the first marker of its producer at a higher offset decides.
        for rec in records:
            if not rec.transactional:
                view.committed.append(rec)
                continue
            decided = next(
                (m for m in markers if m.producer_id == rec.producer_id and m.offset > rec.offset), None
            )
            if decided is None:
                view.open.append(rec)
            elif decided.commit:
                view.committed.append(rec)
            else:
                view.aborted.append(rec)
    return view


def read_transactional_topics(bootstrap: str, topics: list[str], timeout: float = 20.0) -> TopicView:
    """:func:`read_topic_transactional` over several topics, merged."""
    merged = TopicView()
    for topic in topics:
        v = read_topic_transactional(bootstrap, topic, timeout)
        merged.committed += v.committed
        merged.aborted += v.aborted
        merged.open += v.open
        merged.markers += v.markers
    return merged


__all__ = [
    "RawRecord",
    "ControlMarker",
    "TopicView",
    "read_partition_raw",
    "read_topic_transactional",
    "read_transactional_topics",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
]
