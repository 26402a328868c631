"""Side-by-side producer benchmark: kproducer vs confluent-kafka, aiokafka and kafka-python, doing the same work.

Every client runs in its own child process against one Tansu broker started here,
so the CPU time and peak RSS reported are the client's alone. Each run writes to a
fresh topic; before the first, 200 MB written by a child process warm the broker
(``broker_warmup.py``), and the client that goes first changes from repeat to
repeat. Prints records/s, MB/s, client CPU µs per record and per partition batch (the process's
CPU time while the clock ran, every thread, user and system: not the imports, the client's start
or its close; over the batches the client's own metrics count: kproducer's ``byte-total`` over
``batch-size-avg``, librdkafka's ``batchcnt`` statistics), the broker's CPU µs per record
over the client's whole run (Tansu's CPU time from /proc, when it was started here: a client
that sends smaller batches costs the broker more a record), p99 delivery
latency (send → acknowledgement) and peak RSS, with ratios against confluent-kafka,
each client's config, and the machine's load average; writes a Markdown table
(and a PNG bar chart with --png).

    .venv/bin/python benchmarks/compare.py                          # 1M x 100 B, acks=1, no compression
    .venv/bin/python benchmarks/compare.py --records 200000 --size 1024 --acks all --compression lz4
    # the whole matrix in one run (one Tansu): workloads x acks x compression
    .venv/bin/python benchmarks/compare.py --matrix --markdown out.md --png out.png
    # keyed records (20,000 distinct keys) over 1, 8, 100 and 1,000 partitions: where the cost per
    # batch shows, since each batch of a keyed 1,000-partition topic holds only a few records
    .venv/bin/python benchmarks/compare.py --matrix --keys 20000 --partitions-list 1,8,100,1000 \
        --workloads 200000x100,100000x1024 --acks-list 1 --compression-list none,lz4 \
        --clients kproducer,confluent-kafka

The same work for every client:

- No per-record Python callback anywhere. One record in ``--sample-every`` (default
  1,000) carries a delivery callback that records its latency, on every client; the
  others carry none. confluent-kafka gets no default
  ``on_delivery`` (so unsampled records cost no Python call on delivery) and an
  ``error_cb``; a per-record failure is counted from the topic afterwards (below).
- Inputs exist before the clock starts: the payload for the record clients, the
  Arrow table for ``kproducer-arrow``. ``kproducer-arrow-py`` starts from Python
  ``bytes`` objects and builds the Arrow array inside the clock, so that both
  costs are visible.
- Bulk calls (``send_batch``, ``send_arrow``) take 10,000 records a call; their
  latency sample is the call's completion, i.e. its first record's latency.
- Each client's defaults, printed with the table, except ``linger.ms=5`` where a
  client's default differs (kproducer and librdkafka already default to 5 ms).
  librdkafka batches up to 1 MB per partition by default (``batch.size=1000000``),
  the Java client (and so aiokafka and kafka-python) 16 KB; kproducer keeps
  Java's 16 KB ``batch.size`` and lets a hot partition's batch grow to
  ``batch.max.size``. ``--batch-size BYTES`` gives every client the same batch
  size for a like-for-like run.
- After each run, outside the clock, the parent counts the records on the topic
  with confluent-kafka's consumer (``--no-verify`` skips it): ``on topic`` must
  equal the records sent.

The asyncio clients (``kproducer-async``, ``aiokafka``, ``confluent-aio``, i.e.
kproducer.aio.AsyncProducer, aiokafka and confluent_kafka.aio.AIOProducer) run the
same loop: ``await send()`` per record in one task, the delivery futures gathered
every 20,000. They are compared among themselves in the lines under the table, and
each reports a 1 ms ticker's worst gap during the run (how long the client held
the event loop) beside the same ticker's worst gap alone just before:

    .venv/bin/python benchmarks/compare.py --clients kproducer-async,aiokafka,confluent-aio --acks all

``asyncio-floor`` runs the same loop with no client at all (a coroutine and a loop
future per record, settled in rounds): the most records/s any asyncio client can
reach in this loop shape on this machine, printed against aiokafka in the same run.
It sends nothing and never yields inside send(), so its loop gap is the shape's own.

Adding a client is one entry in ``RUNNERS``: a function that runs the workload in
the child and returns its timing, and a function that describes its config.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_loops import confluent_produce  # noqa: E402

MATRIX_WORKLOADS = [(1_000_000, 100), (200_000, 1024)]
MATRIX_ACKS = ["1", "all"]
MATRIX_COMPRESSION = ["none", "lz4", "zstd"]
BULK_CHUNK = 10_000
# Settings every client gets on top of its own (security.protocol, ssl.ca.location: kproducer and
# librdkafka share these names); set by benchmarks/tls_bench.py for ``--tls``, empty otherwise.
SECURITY: dict[str, str] = json.loads(os.environ.get("KPRODUCER_BENCH_SECURITY", "{}"))


# ---------------------------------------------------------------- the workload, as every client sees it
@dataclass
class Cell:
    """One benchmark cell: what every client is asked to do."""

    records: int
    size: int
    acks: str
    compression: str
    partitions: int = 8
    batch_size: int | None = None
    kproducer_extra: dict[str, str] = field(default_factory=dict)
    sample_every: int = 0
    keys: int = 0  # distinct keys, used in turn (0: no key, each client's sticky/uniform choice)

    def __post_init__(self) -> None:
        if self.sample_every <= 0:
            self.sample_every = 1000


def bench_keys(cell: Cell) -> list[bytes] | None:
    """The keys every client sends in turn, built before the clock (None for an unkeyed cell)."""
    return [b"key-%08d" % i for i in range(cell.keys)] if cell.keys else None


class Latency:
    """Send → acknowledgement latency of one record in ``every``; the same sampler for every client."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.samples: list[float] = []

    def callback(self) -> Callable[..., None]:
        """A callback (any arguments) that records the latency since now."""
        start = time.perf_counter()
        samples = self.samples

        def done(*_: Any) -> None:
            samples.append((time.perf_counter() - start) * 1000)

        return done

    def p99(self) -> float:
        if not self.samples:
            return 0.0
        s = sorted(self.samples)
        return s[min(len(s) - 1, int(0.99 * (len(s) - 1)))]


