"""kproducer's PySpark sink: ``df.write.format("kproducer")`` on the Spark 4 Python Data Source API.

Spark's built-in Kafka sink needs the JVM jar spark-sql-kafka; this one is
pure Python and runs under any master. The column contract is Spark's own
(``value``, and optionally ``key``, ``topic``, ``partition``, ``headers``,
``timestamp``); every ``kafka.*`` option goes to the producer.

Delivery guarantees: at-least-once. Each task flushes before it reports, and
a batch write or micro-batch is committed only after all its tasks did. A
retried task, or a micro-batch re-run after a restart from a checkpoint (the
batch whose commit was not recorded in the checkpoint), sends its rows again,
so Kafka may hold them twice; nothing acknowledged is lost.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from kproducer.spark.commit import TaskCommit, WriteSummary, aggregate, read_summaries
from kproducer.spark.contract import SinkSchemaError
from kproducer.spark.datasource import SOURCE_NAME, KafkaDataSource

__all__ = [
    "KafkaDataSource",
    "SOURCE_NAME",
    "SinkSchemaError",
    "TaskCommit",
    "WriteSummary",
    "aggregate",
    "read_summaries",
    "register",
    "sink_options",
    "write_to_kafka",
]

_CACHE_CONF = "spark.kafka.producer.cache.timeout"


def register(spark: Any) -> None:
    """Register the ``kproducer`` data source with a SparkSession (idempotent)."""
    spark.dataSource.register(KafkaDataSource)


def _activate_on_this_thread(spark: Any) -> None:
    """Make the session the JVM thread's active one.

    Spark looks Python data sources up through the thread's active session; on a
    thread other than the one that built the session there is none, and
    ``format("kproducer")`` fails with DATA_SOURCE_NOT_FOUND. (Spark Connect has no JVM here.)
    """
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is not None and jsession is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def sink_options(
    topic: str | None = None, config: Mapping[str, Any] | None = None, **producer_config: Any
) -> dict[str, str]:
    """The ``.options(...)`` map: producer keys get the ``kafka.`` prefix.

    Keyword names use underscores for dots (``bootstrap_servers``, ``linger_ms``);
    ``config`` takes Java names as they are (``{"compression.type": "lz4"}``).
    """
    out: dict[str, str] = {}
    merged: dict[str, Any] = {k.replace("_", "."): v for k, v in producer_config.items()}
    merged.update(config or {})
    for key, value in merged.items():
        out[f"kafka.{key}"] = str(value).lower() if isinstance(value, bool) else str(value)
    if topic is not None:
        out["topic"] = topic
    return out


def write_to_kafka(
    df: Any,
    topic: str | None = None,
    *,
    writer: str = "arrow",
    config: Mapping[str, Any] | None = None,
    **producer_config: Any,
) -> WriteSummary:
    """Write a DataFrame to Kafka and return the driver's aggregate of the tasks' commit messages.

    Registers the source if needed, and passes the session's
    ``spark.kafka.producer.cache.timeout`` to the writers (they cannot read Spark conf).
    """
    spark = df.sparkSession
    register(spark)
    _activate_on_this_thread(spark)
    opts = sink_options(topic, config, **producer_config)
    opts["writer"] = writer
    cache_timeout = spark.conf.get(_CACHE_CONF, None)
    if cache_timeout:
        opts[_CACHE_CONF] = cache_timeout
    fd, path = tempfile.mkstemp(prefix="kproducer-summary-", suffix=".jsonl")
    os.close(fd)
    try:
        opts["summary.path"] = path
        df.write.format(SOURCE_NAME).options(**opts).mode("append").save()
        summaries = read_summaries(path)
    finally:
        os.unlink(path)
    if not summaries:
        raise RuntimeError(f"the kproducer sink's commit left no summary in {path}")
    return summaries[-1]
