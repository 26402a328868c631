"""A small Schema Registry client: the REST calls a writer makes, over ``urllib`` (standard library only).

Why not confluent-kafka's ``SchemaRegistryClient``: it brings httpx, authlib,
cachetools and attrs (and librdkafka through confluent-kafka) into every Spark
executor for four REST calls made once per writer; kproducer has no mandatory
dependency on any of them. The calls and their JSON are the registry's REST API
(Confluent's "Schema Registry API reference"):

- ``POST /subjects/{subject}/versions``: register, giving the schema id
  (the same id when the schema is registered already);
- ``POST /subjects/{subject}``: look a schema up without registering it;
- ``GET /subjects/{subject}/versions/latest``: the latest version;
- ``GET /schemas/ids/{id}``: a schema by id;
- ``POST /compatibility/subjects/{subject}/versions/latest?verbose=true``: would
  this schema be accepted, and if not, the registry's reasons;
- ``GET /config``: the default compatibility level, asked by the Spark driver when
  the subjects come from the rows, to find out before any task starts that the
  registry answers and accepts the credentials.

Basic auth (``basic.auth.user.info`` ``user:password``, as the Java serializers'
``basic.auth.credentials.source=USER_INFO``) and TLS (a CA file, and a client
certificate and key for mutual TLS) are the ways of reaching a secured registry.
Several URLs (comma-separated) are tried in turn when one cannot be reached.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from kproducer.avro.schema import AvroSchema
from kproducer.errors import ErrorName, KafkaError

__all__ = [
    "RegisteredSchema",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "subject_name",
]

log = logging.getLogger(__name__)

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

# Subject name strategies, by their short name and by the Java class names the serializers take.
_STRATEGIES = {
    "topic": "topic",
    "topicnamestrategy": "topic",
    "io.confluent.kafka.serializers.subject.topicnamestrategy": "topic",
    "record": "record",
    "recordnamestrategy": "record",
    "io.confluent.kafka.serializers.subject.recordnamestrategy": "record",
    "topic_record": "topic_record",
    "topic-record": "topic_record",
    "topicrecordnamestrategy": "topic_record",
    "io.confluent.kafka.serializers.subject.topicrecordnamestrategy": "topic_record",
}


def subject_depends_on_topic(strategy: str) -> bool:
    """False for the record strategy, whose subject is the record's full name whatever the topic."""
    return _STRATEGIES.get(strategy.strip().lower()) != "record"


def subject_name(strategy: str, topic: str, schema: AvroSchema, is_key: bool) -> str:
    """The subject a schema is registered under (the Java serializers' ``*.subject.name.strategy``).

    ``topic``: ``<topic>-value`` / ``<topic>-key``; ``record``: the record's full
    name; ``topic_record``: ``<topic>-<record full name>``.
    """
    kind = _STRATEGIES.get(strategy.strip().lower())
    if kind is None:
        raise ValueError(
            f"subject name strategy {strategy!r} is not one of topic, record, topic_record "
            "(or TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy)"
        )
    if kind == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    name = schema.name
    if name is None:
        raise ValueError(
            f"subject name strategy {strategy!r} names the subject after the record, but the schema is not "
            f"a record ({schema.json[:80]})"
        )
    return name if kind == "record" else f"{topic}-{name}"


