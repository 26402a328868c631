"""``AvroFormat``: how ``Producer.send_arrow`` and the Spark sink turn an Arrow column into registry Avro.

One ``AvroFormat`` is made per writer (a producer's caller, a Spark query) and
passed as ``send_arrow(..., value_format=fmt)`` (or ``key_format``): it holds the
registry client and, per (topic, Arrow type), the resolved schema, its id and the
compiled write plan, so the registry is asked once per writer, not per call. It
is an object rather than a string option for that reason, as confluent-kafka's
``AvroSerializer`` is.

Where the schema comes from, in this order:

1. ``schema``: the Avro schema given as JSON (``value.avro.schema``);
2. ``use_latest_version``: the latest version registered under the subject;
3. otherwise derived from the column's Arrow type with Spark's ``to_avro``
   mapping (:func:`kproducer.avro.schema.derive_schema`), the top-level record
   named ``record_name`` in ``record_namespace``.

Its id: ``schema_id`` when given; else registered under the subject
(``auto_register``, the default, as the Java serializers' ``auto.register.schemas``)
or looked up there; without a registry URL and id the bodies are written without
the registry framing (bare Avro, as Spark's ``to_avro`` writes). A registry that
is down or refuses the schema raises :class:`~kproducer.avro.registry.SchemaRegistryError`
with the registry's message before any row is sent.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kproducer.avro.registry import SchemaRegistryClient, subject_depends_on_topic, subject_name
from kproducer.avro.schema import AvroSchema, derive_schema
from kproducer.avro.writer import AvroColumnWriter
from kproducer.errors import ConfigError

__all__ = ["AVRO_OPTIONS", "SIDED_OPTIONS", "AvroFormat", "avro_format_from_options"]

_TRUE = {"true": True, "false": False}

# The option names (Spark sink, avro_format_from_options) and what they set; "value." / "key." prefixes
# choose the side for the schema options, the registry options are shared by both.
AVRO_OPTIONS = {
    "schema.registry.url": "the registry's URL(s), comma-separated",
    "schema.registry.basic.auth.user.info": "user:password for the registry's basic auth",
    "schema.registry.ssl.ca.location": "CA file (PEM) the registry's certificate is checked against",
    "schema.registry.ssl.certificate.location": "client certificate (PEM) for mutual TLS to the registry",
    "schema.registry.ssl.key.location": "client key (PEM) for mutual TLS to the registry",
    "schema.registry.ssl.key.password": "the client key's password",
    "auto.register.schemas": "true (default): register the schema; false: it must be registered already",
    "use.latest.version": "true: write with the subject's latest registered schema",
    "subject.name.strategy": "topic (default), record or topic_record",
    "avro.schema": "the Avro schema as JSON (else derived from the column as Spark's to_avro does)",
    "avro.schema.id": "the schema id to frame rows with, without asking the registry",
    "avro.record.name": "the derived top-level record's name (default topLevelRecord)",
    "avro.record.namespace": "the derived top-level record's namespace (default empty)",
}
SIDED_OPTIONS = {
    "auto.register.schemas", "use.latest.version", "subject.name.strategy", "avro.schema", "avro.schema.id",
    "avro.record.name", "avro.record.namespace",
}


@dataclass(frozen=True, slots=True)
class _Settings:
    registry_url: str | None
    basic_auth_user_info: str | None
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_key_password: str | None
    subject_name_strategy: str
    schema: str | None
    schema_id: int | None
    use_latest_version: bool
    auto_register: bool
    record_name: str
    record_namespace: str
    is_key: bool


class AvroFormat:
    """Avro with (or without) a Schema Registry for one side (value or key) of ``send_arrow`` rows."""

    def __init__(
        self,
        schema_registry_url: str | None = None,
        *,
        schema: str | Mapping[str, Any] | AvroSchema | None = None,
        schema_id: int | None = None,
        subject_name_strategy: str = "topic",
        use_latest_version: bool = False,
        auto_register: bool = True,
        record_name: str = "topLevelRecord",
        record_namespace: str = "",
        basic_auth_user_info: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_key_password: str | None = None,
        is_key: bool = False,
    ) -> None:
        if isinstance(schema, AvroSchema):
            schema_text: str | None = schema.json
        elif schema is not None:
            schema_text = AvroSchema(schema).json  # parsed now: a malformed schema fails here
        else:
            schema_text = None
        if use_latest_version and schema_text is not None:
            raise ConfigError("give either an Avro schema or use.latest.version=true, not both")
        if (use_latest_version or not auto_register) and not schema_registry_url and schema_id is None:
            raise ConfigError("use.latest.version and auto.register.schemas=false need schema.registry.url")
        # An unknown strategy name fails here, not at the first send.
        subject_name(subject_name_strategy, "t", AvroSchema({"type": "record", "name": "r", "fields": []}), is_key)
        self._start(_Settings(
            schema_registry_url or None, basic_auth_user_info, ssl_ca_location, ssl_certificate_location,
            ssl_key_location, ssl_key_password, subject_name_strategy, schema_text, schema_id,
            use_latest_version, auto_register, record_name, record_namespace, is_key,
        ))

    @classmethod
    def _rebuild(cls, settings: _Settings) -> AvroFormat:
        """A format from settings already checked (unpickled, or derived from another format)."""
        fmt = cls.__new__(cls)
        fmt._start(settings)
        return fmt

    def _start(self, settings: _Settings) -> None:
        """The state of a format with these (checked) settings: no registry client or writer yet."""
        self._settings = settings
        self._lock = threading.Lock()
        self._writers: dict[tuple[str, Any], AvroColumnWriter] = {}
        self._client: SchemaRegistryClient | None = None
        self._twin: AvroFormat | None = None

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"AvroFormat({s.registry_url!r}, side={'key' if s.is_key else 'value'}, "
            f"strategy={s.subject_name_strategy!r}, schema={'given' if s.schema else 'derived'})"
        )

    def __reduce__(self) -> Any:
        # Spark ships the format to its tasks: the settings travel, the client and cache are rebuilt.
        return (self._rebuild, (self._settings,))

    @property
    def is_key(self) -> bool:
        return self._settings.is_key

    @property
    def subject_depends_on_topic(self) -> bool:
        """Whether the subject changes with the topic (the topic and topic_record strategies)."""
        return subject_depends_on_topic(self._settings.subject_name_strategy)

    def for_key(self) -> AvroFormat:
        """The same settings for the key side (subjects ``<topic>-key``)."""
        return self.for_side(True)

    def for_side(self, is_key: bool) -> AvroFormat:
        """This format for keys or for values: itself, or its twin for the other side (made once, kept)."""
        if is_key == self._settings.is_key:
            return self
        with self._lock:
            if self._twin is None:
                self._twin = self._rebuild(replace(self._settings, is_key=is_key))
            return self._twin

    def pinned(self, schema: AvroSchema, schema_id: int | None) -> AvroFormat:
        """These settings with the schema and its id fixed (what the Spark driver hands its tasks)."""
        return self._rebuild(replace(self._settings, schema=schema.json, schema_id=schema_id, use_latest_version=False))

    def client(self) -> SchemaRegistryClient | None:
        s = self._settings
        if s.registry_url is None:
            return None
        if self._client is None:
            self._client = SchemaRegistryClient(
                s.registry_url, basic_auth_user_info=s.basic_auth_user_info, ssl_ca_location=s.ssl_ca_location,
                ssl_certificate_location=s.ssl_certificate_location, ssl_key_location=s.ssl_key_location,
                ssl_key_password=s.ssl_key_password,
            )
        return self._client

    def writer(self, topic: str, arrow_type: Any) -> AvroColumnWriter:
        """The writer for ``topic``'s rows of this Arrow type: schema resolved, registered once, plan compiled."""
        key = (topic, arrow_type)
        with self._lock:
            w = self._writers.get(key)
            if w is None:
                schema, schema_id = self.resolve(topic, arrow_type)
                w = AvroColumnWriter(schema, schema_id, "key" if self._settings.is_key else "value")
                w.plan_for(arrow_type)  # a schema that does not fit the column fails here, naming the field
                self._writers[key] = w
            return w

    def resolve(self, topic: str, arrow_type: Any) -> tuple[AvroSchema, int | None]:
        """The schema and its id for ``topic``'s rows, asking the registry as the settings say."""
        s = self._settings
        client = self.client()
        if s.schema is not None:
            schema = AvroSchema(s.schema)
        elif s.use_latest_version:
            assert client is not None
            probe = derive_schema(arrow_type, s.record_name, s.record_namespace)
            latest = client.latest(subject_name(s.subject_name_strategy, topic, probe, s.is_key))
            return latest.schema, latest.schema_id
        else:
            schema = derive_schema(arrow_type, s.record_name, s.record_namespace)
        if s.schema_id is not None or client is None:
            return schema, s.schema_id
        subject = subject_name(s.subject_name_strategy, topic, schema, s.is_key)
        if s.auto_register:
            return schema, client.register(subject, schema)
        return schema, client.lookup(subject, schema).schema_id

    def check_registry(self) -> None:
        """Raise SchemaRegistryError unless the registry these settings will ask answers (nothing when none is asked)."""
        client = self.client()
        if client is not None and self._settings.schema_id is None:
            client.global_compatibility()

    def check_compatible(self, topic: str, arrow_type: Any) -> list[str]:
        """The registry's reasons this topic's schema would be refused ([] when it is accepted or no registry)."""
        s = self._settings
        client = self.client()
        if client is None or s.use_latest_version or s.schema_id is not None:
            return []
        schema = AvroSchema(s.schema) if s.schema is not None else derive_schema(arrow_type, s.record_name, s.record_namespace)
        ok, messages = client.test_compatibility(subject_name(s.subject_name_strategy, topic, schema, s.is_key), schema)
        return [] if ok else (messages or ["the registry's compatibility rule refuses the schema"])


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = _TRUE.get(raw.strip().lower())
    if value is None:
        raise ConfigError(f"option {name!r} is {raw!r}; allowed: true, false")
    return value


