"""Wire-protocol costs: encoding a Produce request, decoding a 1,000-topic Metadata response.

Produce: ``build_produce_request`` + ``encode_request`` (the hand framer: small header
chunks around the untouched batch memoryviews, ready for ``sendmsg``) against building
kio's ProduceRequest and writing it with kio's ``entity_writer`` through the same
``encode_request`` (which copies every record batch into one bytes object). Requests of
1 x 16 KiB batch, 8 partitions x 16 KiB in one topic, and 8 topics x 16 KiB, at v3, v8,
v9 (first flexible), v11 and the legacy v2 (kio has no Produce below v3). "copied" is
what each path copies per request: the hand framer only its header chunks.

Metadata: a response of 1,000 topics with 1 or 10 partitions each (3 brokers, leader
epochs, replicas and ISR of 3), v9 and v12 (v10+ adds a topic id per topic), written
by kio. Timed: ``decode_response_header`` + ``decode_response`` (kio's reader), and
``Metadata.handle_response`` on a fresh holder (builds the Cluster) and on a holder that
already has the same answer (the steady-state refresh: nothing changed).

Every figure is per call: the minimum and the median of ``--repeat`` runs of a loop
sized to take about ``--min-time`` seconds.

    .venv/bin/python benchmarks/protocol_cost.py
    .venv/bin/python benchmarks/protocol_cost.py --repeat 3 --min-time 0.05   # quick look
    KPRODUCER_PURE_PYTHON=1 .venv/bin/python benchmarks/protocol_cost.py     # no C extension
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import io
import platform
import statistics
import struct
import sys
import timeit
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kio.serial import entity_writer

from kproducer.metadata import Metadata
from kproducer.network import protocol
from kproducer.network.protocol import ApiKey, build_produce_request, encode_request
from kproducer.record import native
from kproducer.structs import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.kio_responses import metadata_response  # noqa: E402  (the repository's test helpers)

BATCH_BYTES = 16 * 1024
PRODUCE_VERSIONS = (2, 3, 8, 9, 11)
METADATA_VERSIONS = (9, 12)
METADATA_TOPICS = 1000
CLIENT_ID = "kproducer"
ACKS, TIMEOUT_MS = -1, 30_000


def per_call(fn: Callable[[], object], repeat: int, min_time: float) -> tuple[float, float]:
    """(min, median) seconds per call of ``fn`` over ``repeat`` loops of about ``min_time`` s each."""
    timer = timeit.Timer(fn)
    number, elapsed = timer.autorange()
    number = max(1, int(number * min_time / max(elapsed, 1e-9)))
    runs = [t / number for t in timer.repeat(repeat=repeat, number=number)]
    return min(runs), statistics.median(runs)


def _fmt_us(t: tuple[float, float]) -> str:
    return f"{t[0] * 1e6:8.2f} {t[1] * 1e6:8.2f}"


def _fmt_ms(t: tuple[float, float]) -> str:
    return f"{t[0] * 1e3:8.2f} {t[1] * 1e3:8.2f}"


# ------------------------------------------------------------------ Produce
def produce_shapes() -> dict[str, dict[TopicPartition, memoryview]]:
    def batch() -> memoryview:
        return memoryview(bytearray(b"x" * BATCH_BYTES))

    return {
        "1 x 16 KiB": {TopicPartition("topic-a", 0): batch()},
        "8 partitions x 16 KiB": {TopicPartition("topic-a", p): batch() for p in range(8)},
        "8 topics x 16 KiB": {TopicPartition(f"topic-{t}", 0): batch() for t in range(8)},
    }


def kio_produce_request(version: int, batches: Mapping[TopicPartition, memoryview]) -> Any:
    """kio's ProduceRequest for ``batches``: its ``records`` field wants bytes, so each batch is copied."""
    cls = protocol.request_class(ApiKey.PRODUCE, version)
    mod = importlib.import_module(cls.__module__)
    by_topic: dict[str, list[Any]] = {}
    for tp, data in batches.items():
        by_topic.setdefault(tp.topic, []).append(
            mod.PartitionProduceData(index=tp.partition, records=bytes(data))
        )
    return cls(
        transactional_id=None,
        acks=ACKS,
        timeout=datetime.timedelta(milliseconds=TIMEOUT_MS),
        topic_data=tuple(
            mod.TopicProduceData(name=t, partition_data=tuple(ps)) for t, ps in by_topic.items()
        ),
    )


def _hand_framed(version: int, batches: Mapping[TopicPartition, memoryview]) -> list[protocol.Buffer]:
    body = build_produce_request(version, ACKS, TIMEOUT_MS, None, batches)
    return encode_request(ApiKey.PRODUCE, version, 7, CLIENT_ID, body)


def _kio_framed(version: int, batches: Mapping[TopicPartition, memoryview]) -> list[protocol.Buffer]:
    return encode_request(ApiKey.PRODUCE, version, 7, CLIENT_ID, kio_produce_request(version, batches))


