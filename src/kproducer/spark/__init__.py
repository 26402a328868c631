"""kproducer's PySpark sink: ``df.write.format("kproducer")`` on the Spark 4 Python Data Source API.

Spark's built-in Kafka sink needs the JVM jar spark-sql-kafka; this one is
pure Python and runs under any master. The column contract is Spark's own
(``value``, and optionally ``key``, ``topic``, ``partition``, ``headers``,
``timestamp``); every ``kafka.*`` option goes to the producer.

Delivery guarantees: at-least-once by default; ``deliveryGuarantee=exactly_once``
(with ``transactionalIdPrefix``) commits each task's Kafka transaction from the
driver, see :mod:`kproducer.spark.exactly_once`. At-least-once: each task flushes before it reports, and
a batch write or micro-batch is committed only after all its tasks did. A
retried task, or a micro-batch re-run after a restart from a checkpoint (the
batch whose commit was not recorded in the checkpoint), sends its rows again,
so Kafka may hold them twice; nothing acknowledged is lost.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from kproducer.spark.commit import TaskCommit, WriteSummary, aggregate, read_summaries
from kproducer.spark.contract import SinkSchemaError
from kproducer.spark.datasource import SOURCE_NAME, SUMMARY_SOURCE_NAME, KafkaDataSource, KafkaSummarySource

logger = logging.getLogger(__name__)

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
_SOURCES = (KafkaDataSource, KafkaSummarySource)

# Spark Connect sessions this process registered the sources with, by session id:
# a Connect client cannot ask the server which Python sources it knows.
_registered_connect: set[str] = set()
_registered_lock = threading.Lock()


def _jvm_source_manager(spark: Any) -> Any:
    """The session's DataSourceManager on a classic (JVM-backed) session; None under Spark Connect."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return None
    try:
        return jsession.sessionState().dataSourceManager()
    except Exception:  # an older or different JVM side: fall back to registering
        return None


def register(spark: Any) -> None:
    """Register the ``kproducer`` data source (and its summary source) with a session, once.

    Registering again would make Spark log "data source kproducer replaced a
    previously registered data source" on every write, so this checks first:
    in the session's own registry on a classic session, by session id under
    Spark Connect.
    """
    manager = _jvm_source_manager(spark)
    if manager is not None:
        # Registration goes to the thread's active session: make it this one (with another
        # session active, e.g. after newSession(), Spark would refuse the name as taken).
        _activate_on_this_thread(spark)
        for source in _SOURCES:
            if not manager.dataSourceExists(source.name()):
                spark.dataSource.register(source)
        return
    session_id = str(getattr(spark, "session_id", "") or id(spark))
    with _registered_lock:
        if session_id in _registered_connect:
            return
        for source in _SOURCES:
            spark.dataSource.register(source)
        _registered_connect.add(session_id)


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
    options: Mapping[str, str] | None = None,
    **producer_config: Any,
) -> WriteSummary:
    """Write a DataFrame to Kafka and return the driver's aggregate of the tasks' commit messages.

    Registers the sources if needed, and passes the session's
    ``spark.kafka.producer.cache.timeout`` to the writers (they cannot read
    Spark conf). ``options`` are sink options as they are
    (``{"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "app"}``).

    The summary comes back from the driver as the result of a small query (see
    :class:`~kproducer.spark.datasource.KafkaSummarySource`), never through a
    file of the caller's, so this works on Spark Connect. If it cannot be had
    once the data is written, the write still counts as done: the summary
    returned has ``available=False`` and says why (a WARNING is logged), so
    that nobody retries a write that succeeded.
    """
    spark = df.sparkSession
    register(spark)
    _activate_on_this_thread(spark)
    opts = sink_options(topic, config, **producer_config)
    opts.update(options or {})
    opts["writer"] = writer
    cache_timeout = spark.conf.get(_CACHE_CONF, None)
    if cache_timeout:
        opts[_CACHE_CONF] = cache_timeout
    token = uuid.uuid4().hex
    opts["summary.token"] = token
    df.write.format(SOURCE_NAME).options(**opts).mode("append").save()
    # From here on the data is committed: nothing below may raise.
    try:
        rows = spark.read.format(SUMMARY_SOURCE_NAME).option("token", token).load().collect()
        summaries = [WriteSummary.from_json(row[0]) for row in rows]
    except Exception as e:
        note = f"fetching the summary from the driver failed: {type(e).__name__}: {e}"
        logger.warning("kproducer sink: the write committed, but %s", note)
        return WriteSummary(available=False, note=note)
    if not summaries:
        note = "the driver kept no summary for this write (its temporary directory was not writable?)"
        logger.warning("kproducer sink: the write committed, but %s", note)
        return WriteSummary(available=False, note=note)
    return summaries[-1]
