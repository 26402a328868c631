"""The RecordAccumulator and its parts: BufferPool, ProducerBatch, per-record futures (as in the Java producer's ``internals`` package)."""

from kproducer.accumulator.accumulator import (
    ExponentialBackoff,
    NodeLatencyStats,
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
)
from kproducer.accumulator.batch import FinalState, ProducerBatch, Thunk
from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture

__all__ = [
    "BufferPool",
    "ExponentialBackoff",
    "FinalState",
    "NodeLatencyStats",
    "ProduceRequestResult",
    "ProducerBatch",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordFuture",
    "Thunk",
]
