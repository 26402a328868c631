"""RecordMetadata.timestamp_type: 1 when the broker answered with a log-append time (the topic uses
LogAppendTime), 0 otherwise, on every path a record's metadata is built: RecordFuture, the asyncio
completion of a whole batch (C and Python twins), and the aiokafka adapter's RecordMetadata."""

from __future__ import annotations

import asyncio

import pytest

from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
from kproducer.aio import _settle_group_py
from kproducer.compat.aiokafka import _settle
from kproducer.record import native
from kproducer.structs import LogAppendTimeRecordMetadata, RecordMetadata, TopicPartition, metadata_type

TP = TopicPartition("orders", 3)
SETTLERS = [_settle_group_py] + ([native.c.settle_group] if native.c is not None else [])


@pytest.mark.parametrize(("log_append_time", "expected"), [(-1, 0), (999, 1)])
def test_record_future_metadata_says_whose_timestamp_it_is(log_append_time: int, expected: int) -> None:
    result = ProduceRequestResult(TP)
    f = RecordFuture(result, 1, 111, 2, 3)
    result.set(500, log_append_time, None)
    result.done()
    md = f.result()
    assert md.timestamp_type == expected
    assert md.timestamp == (111 if expected == 0 else 999)
    assert (md.topic, md.partition, md.offset, md.serialized_key_size, md.serialized_value_size) == ("orders", 3, 501, 2, 3)
    assert type(md) is (RecordMetadata if expected == 0 else LogAppendTimeRecordMetadata)


@pytest.mark.parametrize("settle", SETTLERS)
@pytest.mark.parametrize(("log_append_time", "expected"), [(-1, 0), (999, 1)])
def test_batch_settlement_on_the_loop_keeps_the_timestamp_type(settle: object, log_append_time: int, expected: int) -> None:
    async def run() -> list[RecordMetadata]:
        loop = asyncio.get_running_loop()
        result = ProduceRequestResult(TP)
        group: list[object] = []
        for rel in range(3):
            group += [loop.create_future(), RecordFuture(result, rel, 100 + rel, 1, 1)]
        assert settle(group, metadata_type(log_append_time), "orders", 3, 40, log_append_time) == []  # type: ignore[operator]
        return [group[i].result() for i in range(0, 6, 2)]  # type: ignore[attr-defined]

    metas = asyncio.run(run())
    assert [m.timestamp_type for m in metas] == [expected] * 3
    assert [m.offset for m in metas] == [40, 41, 42]
    assert [m.timestamp for m in metas] == ([100, 101, 102] if expected == 0 else [999] * 3)


def test_the_aiokafka_adapter_reports_the_timestamp_type() -> None:
    async def run() -> list[object]:
        loop = asyncio.get_running_loop()
        out = []
        for md in (RecordMetadata("t", 0, 5, 111, 1, 1), LogAppendTimeRecordMetadata("t", 0, 6, 999, 1, 1)):
            src: asyncio.Future[RecordMetadata] = loop.create_future()
            dst: asyncio.Future[object] = loop.create_future()
            src.set_result(md)
            _settle(dst, src)  # type: ignore[arg-type]
            out.append(dst.result())
        return out

    create, append = asyncio.run(run())
    assert (create.timestamp, create.timestamp_type, create.offset) == (111, 0, 5)  # type: ignore[attr-defined]
    assert (append.timestamp, append.timestamp_type, append.offset) == (999, 1, 6)  # type: ignore[attr-defined]
