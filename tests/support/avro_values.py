"""Arrow rows as an Avro reader gives them back, for comparing what kproducer.avro wrote."""

from __future__ import annotations

from typing import Any


def as_avro_reads(value: Any, t: Any) -> Any:
    """pyarrow's ``to_pylist`` value of type ``t`` as fastavro (and confluent-kafka's AvroDeserializer) read it:
    maps are dicts, the rest is as pyarrow gives it."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: as_avro_reads(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {t.field(i).name: as_avro_reads(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [as_avro_reads(v, t.value_type) for v in value]
    return value
