"""The kproducer Spark sink end to end: Spark local[2], Tansu, read back with confluent-kafka."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kproducer.embedded_broker import EmbeddedBroker, start_embedded_broker
from kproducer.spark import read_summaries, register, sink_options, write_to_kafka
from tests.support.readback import create_topic, read_topic


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- planning-time errors


@pytest.mark.parametrize(
    ("select", "options", "pattern"),
    [
        (["cast(id as string) as key"], {"topic": "t"}, r"needs a 'value' column"),
        (["id as value"], {"topic": "t"}, r"'value' has type bigint; allowed: string or binary"),
        (["cast(id as string) as value"], {}, r"no topic: give the option 'topic'"),
        (["cast(id as string) as value", "id as partition"], {"topic": "t"}, r"'partition' has type bigint"),
        (["cast(id as string) as value"], {"topic": "t", "kafka.lingr.ms": "5"}, r"'lingr.ms'.*'linger.ms'"),
        (["cast(id as string) as value"], {"topic": "t", "kafka.linger.ms": "soon"}, r"linger.ms"),
        (["cast(id as string) as value"], {"topic": "t", "topc": "x"}, r"unknown option 'topc'"),
    ],
)
def test_bad_input_fails_at_planning_time(
    spark: Any, select: list[str], options: dict[str, str], pattern: str
) -> None:
    df = spark.range(3).selectExpr(*select)
    opts = {"kafka.bootstrap.servers": "127.0.0.1:1", **options}
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as ei:
        df.write.format("kproducer").options(**opts).mode("append").save()
    text = _error_text(ei.value)
    assert re.search(pattern, text, re.S), text[:3000]
    assert "PYTHON_DATA_SOURCE_ERROR" in text or "writer" in text
    # Nothing ran: the error came from planning.
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


def test_missing_bootstrap_fails_at_planning_time(spark: Any) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        df.write.format("kproducer").option("topic", "t").mode("append").save()


def test_register_is_once_per_session(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering again would log Spark's "replaced a previously registered data source" on every write."""
    from pyspark.sql.datasource import DataSourceRegistration

    calls: list[str] = []
    real = DataSourceRegistration.register
    monkeypatch.setattr(
        DataSourceRegistration, "register", lambda self, src: (calls.append(src.name()), real(self, src))[1]
    )
    register(spark)
    register(spark)
    assert calls == [], "the fixture registered the sources already"
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    assert manager.dataSourceExists("kproducer") and manager.dataSourceExists("kproducer_summary")
    # A new session of the same context: registering in it neither fails nor warns, and the
    # source is found there (the planning error below comes from the sink itself).
    fresh = spark.newSession()
    try:
        register(fresh)
        register(fresh)
        with pytest.raises(Exception, match="kafka.bootstrap.servers"):
            fresh.range(1).selectExpr("cast(id as string) as value").write.format("kproducer").option(
                "topic", "t"
            ).mode("append").save()
    finally:
        register(spark)  # makes the shared session the thread's active one again
    assert sorted(calls) == ["kproducer", "kproducer_summary"]


# ---------------------------------------------------------------- batch write, verified independently


def test_batch_write_200k_rows_every_record_with_key_partition_headers(
    spark: Any, tansu: EmbeddedBroker
) -> None:
    topic, partitions, n = "spark-batch-200k", 6, 200_000
    create_topic(tansu.bootstrap, topic, partitions)
    df = spark.range(0, n, 1, 4).selectExpr(
        "cast(id as string) as key",
        "concat('event-', cast(id as string), '-', repeat('x', 40)) as value",
        f"cast(id % {partitions} as int) as partition",
        "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary)),"
        " named_struct('key', 'src', 'value', cast('spark' as binary))) as headers",
    )
    summary = write_to_kafka(df, topic, bootstrap_servers=tansu.bootstrap, linger_ms=5)
    assert summary.records == n and summary.tasks == 4 and not summary.aborted
    assert sum(r[2] for r in summary.partitions[topic].values()) == n
    assert sorted(summary.partitions[topic]) == list(range(partitions))

    records = read_topic(tansu.bootstrap, topic, n, partitions=partitions, timeout=120)
    assert len(records) == n, f"{len(records)} records read back, expected exactly {n} (duplicates?)"
    seen = set()
    for r in records:
        assert r.key is not None
        i = int(r.key)
        seen.add(i)
        assert r.value == f"event-{i}-{'x' * 40}".encode()
        assert r.partition == i % partitions
        assert r.headers == [("id", r.key), ("src", b"spark")]
    assert seen == set(range(n))
    # The commit's offset ranges agree with what the broker holds.
    for p, (first, last, count) in summary.partitions[topic].items():
        offsets = [r.offset for r in records if r.partition == p]
        assert (min(offsets), max(offsets), len(offsets)) == (first, last, count)


