"""The Spark code of README.md and the guides (blocks marked ``<!-- spark -->``) runs in the suite's Spark session.

The blocks run as written against the session's Tansu broker (tests/support/doc_blocks.py); a
streaming query a block starts is given a temporary checkpoint directory in place of the page's
example path, runs until it has delivered a micro-batch, and is stopped before the next block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.doc_blocks import USER_PAGES, Block, python_blocks, with_bootstrap


def _spark_blocks(page: str) -> list[Block]:
    return [b for b in python_blocks(page) if b.spark and b.not_run is None]


PAGES = [page for page in USER_PAGES if _spark_blocks(page)]


def test_the_readme_and_the_spark_guide_have_spark_blocks() -> None:
    assert set(PAGES) >= {"README.md", "docs/spark.md"}


def _records_on(bootstrap: str, topic: str) -> int:
    """Records stored in ``topic``, from its watermarks (confluent-kafka, an independent client)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"docs-{topic}", "auto.offset.reset": "earliest"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        low_high = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions]
    finally:
        consumer.close()
    return sum(high - low for low, high in low_high)


def _run(block: Block, namespace: dict[str, Any], spark: Any, bootstrap: str, tmp_path: Path) -> None:
    if block.setup is not None:
        exec(compile(with_bootstrap(block.setup, bootstrap), f"{block.where} (setup)", "exec"), namespace)
    code = with_bootstrap(block.code, bootstrap).replace("/chk/", f"{tmp_path}/{block.line}/chk/")
    try:
        exec(compile(code, block.where, "exec"), namespace)
        for query in spark.streams.active:
            # A micro-batch was delivered and committed before the query is stopped.
            while query.lastProgress is None or query.lastProgress.get("numInputRows", 0) == 0:
                query.awaitTermination(1)
                if query.exception() is not None:
                    raise AssertionError(f"{block.where}: streaming query failed: {query.exception()}")
    finally:
        for query in spark.streams.active:
            query.stop()


@pytest.mark.parametrize("page", PAGES)
def test_spark_blocks_run(page: str, spark: Any, tansu: EmbeddedBroker, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"spark": spark, "__name__": f"doc:{page}"}
    before = _records_on(tansu.bootstrap, "events")
    for block in _spark_blocks(page):
        _run(block, namespace, spark, tansu.bootstrap, tmp_path)
    assert _records_on(tansu.bootstrap, "events") > before
