"""The sink's planning-time contract: the column schema and the options.

Everything here runs on the driver (in the planning worker), before any task
starts, so that a wrong schema or a misspelt option fails the query at once
with a message naming the column or option and what is allowed. The column
rules are those of Spark's built-in Kafka sink.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kproducer.config import Password
from kproducer.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = [
    "AT_LEAST_ONCE",
    "DEFAULT_CACHE_TIMEOUT_MS",
    "EXACTLY_ONCE",
    "SinkOptions",
    "SinkSchema",
    "SinkSchemaError",
    "parse_duration_ms",
    "parse_options",
    "validate_producer_config",
    "validate_schema",
]

# Spark's own default for spark.kafka.producer.cache.timeout.
DEFAULT_CACHE_TIMEOUT_MS = 10 * 60 * 1000

KAFKA_PREFIX = "kafka."
WRITER_MODES = ("arrow", "row")
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
DELIVERY_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
# The broker's transaction.max.timeout.ms default (15 min): the longest transaction a
# stock broker accepts, and the exactly-once sink's default transaction.timeout.ms,
# so that a slow task or a slow commit does not see its transaction expire (the
# producer's own default, 60 s, is meant for short transactions).
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
# A transactional id is a Kafka string (at most 32767 bytes); the sink appends
# a batch token, the partition and the attempt to the prefix, so keep it short.
MAX_PREFIX_LEN = 200

# Options the sink reads itself (lower case: Spark hands options over case-insensitively).
_OWN_OPTIONS = {
    "topic": "the default topic; wins over a topic column",
    "writer": "arrow (default) or row",
    "spark.kafka.producer.cache.timeout": "idle time before a cached producer is closed, e.g. 10m",
    "producer.cache.timeout": "alias of spark.kafka.producer.cache.timeout",
    "flush.timeout.ms": "bound on each task's final flush (default: none, delivery.timeout.ms bounds it)",
    "summary.path": "driver-side file the commit writes its summary to (JSON lines)",
    "summary.token": "set by write_to_kafka: the key under which the driver keeps the summary for it",
    "deliveryguarantee": "at_least_once (default) or exactly_once",
    "transactionalidprefix": "exactly_once: prefix of the tasks' transactional ids, unique per application",
    "value.format": "bytes (default: the value column's bytes) or avro (Schema Registry framed Avro)",
    "key.format": "bytes (default: the key column's bytes) or avro (Schema Registry framed Avro)",
}
FORMATS = ("bytes", "avro")


def _avro_option(lower: str) -> bool:
    """The Avro and Schema Registry options (kproducer.avro.serializer.AVRO_OPTIONS), also per side."""
    from kproducer.avro.serializer import AVRO_OPTIONS, SIDED_OPTIONS

    if lower in AVRO_OPTIONS:
        return True
    side, _, rest = lower.partition(".")
    return side in ("value", "key") and rest in SIDED_OPTIONS
# Options Spark itself may put into the map; accepted (the exactly-once stream writer
# keeps its transaction log in the checkpoint location), otherwise ignored.
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}
# Producer keys the sink refuses, as Spark's Kafka sink does: it writes the key and
# value columns' bytes as they are (the Arrow writer never calls a serializer).
_REFUSED_PRODUCER_KEYS = {
    "key.serializer": "the key column's bytes are written as they are (a string column as UTF-8)",
    "value.serializer": "the value column's bytes are written as they are (a string column as UTF-8)",
}


class SinkSchemaError(ValueError):
    """The DataFrame's columns do not fit the Kafka sink's column contract."""


@dataclass(slots=True, frozen=True)
class SinkOptions:
    """The parsed options: what the writers need, small and picklable."""

    producer_config: tuple[tuple[str, str], ...]
    topic: str | None
    writer: str
    cache_timeout_ms: int
    flush_timeout_s: float | None
    summary_path: str | None
    summary_token: str | None = None
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None
    checkpoint_location: str | None = None
    value_format: str = "bytes"
    key_format: str = "bytes"
    # The Avro/registry options as given; the driver turns them into the formats below (plan()).
    avro_options: tuple[tuple[str, str], ...] = ()
    value_avro: Any = None  # kproducer.avro.AvroFormat, schema and id pinned on the driver
    key_avro: Any = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @property
    def producer_config_dict(self) -> dict[str, str]:
        return dict(self.producer_config)

    def __repr__(self) -> str:
        # Spark may print the writer (plans, logs): secrets show as [hidden], as in ProducerConfig.
        shown = {k: (Password.HIDDEN if _is_secret(k) else v) for k, v in self.producer_config}
        return (
            f"SinkOptions(producer_config={shown!r}, topic={self.topic!r}, writer={self.writer!r}, "
            f"cache_timeout_ms={self.cache_timeout_ms}, flush_timeout_s={self.flush_timeout_s}, "
            f"summary_path={self.summary_path!r})"
        )


def _is_secret(key: str) -> bool:
    from kproducer.config import CONFIG_KEYS, Type

    return any(k.type is Type.PASSWORD and key in (k.name, *k.aliases) for k in CONFIG_KEYS)


@dataclass(slots=True, frozen=True)
class SinkSchema:
    """The DataFrame's actual column names for each role (None when absent), and the string flags."""

    value: str
    value_is_string: bool
    key: str | None = None
    key_is_string: bool = False
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None
    timestamp: str | None = None
    ignored: tuple[str, ...] = ()


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str, option: str) -> int:
    """Parse a Spark-style duration ("10m", "600s", "500ms"; a bare number is ms, as in Spark's timeConf)."""
    m = _DURATION.match(text)
    if not m:
        raise ConfigError(f"option {option!r}: {text!r} is not a duration; use e.g. 10m, 600s or 500ms")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_options(options: Mapping[str, str]) -> SinkOptions:
    """Split the options into the producer's ``kafka.*`` keys and the sink's own, and check them."""
    producer: dict[str, str] = {}
    own: dict[str, str] = {}
    avro: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key)
        lower = key.lower()
        if lower.startswith(KAFKA_PREFIX):
            # Producer keys are case-sensitive in Kafka; Spark lower-cases option keys,
            # which is harmless since every Java producer key is lower case.
            producer[lower[len(KAFKA_PREFIX) :]] = str(value)
        elif lower in _OWN_OPTIONS or lower in _SPARK_OPTIONS:
            own[lower] = str(value)
        elif _avro_option(lower):
            avro[lower] = str(value)
        else:
            allowed = ", ".join(sorted(_OWN_OPTIONS))
            raise ConfigError(
                f"unknown option {key!r} for the kproducer sink{_suggest(lower, list(_OWN_OPTIONS))}; "
                f"producer settings take the prefix 'kafka.' (e.g. kafka.linger.ms); sink options are: {allowed}, "
                "and with value.format=avro the Avro options (docs/spark.md)"
            )
    for key, why in _REFUSED_PRODUCER_KEYS.items():
        if key in producer:
            raise ConfigError(
                f"option 'kafka.{key}' is not supported by the kproducer sink: {why}; "
                "serialize the column in the DataFrame instead (e.g. to_json, to_avro, or a cast to binary)"
            )
    if not producer.get("bootstrap.servers", "").strip():
        raise ConfigError(
            "option 'kafka.bootstrap.servers' is required: the broker list, e.g. "
            ".option('kafka.bootstrap.servers', 'host1:9092,host2:9092')"
        )
    topic = own.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("option 'topic' is empty: give a topic name or leave it out and use a topic column")
    writer = own.get("writer", "arrow").strip().lower()
    if writer not in WRITER_MODES:
        raise ConfigError(f"option 'writer' is {writer!r}; allowed: {', '.join(WRITER_MODES)}")
    timeout_text = own.get("spark.kafka.producer.cache.timeout", own.get("producer.cache.timeout"))
    cache_timeout_ms = (
        DEFAULT_CACHE_TIMEOUT_MS
        if timeout_text is None
        else parse_duration_ms(timeout_text, "spark.kafka.producer.cache.timeout")
    )
    flush_timeout_s: float | None = None
    if "flush.timeout.ms" in own:
        try:
            flush_ms = int(own["flush.timeout.ms"])
        except ValueError:
            raise ConfigError(
                f"option 'flush.timeout.ms' is {own['flush.timeout.ms']!r}; allowed: an integer >= 0"
            )
        if flush_ms < 0:
            raise ConfigError(f"option 'flush.timeout.ms' is {flush_ms}; allowed: an integer >= 0")
        flush_timeout_s = flush_ms / 1000.0
    guarantee, prefix = _parse_guarantee(own, producer)
    # Tracing in a sink is a span per task (kproducer.spark.datasource), and only when asked with
    # kafka.tracing.enabled=true: a worker whose process has a tracer provider would otherwise trace
    # every row.
    producer.setdefault("tracing.enabled", "false")
    formats = {}
    for side in ("value", "key"):
        fmt = own.get(f"{side}.format", "bytes").strip().lower()
        if fmt not in FORMATS:
            raise ConfigError(f"option '{side}.format' is {fmt!r}; allowed: {', '.join(FORMATS)}")
        formats[side] = fmt
    if "avro" in formats.values() and writer != "arrow":
        raise ConfigError("value.format=avro and key.format=avro are written by the Arrow writer; remove 'writer'")
    if avro and "avro" not in formats.values():
        raise ConfigError(
            f"option {sorted(avro)[0]!r} is an Avro option, but neither 'value.format' nor 'key.format' is avro"
        )
    return SinkOptions(
        producer_config=tuple(sorted(producer.items())),
        topic=topic.strip() if topic is not None else None,
        writer=writer,
        cache_timeout_ms=cache_timeout_ms,
        flush_timeout_s=flush_timeout_s,
        summary_path=own.get("summary.path"),
        summary_token=own.get("summary.token"),
        delivery_guarantee=guarantee,
        transactional_id_prefix=prefix,
        checkpoint_location=own.get("checkpointlocation"),
        value_format=formats["value"],
        key_format=formats["key"],
        avro_options=tuple(sorted(avro.items())),
    )