@dataclass
class Timing:
    elapsed_s: float
    rss_before_mb: float
    failed: int = 0
    loop_gap_ms: float | None = None  # asyncio clients: a 1 ms ticker's worst gap during the run
    idle_gap_ms: float | None = None  # the same ticker alone for 0.5 s before the run: the machine's own share
    batches: float | None = None  # partition batches sent, from the client's own metrics (None: not exposed)
    # Process CPU (every thread, user and system) while the clock ran: imports, the client's start
    # and its close are outside it, so that CPU per record and per batch is the record path's.
    cpu_s: float | None = None


def _rss_mb() -> float:
    """Peak RSS so far (ru_maxrss), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------- kproducer
def kproducer_config(cell: Cell, bootstrap: str = "<broker>") -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": cell.acks, "compression.type": cell.compression}
    if cell.batch_size is not None:
        conf["batch.size"] = cell.batch_size
    conf.update(cell.kproducer_extra)
    conf.update(SECURITY)
    return conf


def _kproducer_defaults(cell: Cell) -> str:
    from kproducer.config import ProducerConfig

    cfg = ProducerConfig(kproducer_config(cell, "127.0.0.1:9092"))
    keys = ["batch.size", "batch.max.size", "linger.ms", "buffer.memory", "max.in.flight.requests.per.connection",
            "enable.idempotence"]  # fmt: skip
    out = []
    for k in keys:
        try:
            out.append(f"{k}={cfg.get(k)}")
        except Exception:  # a key this version does not have
            continue
    return ", ".join(out)


def _kproducer(cell: Cell, bootstrap: str, topic: str, lat: Latency, mode: str) -> Timing:
    from kproducer.producer import Producer

    p = Producer(kproducer_config(cell, bootstrap))
    payload = os.urandom(cell.size)
    perf = time.perf_counter
    n, every = cell.records, lat.every
    arrow_chunk = None
    if mode in ("arrow", "arrow-py"):
        import pyarrow as pa  # imported (and for "arrow" the table built) before the clock starts

        if mode == "arrow":
            # From buffers: pa.array() on Python objects would import pandas (~40 MB RSS) when it is installed.
            rows = BULK_CHUNK
            offsets = pa.py_buffer(b"".join(int.to_bytes(i * cell.size, 4, "little") for i in range(rows + 1)))
            column = pa.BinaryArray.from_buffers(pa.binary(), rows, [None, offsets, pa.py_buffer(payload * rows)])
            arrow_chunk = pa.table({"value": column})
    values = [payload] * BULK_CHUNK
    keys = bench_keys(cell)
    if arrow_chunk is not None and keys is not None:
        import pyarrow as pa

        arrow_chunk = arrow_chunk.append_column("key", pa.array([keys[i % len(keys)] for i in range(BULK_CHUNK)], pa.binary()))
    rss_before = _rss_mb()
    t0, c0 = perf(), time.process_time()
    if mode == "send" and keys is None:
        send = p.send
        for i in range(n):
            if i % every == 0:
                send(topic, payload, callback=lat.callback())
            else:
                send(topic, payload)
    elif mode == "send":
        send, nkeys = p.send, len(keys)
        for i in range(n):
            if i % every == 0:
                send(topic, payload, key=keys[i % nkeys], callback=lat.callback())
            else:
                send(topic, payload, key=keys[i % nkeys])
    else:
        for start in range(0, n, BULK_CHUNK):
            m = min(BULK_CHUNK, n - start)
            cb = lat.callback()
            chunk_keys = None if keys is None else [keys[(start + j) % len(keys)] for j in range(m)]
            if mode == "batch":
                fut = p.send_batch(topic, values[:m], chunk_keys)
            elif mode == "arrow":
                assert arrow_chunk is not None
                fut = p.send_arrow(arrow_chunk.slice(0, m), topic)
            else:  # Python objects -> Arrow -> send_arrow, inside the clock
                import pyarrow as pa

                columns = {"value": pa.array(values[:m], type=pa.binary())}
                if chunk_keys is not None:
                    columns["key"] = pa.array(chunk_keys, type=pa.binary())
                fut = p.send_arrow(pa.table(columns), topic)
            fut.add_done_callback(cb)
    p.flush()
    elapsed = perf() - t0
    cpu = time.process_time() - c0
    metrics = p.metrics()
    failed = int(metrics.get("record-error-total", 0.0))
    p.close()
    return Timing(elapsed, rss_before, failed, batches=kproducer_batches(metrics, topic), cpu_s=cpu)


def kproducer_batches(metrics: dict[str, float], topic: str) -> float | None:
    """Partition batches sent: the topic's ``byte-total`` over ``batch-size-avg`` (both the producer's own).

    ``batch-size-avg`` is a windowed average (two 30 s samples, as in Java), so for a run
    longer than that this is the recent batches' size applied to the whole run.
    """
    total = next((v for k, v in metrics.items() if k.startswith("byte-total") and topic in k), None)
    avg = metrics.get("batch-size-avg")
    if not total or not avg or avg != avg:
        return None
    return total / avg


# ---------------------------------------------------------------- confluent-kafka
def confluent_config(cell: Cell, bootstrap: str = "<broker>") -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": cell.acks if cell.acks != "all" else "-1",
        "compression.type": cell.compression,
        "linger.ms": 5,
    }
    if cell.batch_size is not None:
        conf["batch.size"] = cell.batch_size
    conf.update(SECURITY)
    return conf


def _confluent(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    from confluent_kafka import Producer as CProducer

    client_errors: list[Any] = []
    batch_counts: list[int] = []

    def stats(text: str) -> None:
        # librdkafka's statistics: topics[t].batchcnt is the window's histogram of records per
        # batch, so its cnt is the batches produced since the previous report.
        batch_counts.append(json.loads(text).get("topics", {}).get(topic, {}).get("batchcnt", {}).get("cnt", 0))

    cp = CProducer({**confluent_config(cell, bootstrap), "error_cb": client_errors.append,
                    "statistics.interval.ms": 1000, "stats_cb": stats})  # fmt: skip
    payload = os.urandom(cell.size)
    keys = bench_keys(cell)
    perf = time.perf_counter
    rss_before = _rss_mb()
    t0, c0 = perf(), time.process_time()
    confluent_produce(cp, topic, payload, cell.records, lat.every, lat.callback, keys)
    cp.flush()
    elapsed = perf() - t0
    cpu = time.process_time() - c0
    # One more report covers the last window's batches (outside the clock).
    seen = len(batch_counts)
    deadline = time.monotonic() + 3
    while len(batch_counts) == seen and time.monotonic() < deadline:
        cp.poll(0.1)
    return Timing(elapsed, rss_before, 0, batches=float(sum(batch_counts)) if batch_counts else None, cpu_s=cpu)


def _confluent_compat(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    """confluent-kafka's produce loop, with only the import switched to kproducer.compat.confluent_kafka."""
    from kproducer.compat.confluent_kafka import Producer as CompatProducer

    conf = confluent_config(cell, bootstrap)
    conf.update(cell.kproducer_extra)
    cp = CompatProducer(conf)
    payload = os.urandom(cell.size)
    perf = time.perf_counter
    rss_before = _rss_mb()
    t0, c0 = perf(), time.process_time()
    confluent_produce(cp, topic, payload, cell.records, lat.every, lat.callback)
    cp.flush()
    elapsed = perf() - t0
    cpu = time.process_time() - c0
    cp.close(10)
    return Timing(elapsed, rss_before, 0, cpu_s=cpu)