def avro_format_from_options(options: Mapping[str, str], side: str) -> AvroFormat:
    """An AvroFormat for ``side`` ("value" or "key") from option names as in :data:`AVRO_OPTIONS`.

    Schema options may be given per side (``value.avro.schema``, ``key.subject.name.strategy``)
    or for both (``subject.name.strategy``); the ``schema.registry.*`` options are shared.
    """

    def get(name: str) -> str | None:
        if name in SIDED_OPTIONS:
            return options.get(f"{side}.{name}", options.get(name))
        return options.get(name)

    sided = {name: get(name) for name in AVRO_OPTIONS}
    flags = {k: v for k, v in sided.items() if v is not None}
    schema_id: int | None = None
    if sided["avro.schema.id"] is not None:
        try:
            schema_id = int(sided["avro.schema.id"])
        except ValueError:
            raise ConfigError(f"option '{side}.avro.schema.id' is {sided['avro.schema.id']!r}; allowed: an integer id")
    return AvroFormat(
        sided["schema.registry.url"],
        schema=sided["avro.schema"],
        schema_id=schema_id,
        subject_name_strategy=sided["subject.name.strategy"] or "topic",
        use_latest_version=_flag(flags, "use.latest.version", False),
        auto_register=_flag(flags, "auto.register.schemas", True),
        record_name=sided["avro.record.name"] or "topLevelRecord",
        record_namespace=sided["avro.record.namespace"] or "",
        basic_auth_user_info=sided["schema.registry.basic.auth.user.info"],
        ssl_ca_location=sided["schema.registry.ssl.ca.location"],
        ssl_certificate_location=sided["schema.registry.ssl.certificate.location"],
        ssl_key_location=sided["schema.registry.ssl.key.location"],
        ssl_key_password=sided["schema.registry.ssl.key.password"],
        is_key=side == "key",
    )
