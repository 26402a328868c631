"""A PySpark job writing Schema Registry framed Avro to Kafka with kproducer: no JVM package, no per-row Python.

Orders (an id, a customer struct, a decimal amount, a timestamp, a nullable
discount, a list of line items and a map of tags) become one Avro record each,
keyed by the order id. The sink derives the schema from the DataFrame (Spark's
``to_avro`` mapping, record ``com.example.Order``), registers it under
``orders-value`` once, on the driver, and the tasks write each row's body
straight from Spark's Arrow batches. The job then reads a few records back with
confluent-kafka's consumer and ``AvroDeserializer`` (if installed) and prints them.

    python examples/avro_registry_job.py [--rows 100000] [--registry URL] [--bootstrap HOST:PORT]

Without ``--bootstrap`` (or ``KAFKA_BOOTSTRAP_SERVERS``) it starts the embedded
broker; without ``--registry`` it starts the test suite's loopback Schema
Registry (tests/support/schema_registry.py; run it from the repository).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ORDER = """
    named_struct(
        'order_id', id,
        'customer', named_struct('id', cast(id % 5000 as int), 'country', element_at(array('PT', 'CH', 'NO', 'CA', 'JP'), cast(id % 5 + 1 as int))),
        'amount', cast(id % 100000 / 100.0 as decimal(10, 2)),
        'created_at', timestamp_micros(1735689600000000 + id * 250000),
        'discount', if(id % 4 = 0, 0.1D, null),
        'items', array(named_struct('sku', concat('SKU-', id % 977), 'qty', cast(id % 3 + 1 as int))),
        'tags', map('channel', if(id % 2 = 0, 'web', 'store'))
    ) as value
"""


@contextlib.contextmanager
def _registry(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tests.support.schema_registry import SchemaRegistry

    with SchemaRegistry() as reg:
        yield reg.url


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from kproducer.embedded_broker import start_embedded_broker

    with start_embedded_broker() as broker:
        yield broker.bootstrap


def _show_some(bootstrap: str, registry: str, topic: str, count: int = 3) -> None:
    try:
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext
    except ImportError:
        print("(confluent-kafka with its schemaregistry extra is not installed: not reading back)")
        return
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "avro-example", "enable.auto.commit": False})
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    shown = 0
    try:
        while shown < count:
            msg = consumer.poll(10)
            if msg is None:
                break
            if msg.error():
                continue
            value: Any = deser(msg.value(), SerializationContext(topic, MessageField.VALUE))
            print(f"  offset {msg.offset()} key {msg.key()!r}: {value}")
            shown += 1
    finally:
        consumer.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--registry", help="Schema Registry URL (default: a loopback one for this run)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    from kproducer.admin import create_topics
    from kproducer.spark import register, write_to_kafka

    spark = (
        SparkSession.builder.master("local[2]").appName("kproducer-avro-example")
        .config("spark.ui.enabled", "false").getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    with _broker(args.bootstrap) as bootstrap, _registry(args.registry) as registry:
        with contextlib.suppress(Exception):  # it may exist already
            create_topics(bootstrap, {args.topic: 3})
        orders = spark.range(args.rows).selectExpr("cast(id as string) as key", ORDER)
        summary = write_to_kafka(
            orders, args.topic, bootstrap_servers=bootstrap, linger_ms=5,
            options={
                "value.format": "avro",
                "schema.registry.url": registry,
                "avro.record.name": "Order",
                "avro.record.namespace": "com.example",
            },
        )
        print(summary.line())
        _show_some(bootstrap, registry, args.topic)
    spark.stop()
    return 0 if summary.records == args.rows else 1


if __name__ == "__main__":
    sys.exit(main())