# ---------------------------------------------------------------- aiokafka
def _kafka_python_style_config(cell: Cell, bootstrap: str, batch_size_key: str) -> dict[str, Any]:
    """aiokafka and kafka-python take the same keyword config; only the batch size's name differs."""
    conf: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": int(cell.acks) if cell.acks != "all" else "all",
        "compression_type": None if cell.compression == "none" else cell.compression,
        "linger_ms": 5,
    }
    if cell.batch_size is not None:
        conf[batch_size_key] = cell.batch_size
    return conf


def aiokafka_config(cell: Cell, bootstrap: str = "<broker>") -> dict[str, Any]:
    return _kafka_python_style_config(cell, bootstrap, "max_batch_size")


def _aiokafka(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    from aiokafka import AIOKafkaProducer

    async def start() -> Any:
        ap = AIOKafkaProducer(**aiokafka_config(cell, bootstrap))
        await ap.start()
        return ap

    async def finish(ap: Any) -> None:
        await ap.stop()

    # The coroutine of send() itself is awaited per record (no wrapper), as for the other asyncio clients.
    return _async_run(cell, lat, start, lambda ap, payload, key: ap.send(topic, payload, key=key), finish)


def _aiokafka_compat(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    """aiokafka's program unchanged but for the import: kproducer.compat.aiokafka (over kproducer.aio)."""
    from kproducer.compat.aiokafka import AIOKafkaProducer

    async def start() -> Any:
        ap = AIOKafkaProducer(**aiokafka_config(cell, bootstrap))
        await ap.start()
        return ap

    async def finish(ap: Any) -> None:
        await ap.stop()

    return _async_run(cell, lat, start, lambda ap, payload: ap.send(topic, payload), finish)


# ---------------------------------------------------------------- asyncio: kproducer.aio and confluent_kafka.aio
async def _ticker(gaps: list[float], stop: Any) -> None:
    """Sleeps 1 ms at a time and keeps its worst gap: how long the event loop was held by the client."""
    import asyncio

    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps[0] = max(gaps[0], now - last)
        last = now


def _async_run(cell: Cell, lat: Latency, start: Any, send: Any, finish: Any) -> Timing:
    """aiokafka's loop shape for every asyncio client: ``await send()`` per record, futures gathered per 20,000.

    A 1 ms ticker runs beside the sends (after 0.5 s alone, for the machine's own share): its worst
    gap is the longest the client held the event loop.
    """
    import asyncio

    payload = os.urandom(cell.size)
    keys = bench_keys(cell)
    nkeys = len(keys) if keys else 0
    perf = time.perf_counter
    n, every = cell.records, lat.every
    out: list[Timing] = []

    async def run() -> None:
        client = await start()
        idle = [0.0]
        stop = asyncio.Event()
        ticker = asyncio.ensure_future(_ticker(idle, stop))
        await asyncio.sleep(0.5)
        stop.set()
        await ticker
        gaps = [0.0]
        stop = asyncio.Event()
        ticker = asyncio.ensure_future(_ticker(gaps, stop))
        rss_before = _rss_mb()
        t, c0 = perf(), time.process_time()
        futs = []
        for i in range(n):
            key = keys[i % nkeys] if keys else None
            if i % every == 0:
                cb = lat.callback()
                fut = await send(client, payload, key)
                fut.add_done_callback(cb)
            else:
                fut = await send(client, payload, key)
            futs.append(fut)
            if len(futs) >= 20000:
                await asyncio.gather(*futs)
                futs.clear()
        await asyncio.gather(*futs)
        elapsed = perf() - t
        cpu = time.process_time() - c0
        stop.set()
        await ticker
        out.append(Timing(elapsed, rss_before, loop_gap_ms=gaps[0] * 1000, idle_gap_ms=idle[0] * 1000, cpu_s=cpu))
        await finish(client)

    asyncio.run(run())
    return out[0]


def _kproducer_async(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    from kproducer.aio import AsyncProducer

    async def start() -> Any:
        p = AsyncProducer(kproducer_config(cell, bootstrap))
        await p.start()
        return p

    async def finish(p: Any) -> None:
        await p.close()

    return _async_run(cell, lat, start, lambda p, payload, key: p.send(topic, payload, key=key), finish)


def _confluent_aio(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    from confluent_kafka.aio import AIOProducer

    client_errors: list[Any] = []

    async def start() -> Any:
        return AIOProducer({**confluent_config(cell, bootstrap), "error_cb": client_errors.append})

    async def finish(p: Any) -> None:
        await p.flush()
        await p.close()

    return _async_run(cell, lat, start, lambda p, payload, key: p.produce(topic, payload, key=key), finish)


class _AsyncioFloor:
    """No Kafka client at all: the least any client must do per record in ``_async_run``'s loop shape.

    ``send()`` is a coroutine that makes the loop's future and returns it; completion
    rounds settle the futures on the loop at most ``FLOOR_ROUND`` a callback, as a
    producer's completion rounds do (kproducer.aio settles up to 2,048 a call). What the
    row measures is therefore only what the benchmark asks of every asyncio client: a
    coroutine, an awaited call and a future per record, and gather() over 20,000. A
    client's records/s cannot exceed this row's in the same run.
    """

    FLOOR_ROUND = 2048

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.pending: list[Any] = []
        self.scheduled = False

    def _complete(self) -> None:
        done, self.pending = self.pending[: self.FLOOR_ROUND], self.pending[self.FLOOR_ROUND :]
        for fut in done:
            fut.set_result(None)
        if self.pending:
            self.loop.call_soon(self._complete)
        else:
            self.scheduled = False

    async def send(self, topic: str, payload: bytes) -> Any:
        fut = self.loop.create_future()
        self.pending.append(fut)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._complete)
        return fut


def _asyncio_floor(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    import asyncio

    async def start() -> Any:
        return _AsyncioFloor(asyncio.get_running_loop())

    async def finish(client: Any) -> None:
        return None

    return _async_run(cell, lat, start, lambda c, payload, key: c.send(topic, payload), finish)


# ---------------------------------------------------------------- kafka-python
def kafka_python_config(cell: Cell, bootstrap: str = "<broker>") -> dict[str, Any]:
    return _kafka_python_style_config(cell, bootstrap, "batch_size")


def _kafka_python(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    from kafka import KafkaProducer

    kp = KafkaProducer(**kafka_python_config(cell, bootstrap))
    payload = os.urandom(cell.size)
    perf = time.perf_counter
    n, every = cell.records, lat.every
    keys = bench_keys(cell)
    nkeys = len(keys) if keys else 0
    rss_before = _rss_mb()
    t0, c0 = perf(), time.process_time()
    for i in range(n):
        key = keys[i % nkeys] if keys else None
        if i % every == 0:
            cb = lat.callback()
            kp.send(topic, payload, key=key).add_callback(cb)
        else:
            kp.send(topic, payload, key=key)
    kp.flush()
    elapsed = perf() - t0
    cpu = time.process_time() - c0
    kp.close()
    return Timing(elapsed, rss_before, cpu_s=cpu)


def _kafka_python_compat(cell: Cell, bootstrap: str, topic: str, lat: Latency) -> Timing:
    """kafka-python's loop unchanged but for the import: kproducer.compat.kafka (over kproducer's Producer)."""
    from kproducer.compat.kafka import KafkaProducer

    kp = KafkaProducer(**kafka_python_config(cell, bootstrap))
    payload = os.urandom(cell.size)
    perf = time.perf_counter
    n, every = cell.records, lat.every
    rss_before = _rss_mb()
    t0, c0 = perf(), time.process_time()
    for i in range(n):
        if i % every == 0:
            cb = lat.callback()
            kp.send(topic, payload).add_callback(cb)
        else:
            kp.send(topic, payload)
    kp.flush()
    elapsed = perf() - t0
    cpu = time.process_time() - c0
    kp.close()
    return Timing(elapsed, rss_before, cpu_s=cpu)


# ---------------------------------------------------------------- the table of clients
@dataclass(frozen=True)
class Runner:
    """One client: ``run`` does the cell's work in the child; ``config`` is what the table prints."""

    run: Callable[[Cell, str, str, Latency], Timing]
    config: Callable[[Cell], str]
    label: str


def _describe(conf: dict[str, Any], note: str = "") -> str:
    shown = ", ".join(f"{k}={v}" for k, v in conf.items() if k not in ("bootstrap.servers", "bootstrap_servers"))
    return shown + (f"; {note}" if note else "")


RUNNERS: dict[str, Runner] = {
    "kproducer": Runner(
        lambda c, b, t, lat: _kproducer(c, b, t, lat, "send"),
        lambda c: _describe(kproducer_config(c), f"effective: {_kproducer_defaults(c)}"),
        "kproducer send()",
    ),
    "kproducer-batch": Runner(
        lambda c, b, t, lat: _kproducer(c, b, t, lat, "batch"),
        lambda c: _describe(kproducer_config(c), f"send_batch() of {BULK_CHUNK:,} bytes objects"),
        "kproducer send_batch()",
    ),
    "kproducer-arrow": Runner(
        lambda c, b, t, lat: _kproducer(c, b, t, lat, "arrow"),
        lambda c: _describe(kproducer_config(c), f"send_arrow() of {BULK_CHUNK:,}-row tables built before the clock"),
        "kproducer send_arrow()",
    ),
    "kproducer-arrow-py": Runner(
        lambda c, b, t, lat: _kproducer(c, b, t, lat, "arrow-py"),
        lambda c: _describe(kproducer_config(c), "pa.array(bytes objects) then send_arrow(), both in the clock"),
        "kproducer objects → Arrow → send_arrow()",
    ),
    "confluent-kafka": Runner(
        _confluent,
        lambda c: _describe(confluent_config(c), "error_cb; no default on_delivery; other settings librdkafka's defaults "
                            "(batch.size=1000000, queue.buffering.max.messages=100000)"),
        "confluent-kafka produce()",
    ),
    "kproducer-compat-ck": Runner(
        _confluent_compat,
        lambda c: _describe(confluent_config(c), "kproducer.compat.confluent_kafka.Producer, confluent-kafka's loop "
                            "(no error_cb: refused there); partitioner consistent_random"),
        "kproducer.compat.confluent_kafka produce()",
    ),
    "aiokafka": Runner(
        _aiokafka, lambda c: _describe(aiokafka_config(c), "await send() per record"), "aiokafka"
    ),
    "kafka-python": Runner(_kafka_python, lambda c: _describe(kafka_python_config(c)), "kafka-python"),
    "aiokafka-compat": Runner(
        _aiokafka_compat,
        lambda c: _describe(aiokafka_config(c), "kproducer.compat.aiokafka, await send() per record"),
        "kproducer.compat.aiokafka",
    ),
    "kafka-python-compat": Runner(
        _kafka_python_compat, lambda c: _describe(kafka_python_config(c), "kproducer.compat.kafka"),
        "kproducer.compat.kafka",
    ),
    "kproducer-async": Runner(
        _kproducer_async,
        lambda c: _describe(kproducer_config(c), "kproducer.aio.AsyncProducer, await send() per record"),
        "kproducer.aio",
    ),
    "confluent-aio": Runner(
        _confluent_aio,
        lambda c: _describe(confluent_config(c), "confluent_kafka.aio.AIOProducer (its defaults: batch_size=1000, "
                            "max_workers=4), await produce() per record"),
        "confluent-kafka AIOProducer",
    ),
    "asyncio-floor": Runner(
        _asyncio_floor,
        lambda c: "no client: a coroutine and a loop future per record, settled in rounds of 2,048 "
        "(what the loop shape alone costs; nothing is sent)",
        "asyncio floor (no client)",
    ),
}
# Rows that send nothing, so there is nothing to count on their topic.
NOT_SENT = {"asyncio-floor"}
# The asyncio clients, compared among themselves (same loop shape: await per record, futures gathered).
ASYNC_RATIOS = [
    ("kproducer-async", "aiokafka"),
    ("kproducer-async", "confluent-aio"),
    # The most any client could reach against aiokafka in this loop shape.
    ("asyncio-floor", "aiokafka"),
    ("kproducer-async", "asyncio-floor"),
]
# The adapters against the client they stand in for and the kproducer API they run on (same run).
COMPAT_RATIOS = [
    ("aiokafka-compat", "aiokafka"),
    ("aiokafka-compat", "kproducer-async"),
    ("kafka-python-compat", "kafka-python"),
    ("kafka-python-compat", "kproducer"),
]
CLIENTS = list(RUNNERS)
DEFAULT_CLIENTS = ["kproducer", "kproducer-batch", "kproducer-arrow", "kproducer-arrow-py", "confluent-kafka", "aiokafka"]
RATIOS = [(a, "confluent-kafka") for a in ("kproducer", "kproducer-batch", "kproducer-arrow", "kproducer-arrow-py")]


def _child(client: str, bootstrap: str, topic: str, cell: Cell) -> dict[str, Any]:
    if client not in RUNNERS:
        raise SystemExit(f"unknown client {client!r}; choose from {CLIENTS}")
    lat = Latency(cell.sample_every)
    t = RUNNERS[client].run(cell, bootstrap, topic, lat)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "client": client,
        "records": cell.records,
        "failed": t.failed,
        "elapsed_s": t.elapsed_s,
        # CPU while the clock ran when the runner measured it; else the whole child's.
        "cpu_s": t.cpu_s if t.cpu_s is not None else ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024.0,
        # What the run itself added: peak RSS above the peak before the clock started (imports
        # and the producer made, payload built; for Arrow, pyarrow alone is about 36 MB).
        "rss_growth_mb": ru.ru_maxrss / 1024.0 - t.rss_before_mb,
        "p99_ms": lat.p99(),
        "latency_samples": len(lat.samples),
        "loop_gap_ms": t.loop_gap_ms,
        "idle_gap_ms": t.idle_gap_ms,
        "batches": t.batches,
    }


# ---------------------------------------------------------------- parent side
def count_on_topic(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 120.0) -> int:
    """Records on the topic, counted with confluent-kafka's consumer up to each partition's end (no objects kept)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 50, **SECURITY})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        count, eof = 0, set[int]()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=0.5):
                err, part = m.error(), m.partition() or 0
                if err is None:
                    count += 1
                    eof.discard(part)
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof.add(part)
            if count >= expected and len(eof) == partitions:
                break
        return count
    finally:
        c.close()


def run_client(
    client: str,
    bootstrap: str,
    topic: str,
    cell: Cell,
    args: argparse.Namespace,
    broker_cpu_s: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Run ``client`` on ``cell`` in a child process; ``broker_cpu_s`` reads the broker's CPU seconds, when known."""
    cmd = [
        sys.executable, __file__, "--child", client, "--bootstrap", bootstrap, "--topic", topic,
        "--records", str(cell.records), "--size", str(cell.size), "--acks", cell.acks,
        "--compression", cell.compression, "--partitions", str(cell.partitions),
        "--kproducer-config", ",".join(f"{k}={v}" for k, v in cell.kproducer_extra.items()),
        "--sample-every", str(cell.sample_every), "--keys", str(cell.keys),
    ]  # fmt: skip
    if cell.batch_size is not None:
        cmd += ["--batch-size", str(cell.batch_size)]
    broker_cpu_before = broker_cpu_s() if broker_cpu_s is not None else 0.0
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {"client": client, "error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if broker_cpu_s is not None:
        res["broker_cpu_us_per_record"] = (broker_cpu_s() - broker_cpu_before) / res["records"] * 1e6
    res["records_per_s"] = res["records"] / res["elapsed_s"]
    res["mb_per_s"] = res["records"] * cell.size / res["elapsed_s"] / 1e6
    res["cpu_us_per_record"] = res["cpu_s"] / res["records"] * 1e6
    res["cpu_us_per_batch"] = res["cpu_s"] / res["batches"] * 1e6 if res.get("batches") else None
    res["records_per_batch"] = res["records"] / res["batches"] if res.get("batches") else None
    if args.verify and client not in NOT_SENT:
        # In a child too: Linux keeps ru_maxrss across fork and exec, so a consumer in this
        # process would raise every later client's peak RSS.
        count = subprocess.run(
            [sys.executable, __file__, "--count", topic, "--bootstrap", bootstrap, "--partitions",
             str(cell.partitions), "--records", str(cell.records)],
            capture_output=True, text=True, timeout=args.timeout,
        )  # fmt: skip
        res["on_topic"] = int(count.stdout.strip().splitlines()[-1]) if count.returncode == 0 else -1
    return res


def _parse_kv(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split(",") if kv)


def main() -> int:
    if "--transactional" in sys.argv[1:]:
        # Transactions are their own workload (begin / N sends / commit): benchmarks/transactional.py.
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from transactional import main as transactional_main

        return transactional_main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--keys", type=int, default=0, help="send keyed records, cycling over this many distinct keys")
    ap.add_argument("--partitions-list", default="", help="for --matrix: run every cell over each of these partition counts")
    ap.add_argument("--acks", default="1", choices=["0", "1", "all"])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--clients", default=",".join(DEFAULT_CLIENTS), help=f"comma-separated, of {CLIENTS}")
    ap.add_argument("--matrix", action="store_true", help="run workloads x acks x compression in one run")
    ap.add_argument("--workloads", default=",".join(f"{n}x{s}" for n, s in MATRIX_WORKLOADS), help="NxSIZE,... for --matrix")
    ap.add_argument("--acks-list", default=",".join(MATRIX_ACKS), help="for --matrix")
    ap.add_argument("--compression-list", default=",".join(MATRIX_COMPRESSION), help="for --matrix")
    ap.add_argument("--repeat", type=int, default=1, help="run each cell this many times (clients interleaved)")
    ap.add_argument("--kproducer-config", default="", help="extra kproducer config, k=v,k=v")
    ap.add_argument("--sample-every", type=int, default=1000, help="one record in N carries a latency callback")
    ap.add_argument(
        "--batch-size",
        type=int,
        help="give every client this per-partition batch size in bytes (default: each client's own default)",
    )
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="after each uncompressed cell, measure the broker's one-connection ceiling (benchmarks/broker_ceiling.py) "
        "at 16 KB, 256 KB and 1 MB batches",
    )
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="do not count the records on each topic")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--markdown", type=Path, help="append the table to this Markdown file")
    ap.add_argument("--png", type=Path, help="write a bar chart of records/s here")
    ap.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    ap.add_argument(
        "--tls",
        action="store_true",
        help="kproducer and confluent-kafka over TLS (stunnel in front of Tansu) beside plaintext, "
        "1M x 100 B and 200k x 1 KB unless --workloads is given (benchmarks/tls_bench.py)",
    )
    ap.add_argument("--child")
    ap.add_argument("--topic")
    ap.add_argument("--count", metavar="TOPIC", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.count:
        print(count_on_topic(args.bootstrap, args.count, args.partitions, args.records))
        return 0

    def cell_for(n: int, size: int, acks: str, comp: str, partitions: int | None = None) -> Cell:
        return Cell(n, size, acks, comp, partitions or args.partitions, args.batch_size,
                    _parse_kv(args.kproducer_config), args.sample_every, args.keys)  # fmt: skip

    if args.tls:
        from benchmarks.tls_bench import run_tls_comparison

        return run_tls_comparison(args, cell_for)

    if args.child:
        print(json.dumps(_child(args.child, args.bootstrap, args.topic,
                                cell_for(args.records, args.size, args.acks, args.compression))))  # fmt: skip
        return 0

    from broker_ceiling import proc_cpu_s
    from broker_warmup import warm_broker
    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = [c for c in clients if c not in RUNNERS]
    if unknown:
        raise SystemExit(f"unknown client(s) {unknown}; choose from {CLIENTS}")
    if args.matrix:
        partition_counts = [int(x) for x in args.partitions_list.split(",") if x] or [args.partitions]
        cells = [
            cell_for(int(n), int(size), acks, comp, partitions)
            for partitions in partition_counts
            for n, size in (w.split("x") for w in args.workloads.split(",") if w)
            for acks in args.acks_list.split(",")
            for comp in args.compression_list.split(",")
        ]
    else:
        cells = [cell_for(args.records, args.size, args.acks, args.compression)]

    all_ok = True
    chart: list[tuple[str, list[dict[str, Any]]]] = []
    with tansu_unless(args.bootstrap) as (bootstrap, broker):
        warm_broker(bootstrap)
        broker_cpu_s = None if broker is None else (lambda: proc_cpu_s(broker.process.pid))
        for cell in cells:
            load = os.getloadavg()
            runs: list[list[dict[str, Any]]] = []
            for rep in range(args.repeat):
                # The first client of a repeat changes from repeat to repeat, so that none is always
                # first after a ceiling run or a previous cell; the table keeps the clients' order.
                shift = rep % len(clients)
                by_client: dict[str, dict[str, Any]] = {}
                for client in clients[shift:] + clients[:shift]:
                    topic = f"bench-{client}-{int(time.time() * 1000)}"
                    create_topic(bootstrap, topic, cell.partitions)
                    print(f"running {client} ({cell.records:,} x {cell.size} B, acks={cell.acks}, {cell.compression}) ...",
                          file=sys.stderr, flush=True)  # fmt: skip
                    by_client[client] = run_client(client, bootstrap, topic, cell, args, broker_cpu_s)
                runs.append([by_client[c] for c in clients])
            load_after = os.getloadavg()
            table, ok = _report(runs, cell, clients, (load[0], load_after[0]))
            if args.ceiling and cell.compression == "none":
                table += "\n" + _ceiling_lines(bootstrap, broker, cell)
            all_ok &= all("error" not in r and r.get("on_topic", r["records"]) == r["records"] for rs in runs for r in rs)
            print(table, flush=True)
            if args.markdown:
                with args.markdown.open("a") as fh:
                    fh.write(table + "\n\n")
            chart.append((f"{cell.records // 1000}k x {cell.size} B\nacks={cell.acks} {cell.compression}", ok))
    if args.png and chart:
        _chart(chart, args.png, clients)
    return 0 if all_ok else 1


def _ceiling_lines(bootstrap: str, broker: Any, cell: Cell) -> str:
    """The broker's own ceiling for this cell's records on one connection, with no client work.

    Run in a child process: the pre-built requests are large, and a big parent would raise
    every later child's peak RSS (Linux keeps ru_maxrss across fork and exec).
    """
    lines = []
    for batch_size in (16384, 262144, 1_000_000):
        cmd = [
            sys.executable, str(ROOT / "benchmarks" / "broker_ceiling.py"), "--bootstrap", bootstrap,
            "--size", str(cell.size), "--batch-size", str(batch_size), "--partitions", str(cell.partitions),
            "--records", str(cell.records), "--acks", "-1" if cell.acks == "all" else cell.acks,
        ]  # fmt: skip
        if broker is not None:
            cmd += ["--broker-pid", str(broker.process.pid)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        out = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-1:] or ["failed"]
        lines.append(f"- broker ceiling (benchmarks/broker_ceiling.py): {out[0]}")
    return "\n".join(lines) + "\n"


def _optional_range(runs: list[dict[str, Any]], name: str, fmt: str) -> str:
    """A figure only some clients' metrics give (batches sent): ranged where known, n/a elsewhere."""
    values = [r[name] for r in runs if r.get(name) is not None]
    return _fmt_range(values, fmt) if values else "n/a"


def _fmt_range(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if len(values) == 1 or format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}–{hi:{fmt}}"


def _report(
    runs: list[list[dict[str, Any]]], cell: Cell, clients: list[str], load: tuple[float, float]
) -> tuple[str, list[dict[str, Any]]]:
    """One table per cell: each figure a range over the repeats; ratios taken within each run, then ranged."""
    extra = f", kproducer {cell.kproducer_extra}" if cell.kproducer_extra else ""
    if cell.batch_size is not None:
        extra += f", batch size {cell.batch_size:,} B for every client"
    else:
        extra += ", each client's default batch size"
    title = (
        f"{cell.records:,} x {cell.size} B, acks={cell.acks}, compression={cell.compression}, "
        f"{cell.partitions} partitions, one Tansu{extra}"
    )
    if cell.keys:
        title += f", keyed ({cell.keys:,} distinct keys)"
    lines = [
        f"### {title}",
        "",
        f"{len(runs)} run(s), clients interleaved in each; load average (1 min) {load[0]:.2f} before, {load[1]:.2f} after, "
        f"{os.cpu_count()} CPUs. Latency: one record in {cell.sample_every:,} carries a callback, on every client.",
        "",
        "| client | records/s | vs confluent-kafka (same run) | MB/s | CPU µs/record | CPU µs/batch | records/batch "
        "| broker CPU µs/record | p99 ms | peak RSS MB | RSS growth MB | failed | on topic |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best: list[dict[str, Any]] = []
    for client in clients:
        rs = [r for run in runs for r in run if r["client"] == client]
        good = [r for r in rs if "error" not in r]
        if not good:
            err = rs[0]["error"][0][:80] if rs else "not run"
            lines.append(f"| {client} | error: {err} | | | | | | | | | | | |")
            continue
        ratios = []
        for run in runs:
            by = {r["client"]: r for r in run if "error" not in r}
            if client in by and "confluent-kafka" in by:
                ratios.append(by[client]["records_per_s"] / by["confluent-kafka"]["records_per_s"])
        on_topic = {r.get("on_topic", "-") for r in good}
        lines.append(
            f"| {client} | {_fmt_range([r['records_per_s'] for r in good], ',.0f')} | "
            f"{_fmt_range(ratios, '.2f') + 'x' if ratios else 'n/a'} | {_fmt_range([r['mb_per_s'] for r in good], '.1f')} | "
            f"{_fmt_range([r['cpu_us_per_record'] for r in good], '.2f')} | {_optional_range(good, 'cpu_us_per_batch', '.1f')} | "
            f"{_optional_range(good, 'records_per_batch', '.1f')} | {_optional_range(good, 'broker_cpu_us_per_record', '.2f')} | "
            f"{_fmt_range([r['p99_ms'] for r in good], '.1f')} | "
            f"{_fmt_range([r['peak_rss_mb'] for r in good], '.0f')} | {_fmt_range([r['rss_growth_mb'] for r in good], '.0f')} | "
            f"{max(r['failed'] for r in good)} | {', '.join(f'{x:,}' if isinstance(x, int) else x for x in sorted(on_topic, key=str))} |"
        )
        best.append(max(good, key=lambda r: r["records_per_s"]))
    lines.extend(_async_lines(runs, clients))
    lines.append("")
    lines.append("Config of each client:")
    lines.append("")
    for client in clients:
        try:
            lines.append(f"- {client}: {RUNNERS[client].config(cell)}")
        except Exception as exc:  # a client not installed here still gets its row
            lines.append(f"- {client}: (config unavailable: {exc})")
    return "\n".join(lines), best


def _async_lines(runs: list[list[dict[str, Any]]], clients: list[str]) -> list[str]:
    """asyncio clients against each other (ratios within each run, then ranged) and their loop's worst gap."""
    lines = []
    for a, b in ASYNC_RATIOS + COMPAT_RATIOS:
        if a not in clients or b not in clients:
            continue
        ratios = []
        for run in runs:
            by = {r["client"]: r for r in run if "error" not in r}
            if a in by and b in by:
                ratios.append(by[a]["records_per_s"] / by[b]["records_per_s"])
        if ratios:
            lines.append(f"- {a} vs {b} (same run): {_fmt_range(ratios, '.2f')}x records/s")
    for client in clients:
        rs = [r for run in runs for r in run if r["client"] == client and r.get("loop_gap_ms") is not None]
        if rs:
            lines.append(
                f"- {client}: event loop worst gap (a 1 ms ticker beside the sends) "
                f"{_fmt_range([r['loop_gap_ms'] for r in rs], '.1f')} ms; the ticker alone on this machine "
                f"just before: {_fmt_range([r['idle_gap_ms'] for r in rs], '.1f')} ms"
            )
    return [""] + lines if lines else []


def _chart(chart: list[tuple[str, list[dict[str, Any]]]], path: Path, clients: list[str]) -> None:
    """Grouped bars: one group per matrix cell, one bar per client (records/s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(clients))
    fig, ax = plt.subplots(figsize=(max(8, 2.2 * len(chart)), 4.5))
    for ci, client in enumerate(clients):
        heights = [next((r["records_per_s"] for r in ok if r["client"] == client), 0.0) for _, ok in chart]
        ax.bar([g + ci * width for g in range(len(chart))], heights, width, label=client)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(chart))])
    ax.set_xticklabels([label for label, _ in chart], fontsize=7)
    ax.set_ylabel("records/s")
    ax.set_title("kproducer vs other Python clients, one Tansu, same work (higher is better)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
