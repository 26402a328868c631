"""kproducer: a Kafka producer for Python and PySpark, true to the Java producer's internals."""

from kproducer.errors import KafkaError
from kproducer.producer import Producer
from kproducer.structs import Node, PartitionInfo, ProducerRecord, RecordMetadata, TopicPartition

__all__ = [
    "KafkaError",
    "Producer",
    "Node",
    "PartitionInfo",
    "ProducerRecord",
    "RecordMetadata",
    "TopicPartition",
]
__version__ = "0.1.0"
