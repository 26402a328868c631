"""kproducer: a Kafka producer for Python and PySpark, true to the Java producer's internals.

The public names below load on first use (PEP 562 module ``__getattr__``): ``import kproducer``
costs a few milliseconds, ``from kproducer import Producer`` loads the producer and what every
producer needs, and importing one submodule (``kproducer.errors``) does not load the rest.
"""

from __future__ import annotations

import logging as _logging

from kproducer._lazy import lazy_exports as _lazy_exports
from kproducer._version import __version__ as __version__

# Not typing.TYPE_CHECKING: importing typing is most of what this module would cost otherwise
# (mypy treats any TYPE_CHECKING name as true).
TYPE_CHECKING = False

# A library stays quiet until the application configures logging (lost records excepted: see
# kproducer.failure_log.warn_data_loss). Everything logs under the ``kproducer`` hierarchy.
_logging.getLogger("kproducer").addHandler(_logging.NullHandler())

# Each public name and the module that defines it.
_EXPORTS = {
    "KafkaError": "kproducer.errors",
    "NativeStatus": "kproducer.record.c_extension",
    "Producer": "kproducer.producer",
    "Node": "kproducer.structs",
    "PartitionInfo": "kproducer.structs",
    "ProducerRecord": "kproducer.structs",
    "RecordMetadata": "kproducer.structs",
    "TopicPartition": "kproducer.structs",
    "native_available": "kproducer.record.c_extension",
}

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

if TYPE_CHECKING:
    from kproducer.errors import KafkaError
    from kproducer.producer import Producer
    from kproducer.record.c_extension import NativeStatus, native_available
    from kproducer.structs import Node, PartitionInfo, ProducerRecord, RecordMetadata, TopicPartition


__getattr__, __dir__ = _lazy_exports("kproducer", _EXPORTS, __all__)