def _parse_guarantee(own: Mapping[str, str], producer: dict[str, str]) -> tuple[str, str | None]:
    """``deliveryGuarantee`` and ``transactionalIdPrefix`` (Flink's KafkaSink names), checked together.

    Exactly-once gives each task attempt a transactional producer of its own,
    so the producer settings that contradict one are refused here, by name,
    and ``transaction.timeout.ms`` gets the sink's longer default.
    """
    raw = own.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower().replace("-", "_")
    if raw not in DELIVERY_GUARANTEES:
        raise ConfigError(
            f"option 'deliveryGuarantee' is {own.get('deliveryguarantee')!r}; allowed: {', '.join(DELIVERY_GUARANTEES)}"
        )
    prefix = own.get("transactionalidprefix")
    if prefix is not None:
        prefix = prefix.strip()
        if not prefix or len(prefix) > MAX_PREFIX_LEN:
            raise ConfigError(
                f"option 'transactionalIdPrefix' is {prefix!r}; allowed: 1 to {MAX_PREFIX_LEN} characters, "
                "unique per application (e.g. the application's name)"
            )
    if raw != EXACTLY_ONCE:
        return raw, prefix
    if prefix is None:
        raise ConfigError(
            "deliveryGuarantee=exactly_once needs the option 'transactionalIdPrefix': a prefix for the "
            "tasks' transactional ids, unique per application (two applications sharing one would fence "
            "each other's transactions)"
        )
    if "transactional.id" in producer:
        raise ConfigError(
            "option 'kafka.transactional.id' cannot be set with deliveryGuarantee=exactly_once: the sink "
            "derives one transactional id per task attempt from 'transactionalIdPrefix'"
        )
    if producer.get("enable.idempotence", "true").strip().lower() == "false":
        raise ConfigError(
            "option 'kafka.enable.idempotence' is false, but deliveryGuarantee=exactly_once needs the "
            "idempotent producer (transactions are built on it); remove the option"
        )
    acks = producer.get("acks", "all").strip().lower()
    if acks not in ("all", "-1"):
        raise ConfigError(
            f"option 'kafka.acks' is {acks!r}, but deliveryGuarantee=exactly_once needs acks=all; remove the option"
        )
    producer.setdefault("transaction.timeout.ms", str(EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS))
    return raw, prefix