@pytest.mark.parametrize("writer", ["row", "arrow"])
def test_topic_and_timestamp_columns(spark: Any, tansu: EmbeddedBroker, writer: str) -> None:
    topics = [f"spark-{writer}-a", f"spark-{writer}-b"]
    for t in topics:
        create_topic(tansu.bootstrap, t, 2)
    # Timestamps in runs of 50 rows: the Arrow writer sends each run with one bulk call.
    df = spark.range(0, 1000, 1, 2).selectExpr(
        "cast(cast(id as string) as binary) as key",
        "cast(id as string) as value",
        f"if(id % 2 = 0, '{topics[0]}', '{topics[1]}') as topic",
        "timestamp_millis(1700000000000 + id - id % 50) as timestamp",
    )
    summary = write_to_kafka(df, writer=writer, bootstrap_servers=tansu.bootstrap)
    assert summary.topic_counts() == {topics[0]: 500, topics[1]: 500}
    for t, parity in zip(topics, (0, 1), strict=True):
        recs = read_topic(tansu.bootstrap, t, 500, partitions=2)
        assert len(recs) == 500
        assert {int(r.value or b"-1") % 2 for r in recs} == {parity}
        assert all(r.timestamp == 1700000000000 + int(r.value or b"0") // 50 * 50 for r in recs)


# ---------------------------------------------------------------- producer cache inside Spark


def test_producer_cache_reused_across_tasks_and_closed_after_timeout(spark: Any, tansu: EmbeddedBroker) -> None:
    topic = "spark-cache"
    create_topic(tansu.bootstrap, topic, 2)
    df = spark.range(0, 800, 1, 8).selectExpr("cast(id as string) as value")
    # A distinct config, so no earlier test's producer is in the cache.
    config = {"bootstrap.servers": tansu.bootstrap, "client.id": "cache-test"}
    spark.conf.set("spark.kafka.producer.cache.timeout", "1500ms")
    try:
        first = write_to_kafka(df, topic, config=config)
        assert first.tasks == 8 and first.records == 800
        # local[2] runs two tasks at a time, but Spark may start a new Python worker when the
        # previous one is not back in its pool yet (seen under load: 4 workers for 8 tasks);
        # each worker keeps one producer for all its tasks, so fewer producers than tasks.
        assert 1 <= first.producers_created < first.tasks, first
        again = write_to_kafka(df, topic, config=config)
        assert again.producers_created < again.tasks, "a second write within the timeout should reuse producers"
        time.sleep(3.0)
        after = write_to_kafka(df, topic, config=config)
        assert after.producers_created >= 1, "producers idle beyond the timeout should have been closed"
    finally:
        spark.conf.unset("spark.kafka.producer.cache.timeout")
    assert len(read_topic(tansu.bootstrap, topic, 2400, partitions=2)) == 2400


# ---------------------------------------------------------------- streaming


def test_streaming_rate_source_counts_match_committed_batches(
    spark: Any, tansu: EmbeddedBroker, tmp_path: Path
) -> None:
    topic, per_batch = "spark-stream", 500
    create_topic(tansu.bootstrap, topic, 3)
    summary_path = str(tmp_path / "summaries.jsonl")
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", per_batch)
        .option("numPartitions", 2)
        .load()
        .selectExpr("cast(value % 10 as string) as key", "cast(value as string) as value")
    )
    query = (
        stream.writeStream.format("kproducer")
        .options(**sink_options(topic, bootstrap_servers=tansu.bootstrap, linger_ms=5))
        .option("summary.path", summary_path)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + 90
        while len(read_summaries(summary_path)) < 3 and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.2)
    finally:
        query.stop()
    summaries = [s for s in read_summaries(summary_path) if not s.aborted]
    assert len(summaries) >= 3, f"only {len(summaries)} micro-batches committed within 90s"
    assert [s.batch_id for s in summaries] == list(range(len(summaries)))
    assert all(s.records == per_batch for s in summaries), [s.records for s in summaries]
    committed = sum(s.records for s in summaries)
    records = read_topic(tansu.bootstrap, topic, committed, partitions=3)
    values = sorted(int(r.value or b"-1") for r in records)
    # Every committed micro-batch is there exactly once.
    assert values[:committed] == list(range(committed))
    # A Kafka sink without transactions is at-least-once: if stop() lands while a
    # micro-batch is being written, Spark cancels it, but what it already
    # delivered stays. Such extras can only come from that one interrupted batch
    # (the next rows of the rate source), and never twice.
    extras = values[committed:]
    assert len(extras) == len(set(extras)), "a record of the interrupted batch was written twice"
    assert all(committed <= v < committed + per_batch for v in extras), extras[:10]