class SchemaRegistryError(KafkaError):
    """The registry refused a call (or could not be reached): its HTTP status, error code and message."""

    name = ErrorName("SCHEMA_REGISTRY_ERROR")

    def __init__(self, message: str, http_status: int = -1, error_code: int = -1) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry knows it."""

    schema_id: int
    subject: str | None
    version: int | None
    schema: AvroSchema


class SchemaRegistryClient:
    """The registry REST calls a writer needs; one instance per writer, no cache beyond the caller's."""

    def __init__(
        self,
        url: str,
        *,
        basic_auth_user_info: str | None = None,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_key_password: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not urls:
            raise ValueError("schema registry url is empty; give e.g. http://registry:8081")
        for u in urls:
            scheme = urllib.parse.urlsplit(u).scheme
            if scheme not in ("http", "https"):
                raise ValueError(f"schema registry url {u!r} must start with http:// or https://")
        self.urls = urls
        self.timeout_s = timeout_s
        self._auth: str | None = None
        if basic_auth_user_info:
            if ":" not in basic_auth_user_info:
                raise ValueError("basic auth user info must be 'user:password'")
            self._auth = "Basic " + base64.b64encode(basic_auth_user_info.encode()).decode("ascii")
        self._ssl: ssl.SSLContext | None = None
        if any(u.startswith("https:") for u in urls):
            ctx = ssl.create_default_context(cafile=ssl_ca_location)
            if ssl_certificate_location:
                ctx.load_cert_chain(ssl_certificate_location, ssl_key_location, ssl_key_password)
            self._ssl = ctx

    def __repr__(self) -> str:
        return f"SchemaRegistryClient({','.join(self.urls)!r}, auth={'basic' if self._auth else 'none'})"

    # ------------------------------------------------------------------ HTTP
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        last: BaseException | None = None
        for base in self.urls:
            req = urllib.request.Request(base + path, data=data, method=method)
            req.add_header("Accept", f"{_CONTENT_TYPE}, application/json")
            if data is not None:
                req.add_header("Content-Type", _CONTENT_TYPE)
            if self._auth:
                req.add_header("Authorization", self._auth)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s, context=self._ssl) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    payload = json.loads(raw)
                    message = str(payload.get("message", raw.decode(errors="replace")))
                    code = int(payload.get("error_code", e.code))
                except (ValueError, AttributeError):
                    message, code = raw.decode(errors="replace") or e.reason, e.code
                raise SchemaRegistryError(
                    f"schema registry {base} answered {method} {path.split('?')[0]} with HTTP {e.code} "
                    f"(error code {code}): {message}",
                    e.code, code,
                ) from None
            except (urllib.error.URLError, OSError) as e:
                log.warning("schema registry %s unreachable (%s)", base, e)
                last = e
        raise SchemaRegistryError(f"no schema registry reachable at {', '.join(self.urls)}: {last}")

    @staticmethod
    def _subject_path(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    # ------------------------------------------------------------------ calls
    def register(self, subject: str, schema: AvroSchema) -> int:
        """Register ``schema`` under ``subject`` (or find it registered); its id."""
        resp = self._call("POST", f"/subjects/{self._subject_path(subject)}/versions", {"schema": schema.json})
        return int(resp["id"])

    def lookup(self, subject: str, schema: AvroSchema) -> RegisteredSchema:
        """The registered version of ``schema`` under ``subject``; SchemaRegistryError (404) when absent."""
        resp = self._call("POST", f"/subjects/{self._subject_path(subject)}", {"schema": schema.json})
        return RegisteredSchema(int(resp["id"]), resp.get("subject", subject), resp.get("version"), schema)

    def latest(self, subject: str) -> RegisteredSchema:
        """The latest version registered under ``subject``."""
        resp = self._call("GET", f"/subjects/{self._subject_path(subject)}/versions/latest")
        return RegisteredSchema(int(resp["id"]), resp.get("subject", subject), resp.get("version"), AvroSchema(resp["schema"]))

    def global_compatibility(self) -> str:
        """The registry's default compatibility level (``GET /config``): also proves it answers, with these credentials."""
        resp = self._call("GET", "/config")
        return str(resp.get("compatibilityLevel", resp.get("compatibility", "")))

    def schema_by_id(self, schema_id: int) -> AvroSchema:
        resp = self._call("GET", f"/schemas/ids/{int(schema_id)}")
        return AvroSchema(resp["schema"])

    def test_compatibility(self, subject: str, schema: AvroSchema) -> tuple[bool, list[str]]:
        """Whether the subject's compatibility rule accepts ``schema``, and the registry's reasons if not.

        A subject with no version yet accepts any schema.
        """
        try:
            resp = self._call(
                "POST", f"/compatibility/subjects/{self._subject_path(subject)}/versions/latest?verbose=true",
                {"schema": schema.json},
            )
        except SchemaRegistryError as e:
            if e.http_status == 404 and e.error_code in (40401, 40402):
                return True, []
            raise
        return bool(resp.get("is_compatible")), [str(m) for m in resp.get("messages") or []]