def validate_producer_config(config: Mapping[str, str]) -> None:
    """Validate the ``kafka.*`` keys with the producer's own config table, so an unknown key fails here."""
    from kproducer.config import ProducerConfig

    try:
        ProducerConfig(dict(config))
    except ConfigError as e:
        raise ConfigError(f"invalid producer setting among the 'kafka.*' options: {e.message}") from e


def _type_name(dt: Any) -> str:
    return str(dt.simpleString())


def validate_schema(
    schema: Any, topic_option: str | None, value_format: str = "bytes", key_format: str = "bytes"
) -> SinkSchema:
    """Check a Spark ``StructType`` against the Kafka sink's column contract.

    With ``value_format``/``key_format`` ``avro`` the column may be of any type Avro
    writes (a struct is a record); kproducer.avro checks it against the schema.
    """
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    fields = {f.name.lower(): f for f in schema.fields}
    have = ", ".join(f"{f.name}:{_type_name(f.dataType)}" for f in schema.fields) or "no columns"

    def check_str_or_bin(name: str) -> bool:
        dt = fields[name].dataType
        if isinstance(dt, StringType):
            return True
        if isinstance(dt, BinaryType):
            return False
        raise SinkSchemaError(
            f"column {name!r} has type {_type_name(dt)}; allowed: string or binary "
            f"(cast it, e.g. col('{name}').cast('string'))"
        )

    if "value" not in fields:
        raise SinkSchemaError(
            f"the kproducer sink needs a 'value' column of type string or binary; the DataFrame has: {have}"
        )
    value_is_string = check_str_or_bin("value") if value_format == "bytes" else False
    has_key = "key" in fields
    if key_format == "avro" and not has_key:
        raise SinkSchemaError(f"key.format=avro needs a 'key' column; the DataFrame has: {have}")
    key_is_string = check_str_or_bin("key") if has_key and key_format == "bytes" else False
    has_topic = "topic" in fields
    if has_topic and not isinstance(fields["topic"].dataType, StringType):
        raise SinkSchemaError(
            f"column 'topic' has type {_type_name(fields['topic'].dataType)}; allowed: string"
        )
    if not has_topic and topic_option is None:
        raise SinkSchemaError(
            "no topic: give the option 'topic' or a string column 'topic' (the option wins when both are given)"
        )
    has_partition = "partition" in fields
    if has_partition and not isinstance(fields["partition"].dataType, IntegerType):
        raise SinkSchemaError(
            f"column 'partition' has type {_type_name(fields['partition'].dataType)}; allowed: int "
            "(null lets the partitioner choose)"
        )
    has_headers = "headers" in fields
    if has_headers:
        dt = fields["headers"].dataType
        ok = (
            isinstance(dt, ArrayType)
            and isinstance(dt.elementType, StructType)
            and [f.name.lower() for f in dt.elementType.fields] == ["key", "value"]
            and isinstance(dt.elementType.fields[0].dataType, StringType)
            and isinstance(dt.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise SinkSchemaError(
                f"column 'headers' has type {_type_name(dt)}; allowed: array<struct<key:string,value:binary>>"
            )
    has_timestamp = "timestamp" in fields
    if has_timestamp and not isinstance(fields["timestamp"].dataType, TimestampType | TimestampNTZType):
        raise SinkSchemaError(
            f"column 'timestamp' has type {_type_name(fields['timestamp'].dataType)}; allowed: timestamp"
        )
    known = {"value", "key", "topic", "partition", "headers", "timestamp"}
    ignored = tuple(f.name for f in schema.fields if f.name.lower() not in known)
    if ignored:
        # As in Spark's Kafka sink, other columns are not written.
        logger.info("kproducer sink ignores columns %s", ", ".join(ignored))

    def name(role: str, present: bool) -> str | None:
        return fields[role].name if present else None

    return SinkSchema(
        value=fields["value"].name,
        value_is_string=value_is_string,
        key=name("key", has_key),
        key_is_string=key_is_string,
        topic=name("topic", has_topic),
        partition=name("partition", has_partition),
        headers=name("headers", has_headers),
        timestamp=name("timestamp", has_timestamp),
        ignored=ignored,
    )
