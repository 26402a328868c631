"""Avro values and keys for the bulk path: Arrow columns written as Schema Registry framed Avro.

:mod:`~kproducer.avro.schema` parses or derives schemas (Spark's ``to_avro``
mapping), :mod:`~kproducer.avro.plan` matches a schema against an Arrow type,
:mod:`~kproducer.avro.encoder` writes the rows (C, with a Python twin),
:mod:`~kproducer.avro.registry` talks to a Schema Registry, and
:class:`AvroFormat` ties them into what ``Producer.send_arrow(value_format=...)``
and the Spark sink (``value.format=avro``) use. docs/spark.md describes the options.
"""

from __future__ import annotations

from kproducer._lazy import lazy_exports as _lazy_exports

# The public names load their modules on first use (PEP 562), as the package root's do: a
# producer imports ``kproducer.avro.encoder`` to check that its C extension loads, and must not
# pay for the Schema Registry client (urllib.request, http.client, email, ssl) to do so.
TYPE_CHECKING = False

_EXPORTS = {
    "AvroFormat": "kproducer.avro.serializer",
    "AvroRecordError": "kproducer.avro.writer",
    "AvroSchema": "kproducer.avro.schema",
    "AvroSchemaError": "kproducer.avro.schema",
    "SchemaRegistryClient": "kproducer.avro.registry",
    "SchemaRegistryError": "kproducer.avro.registry",
    "derive_schema": "kproducer.avro.schema",
}

__all__ = [
    "AvroFormat",
    "AvroRecordError",
    "AvroSchema",
    "AvroSchemaError",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "derive_schema",
]

if TYPE_CHECKING:
    from kproducer.avro.registry import SchemaRegistryClient, SchemaRegistryError
    from kproducer.avro.schema import AvroSchema, AvroSchemaError, derive_schema
    from kproducer.avro.serializer import AvroFormat
    from kproducer.avro.writer import AvroRecordError


__getattr__, __dir__ = _lazy_exports("kproducer.avro", _EXPORTS, __all__)
