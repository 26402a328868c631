"""Avro values and keys for the bulk path: Arrow columns written as Schema Registry framed Avro.

:mod:`~kproducer.avro.schema` parses or derives schemas (Spark's ``to_avro``
mapping), :mod:`~kproducer.avro.plan` matches a schema against an Arrow type,
:mod:`~kproducer.avro.encoder` writes the rows (C, with a Python twin),
:mod:`~kproducer.avro.registry` talks to a Schema Registry, and
:class:`AvroFormat` ties them into what ``Producer.send_arrow(value_format=...)``
and the Spark sink (``value.format=avro``) use. docs/spark.md describes the options.
"""

from kproducer.avro.registry import SchemaRegistryClient, SchemaRegistryError
from kproducer.avro.schema import AvroSchema, AvroSchemaError, derive_schema
from kproducer.avro.serializer import AvroFormat
from kproducer.avro.writer import AvroRecordError

__all__ = [
    "AvroFormat",
    "AvroRecordError",
    "AvroSchema",
    "AvroSchemaError",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "derive_schema",
]
