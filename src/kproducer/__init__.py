"""kproducer: a Kafka producer for Python and PySpark, true to the Java producer's internals."""

import logging as _logging

from kproducer._version import __version__ as __version__
from kproducer.errors import KafkaError
from kproducer.producer import Producer
from kproducer.record.c_extension import NativeStatus, native_available
from kproducer.structs import Node, PartitionInfo, ProducerRecord, RecordMetadata, TopicPartition

# A library stays quiet until the application configures logging (lost records excepted: see
# kproducer.failure_log.warn_data_loss). Everything logs under the ``kproducer`` hierarchy.
_logging.getLogger("kproducer").addHandler(_logging.NullHandler())

__all__ = [
    "KafkaError",
    "NativeStatus",
    "Producer",
    "Node",
    "PartitionInfo",
    "ProducerRecord",
    "RecordMetadata",
    "TopicPartition",
    "native_available",
]