# ---------------------------------------------------------------- faults


def _gated_rows(gate: str, first_rows: int) -> Any:
    """A mapInArrow function that passes ``first_rows`` rows on, then waits (120 s at most) for ``gate``.

    The write cannot finish before the test has stopped the broker, however fast
    the machine: a plain large DataFrame could be written completely between the
    moment records were seen and the stop on a loaded machine.
    """

    def gated(batches: Iterator[Any]) -> Iterator[Any]:
        passed = 0
        for batch in batches:
            yield batch
            passed += batch.num_rows
            if passed >= first_rows:
                deadline = time.monotonic() + 120
                while not os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.05)

    return gated


def test_broker_stopped_mid_write_fails_the_task_with_the_kafka_error(spark: Any, tmp_path: Path) -> None:
    broker = start_embedded_broker()
    gate = tmp_path / "broker-stopped"
    try:
        topic = "spark-fault"
        create_topic(broker.bootstrap, topic, 2)
        rows = spark.range(0, 300_000, 1, 2).selectExpr("cast(id as string) as key", "repeat('v', 100) as value")
        df = rows.mapInArrow(_gated_rows(str(gate), 20_000), rows.schema)
        outcome: dict[str, BaseException | None] = {}

        def run() -> None:
            try:
                write_to_kafka(
                    df,
                    topic,
                    bootstrap_servers=broker.bootstrap,
                    delivery_timeout_ms=3000,
                    request_timeout_ms=1000,
                    linger_ms=5,
                    max_block_ms=3000,
                    retry_backoff_ms=50,
                )
                outcome["error"] = None
            except BaseException as e:
                outcome["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        # Stop the broker once records are arriving.
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hw"})
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                hw = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(2))
                if hw > 1000:
                    break
                assert t.is_alive(), (
                    f"the write ended before the broker was stopped: {_error_text(outcome['error'])[-3000:] if outcome.get('error') else outcome}"
                )
                time.sleep(0.05)
            else:
                raise AssertionError("no records reached the broker within 60s")
        finally:
            c.close()
        broker.stop()
        gate.touch()  # the rest of the rows now meet a stopped broker
        t.join(120)
        assert not t.is_alive(), "the write did not fail within 120s of the broker stopping"
    finally:
        broker.stop()
    err = outcome.get("error")
    assert err is not None, "the write succeeded although the broker was stopped mid-write"
    text = _error_text(err)
    assert re.search(r"kproducer\.errors\.\w+", text), text[-3000:]
    assert "Task" in text or "task" in text


# ---------------------------------------------------------------- secured clusters


def test_sasl_ssl_cluster_with_a_shipped_ca_file_and_an_inline_ca(spark: Any, certificates: Any) -> None:
    """kafka.security.protocol, kafka.ssl.* and kafka.sasl.* pass through: SCRAM over TLS with Java's
    JAAS line, the CA shipped to the executors with addFile (spark.files) and named relatively, then
    given inline; read back by confluent-kafka through the same path. Secrets stay out of the options' repr."""
    from kproducer.spark.contract import parse_options
    from tests.support.secured import PASSWORD, USER, SaslBroker

    broker = SaslBroker(certificates)
    try:
        spark.sparkContext.addFile(str(certificates.ca))
        base = {
            "kafka.bootstrap.servers": broker.bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{USER}" password="{PASSWORD}";',
        }
        for i, trust in enumerate(
            ({"kafka.ssl.truststore.location": certificates.ca.name}, {"kafka.ssl.truststore.certificates": certificates.ca_pem})
        ):
            topic = f"spark-secured-{i}"
            opts = {**base, **trust, "topic": topic}
            assert PASSWORD not in repr(parse_options(opts))
            df = spark.range(0, 2000, 1, 2).selectExpr("cast(id as string) as key", "cast(id * 3 as string) as value")
            df.write.format("kproducer").options(**opts).mode("append").save()
            back = read_topic(broker.bootstrap, topic, 2000, security=broker.librdkafka("SCRAM-SHA-512"))
            assert sorted((int(r.key or b"-1"), r.value) for r in back) == [(n, str(n * 3).encode()) for n in range(2000)]
        assert ("SCRAM-SHA-512", USER) in broker.front.stats.authentications
    finally:
        broker.stop()