def check_same_bytes(version: int, batches: Mapping[TopicPartition, memoryview]) -> None:
    """Both paths must put the same bytes on the wire, or the comparison means nothing."""
    hand = b"".join(bytes(b) for b in _hand_framed(version, batches))
    theirs = b"".join(bytes(b) for b in _kio_framed(version, batches))
    if hand != theirs:
        raise SystemExit(f"Produce v{version}: the hand framer and kio disagree on the bytes")


def bench_produce(repeat: int, min_time: float) -> None:
    print("== Produce request encode, per request (µs): min, median")
    print(
        f"   {'version':7} {'shape':22} {'hand framer':>17} {'copied':>7}   {'kio writer':>17} {'copied':>8}  ratio"
    )
    for version in PRODUCE_VERSIONS:
        for name, batches in produce_shapes().items():
            frame = _hand_framed(version, batches)
            batch_ids = {id(b) for b in batches.values()}
            copied = sum(len(bytes(b)) for b in frame if id(b) not in batch_ids)
            hand = per_call(lambda v=version, b=batches: _hand_framed(v, b), repeat, min_time)
            line = f"   v{version:<6} {name:22} {_fmt_us(hand)} {copied:6d} B"
            if version >= 3:
                check_same_bytes(version, batches)
                total = sum(len(b) for b in _kio_framed(version, batches))
                theirs = per_call(lambda v=version, b=batches: _kio_framed(v, b), repeat, min_time)
                line += f"   {_fmt_us(theirs)} {total:7d} B  {theirs[0] / hand[0]:5.1f}x"
            else:
                line += "   (kio has no Produce below v3)"
            print(line, flush=True)


# ------------------------------------------------------------------ Metadata
def metadata_body(version: int, topics: int, partitions: int) -> Any:
    """``topics`` topics of ``partitions`` partitions on 3 brokers, leaders spread, replicas and ISR of 3."""
    brokers = [(i, f"broker-{i}.example", 9092) for i in range(3)]
    parts = [(p, p % 3, 5, (0, 1, 2)) for p in range(partitions)]
    return metadata_response(version, brokers, {f"topic-{t:05d}": (0, parts) for t in range(topics)})


def response_frame(version: int, body: Any) -> memoryview:
    """The frame after its size prefix: correlation id, tagged fields when flexible, the body."""
    out = io.BytesIO()
    out.write(struct.pack(">i", 42))
    if protocol.response_header_version(ApiKey.METADATA, version) >= 1:
        out.write(b"\x00")
    entity_writer(type(body))(out, body)
    return memoryview(out.getvalue())


def bench_metadata(repeat: int, min_time: float) -> None:
    print(f"== Metadata response decode, {METADATA_TOPICS:,} topics, per response (ms): min, median")
    print(
        f"   {'version':7} {'partitions':>10} {'KiB':>7}   {'decode_response':>17}"
        f"   {'handle_response, new':>20}   {'handle_response, same':>21}"
    )
    for version in METADATA_VERSIONS:
        for partitions in (1, 10):
            frame = response_frame(version, metadata_body(version, METADATA_TOPICS, partitions))
            header_version = protocol.response_header_version(ApiKey.METADATA, version)

            def decode(frame: memoryview = frame, v: int = version, hv: int = header_version) -> Any:
                _, offset = protocol.decode_response_header(hv, frame)
                return protocol.decode_response(ApiKey.METADATA, v, frame, offset)

            response = decode()
            names = [t.name for t in response.topics]
            assert len(names) == METADATA_TOPICS

            def apply_new(r: Any = response, names: list[str] = names) -> None:
                Metadata().handle_response(r, names, 0)

            warm = Metadata()
            warm.handle_response(response, names, 0)

            def apply_same(r: Any = response, names: list[str] = names, md: Metadata = warm) -> None:
                md.handle_response(r, names, 0)

            cluster = warm.cluster
            assert cluster.partition_count("topic-00999") == partitions
            print(
                f"   v{version:<6} {partitions:10d} {len(frame) / 1024:7.1f}"
                f"   {_fmt_ms(per_call(decode, repeat, min_time))}"
                f"   {_fmt_ms(per_call(apply_new, repeat, min_time)):>20}"
                f"   {_fmt_ms(per_call(apply_same, repeat, min_time)):>21}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure (default 7)")
    parser.add_argument(
        "--min-time", type=float, default=0.2, help="seconds each run lasts at least (default 0.2)"
    )
    parser.add_argument("--only", choices=("produce", "metadata"), help="run one half only")
    args = parser.parse_args(argv)
    print(
        f"Python {platform.python_version()}, kio {importlib.metadata.version('kio')}, "
        f"C extension {'on' if native.AVAILABLE else 'off'}, {platform.machine()}; "
        f"{args.repeat} runs of >= {args.min_time} s each"
    )
    if args.only in (None, "produce"):
        bench_produce(args.repeat, args.min_time)
    if args.only in (None, "metadata"):
        bench_metadata(args.repeat, args.min_time)


if __name__ == "__main__":
    main(sys.argv[1:])
