"""Avro values and keys for the bulk path: Arrow columns written as Schema Registry framed Avro.

:mod:`~kproducer.avro.schema` parses or derives schemas (Spark's ``to_avro``
mapping), :mod:`~kproducer.avro.plan` matches a schema against an Arrow type,
:mod:`~kproducer.avro.encoder` writes the rows (C, with a Python twin),
:mod:`~kproducer.avro.registry` talks to a Schema Registry, and
:mod:`~kproducer.avro.serializer` ties them into what ``Producer.send_arrow``
and the Spark sink call. docs/spark.md describes the options.
"""

from kproducer.avro.schema import AvroSchema, AvroSchemaError, derive_schema

__all__ = ["AvroSchema", "AvroSchemaError", "derive_schema"]
