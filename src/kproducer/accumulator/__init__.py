"""The RecordAccumulator and its parts: BufferPool, ProducerBatch, per-record futures (as in the Java producer's ``internals`` package)."""

from kproducer.accumulator.accumulator import (
    NodeLatencyStats,
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
)
from kproducer.accumulator.batch import BatchState, FinalState, ProducerBatch
from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture

__all__ = [
    "BatchState",
    "BufferPool",
    "FinalState",
    "NodeLatencyStats",
    "ProduceRequestResult",
    "ProducerBatch",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordFuture",
]
