"""A small Schema Registry for the tests: the REST API's calls kproducer and confluent-kafka make, on loopback.

No Schema Registry is installable from the package registries here, so this one
speaks the subset of Confluent's REST API (its "Schema Registry API reference")
that clients use when they write and read Avro:

- ``POST /subjects/{s}/versions`` (register; the same schema gets the same id,
  and an id is shared by subjects registering the same schema), refused with 409
  when the subject's compatibility rule rejects it;
- ``POST /subjects/{s}`` (look up), ``GET /subjects``, ``GET /subjects/{s}/versions``,
  ``GET /subjects/{s}/versions/{n|latest}``, ``GET /schemas/ids/{id}`` (and
  ``/schemas/ids/{id}/versions``);
- ``POST /compatibility/subjects/{s}/versions/{n|latest}`` (``?verbose=true`` gives the reasons);
- ``GET``/``PUT /config`` and ``/config/{s}`` (NONE, BACKWARD, FORWARD, FULL and
  their ``_TRANSITIVE`` forms; BACKWARD by default, as the registry's default).

Compatibility follows the Avro specification's schema resolution (a reader
field missing from the writer needs a default; promotions int -> long -> float
-> double, string <-> bytes; unions branch by branch; record names, enum symbols
and fixed sizes must agree), with messages naming the field and its path.
Optional basic auth (``users``) and TLS (``certfile``) guard it like a secured
registry. It is checked against confluent-kafka's ``SchemaRegistryClient`` in
tests/unit/avro/test_schema_registry.py.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fastavro.schema import expand_schema, parse_schema

__all__ = ["LEVELS", "SchemaRegistry", "incompatibilities"]

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
_PROMOTIONS = {
    "int": {"long", "float", "double"}, "long": {"float", "double"}, "float": {"double"},
    "string": {"bytes"}, "bytes": {"string"},
}


def _expanded(text: str) -> Any:
    return expand_schema(parse_schema(json.loads(text), _write_hint=False, _force=True))


def _kind(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, dict):
        return str(s["type"]) if not isinstance(s["type"], (dict, list)) else _kind(s["type"])
    return str(s)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def incompatibilities(reader: Any, writer: Any, path: str = "") -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (Avro schema resolution); [] when it can."""
    if isinstance(reader, dict) and isinstance(reader.get("type"), (dict, list)):
        reader = reader["type"]
    if isinstance(writer, dict) and isinstance(writer.get("type"), (dict, list)):
        writer = writer["type"]
    rk, wk = _kind(reader), _kind(writer)
    where = path or "/"
    if wk == "union":
        out: list[str] = []
        for i, branch in enumerate(writer):
            out += incompatibilities(reader, branch, f"{path}/{i}")
        return out
    if rk == "union":
        for branch in reader:
            if not incompatibilities(branch, writer, path):
                return []
        return [f"TYPE_MISMATCH at {where}: the new schema's union has no branch reading the old type {wk}"]
    if rk != wk:
        if wk in _PROMOTIONS and rk in _PROMOTIONS[wk]:
            return []
        return [f"TYPE_MISMATCH at {where}: the new type {rk} cannot read the old type {wk}"]
    if rk == "record":
        if _short(reader["name"]) != _short(writer["name"]):
            return [f"NAME_MISMATCH at {where}: record {reader['name']} vs {writer['name']}"]
        out = []
        old = {f["name"]: f for f in writer["fields"]}
        for i, f in enumerate(reader["fields"]):
            if f["name"] in old:
                out += incompatibilities(f["type"], old[f["name"]]["type"], f"{path}/fields/{i}")
            elif "default" not in f:
                out.append(
                    f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}/fields/{i}: the field '{f['name']}' is in the "
                    "new schema without a default value and missing from the old schema"
                )
        return out
    if rk == "array":
        return incompatibilities(reader["items"], writer["items"], f"{path}/items")
    if rk == "map":
        return incompatibilities(reader["values"], writer["values"], f"{path}/values")
    if rk == "enum":
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            return [f"MISSING_ENUM_SYMBOLS at {where}: {', '.join(missing)}"]
        return []
    if rk == "fixed":
        if reader["size"] != writer["size"]:
            return [f"FIXED_SIZE_MISMATCH at {where}: size {reader['size']} vs {writer['size']}"]
        if _short(reader["name"]) != _short(writer["name"]):
            return [f"NAME_MISMATCH at {where}: fixed {reader['name']} vs {writer['name']}"]
    return []


class _Subject:
    def __init__(self) -> None:
        self.versions: list[int] = []  # schema ids, version n at index n-1
        self.compatibility: str | None = None


class SchemaRegistry:
    """The registry's state and an HTTP server over it, on 127.0.0.1 (``url``); ``stop()`` ends it."""

    def __init__(
        self, users: dict[str, str] | None = None, certfile: str | None = None, keyfile: str | None = None
    ) -> None:
        self.lock = threading.Lock()
        self.schemas: list[str] = []  # id n at index n-1
        self.subjects: dict[str, _Subject] = {}
        self.compatibility = "BACKWARD"
        self.users = users
        self.requests: list[tuple[str, str]] = []
        handler = type("Handler", (_Handler,), {"registry": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        scheme = "http"
        if certfile:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile, keyfile)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="test-schema-registry", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def __enter__(self) -> SchemaRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the registry's rules
    def level(self, subject: str) -> str:
        s = self.subjects.get(subject)
        return (s.compatibility if s is not None and s.compatibility else None) or self.compatibility

    def check(self, subject: str, text: str, against: list[int]) -> list[str]:
        level = self.level(subject)
        if level == "NONE" or not against:
            return []
        new = _expanded(text)
        previous = against if level.endswith("_TRANSITIVE") else against[-1:]
        out: list[str] = []
        for sid in previous:
            old = _expanded(self.schemas[sid - 1])
            if level.startswith(("BACKWARD", "FULL")):
                out += incompatibilities(new, old)
            if level.startswith(("FORWARD", "FULL")):
                out += incompatibilities(old, new)
        return out

    def register(self, subject: str, text: str) -> tuple[int, int]:
        """(status, id or error code); registers ``text`` under ``subject`` when its rule allows."""
        parse_schema(json.loads(text))
        with self.lock:
            sub = self.subjects.setdefault(subject, _Subject())
            for sid in sub.versions:
                if json.loads(self.schemas[sid - 1]) == json.loads(text):
                    return 200, sid
            problems = self.check(subject, text, sub.versions)
            if problems:
                raise _Refused(
                    409, 409,
                    f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\", "
                    f"details: [{'; '.join(problems)}]",
                )
            sid = next((i + 1 for i, s in enumerate(self.schemas) if json.loads(s) == json.loads(text)), 0)
            if not sid:
                self.schemas.append(text)
                sid = len(self.schemas)
            sub.versions.append(sid)
            return 200, sid


class _Refused(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        self.status, self.code, self.message = status, code, message


def _version_of(sub: _Subject, subject: str, version: str) -> int:
    if not sub.versions:
        raise _Refused(404, 40401, f"Subject '{subject}' not found.")
    if version in ("latest", "-1"):
        return len(sub.versions)
    try:
        n = int(version)
    except ValueError:
        raise _Refused(422, 42202, f"The specified version '{version}' is not a valid version id.") from None
    if not 1 <= n <= len(sub.versions):
        raise _Refused(404, 40402, f"Version {version} not found.")
    return n


class _Handler(BaseHTTPRequestHandler):
    registry: SchemaRegistry
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - BaseHTTPRequestHandler's name
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _authorized(self) -> bool:
        users = self.registry.users
        if users is None:
            return True
        header = self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            if users.get(user) == password:
                return True
        self._send(401, {"error_code": 401, "message": "Unauthorized"})
        return False

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else {}

    def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's name
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        body = self._body() if method in ("POST", "PUT") else None
        if not self._authorized():
            return
        split = urllib.parse.urlsplit(self.path)
        path = [urllib.parse.unquote(p) for p in split.path.strip("/").split("/") if p]
        query = urllib.parse.parse_qs(split.query)
        reg = self.registry
        reg.requests.append((method, split.path))
        try:
            status, out = self._route(method, path, query, body)
        except _Refused as e:
            status, out = e.status, {"error_code": e.code, "message": e.message}
        except (ValueError, KeyError, TypeError) as e:
            status, out = 422, {"error_code": 42201, "message": f"Invalid schema: {e}"}
        self._send(status, out)

    def _route(self, method: str, path: list[str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        reg = self.registry
        with reg.lock:
            subjects = dict(reg.subjects)
        if path == ["subjects"] and method == "GET":
            return 200, sorted(s for s, sub in subjects.items() if sub.versions)
        if len(path) >= 2 and path[0] == "subjects":
            subject = path[1]
            if len(path) == 3 and path[2] == "versions" and method == "POST":
                if body.get("schemaType", "AVRO") != "AVRO":
                    raise _Refused(422, 42201, "only AVRO schemas are supported by this registry")
                _, sid = reg.register(subject, body["schema"])
                return 200, {"id": sid}
            sub = subjects.get(subject)
            if sub is None or not sub.versions:
                raise _Refused(404, 40401, f"Subject '{subject}' not found.")
            if len(path) == 2 and method == "POST":
                for v, sid in enumerate(sub.versions, 1):
                    if json.loads(reg.schemas[sid - 1]) == json.loads(body["schema"]):
                        return 200, {"subject": subject, "id": sid, "version": v, "schema": reg.schemas[sid - 1]}
                raise _Refused(404, 40403, "Schema not found")
            if len(path) == 3 and path[2] == "versions" and method == "GET":
                return 200, list(range(1, len(sub.versions) + 1))
            if len(path) == 4 and path[2] == "versions" and method == "GET":
                v = _version_of(sub, subject, path[3])
                sid = sub.versions[v - 1]
                return 200, {"subject": subject, "id": sid, "version": v, "schema": reg.schemas[sid - 1]}
        if len(path) >= 3 and path[:2] == ["schemas", "ids"] and method == "GET":
            sid = int(path[2])
            if not 1 <= sid <= len(reg.schemas):
                raise _Refused(404, 40403, f"Schema {sid} not found")
            if len(path) == 4 and path[3] == "versions":
                return 200, [
                    {"subject": s, "version": v} for s, sub in subjects.items()
                    for v, i in enumerate(sub.versions, 1) if i == sid
                ]
            return 200, {"schema": reg.schemas[sid - 1]}
        if len(path) == 5 and path[0] == "compatibility" and path[1] == "subjects" and method == "POST":
            subject = path[2]
            sub = subjects.get(subject)
            if sub is None or not sub.versions:
                raise _Refused(404, 40401, f"Subject '{subject}' not found.")
            v = _version_of(sub, subject, path[4])
            against = sub.versions[:v] if reg.level(subject).endswith("_TRANSITIVE") else [sub.versions[v - 1]]
            problems = reg.check(subject, body["schema"], against)
            out: dict[str, Any] = {"is_compatible": not problems}
            if query.get("verbose") == ["true"]:
                out["messages"] = problems
            return 200, out
        if path and path[0] == "config":
            subject = path[1] if len(path) > 1 else None
            if method == "PUT":
                level = str(body.get("compatibility", "")).upper()
                if level not in LEVELS:
                    raise _Refused(422, 42203, f"Invalid compatibility level {level!r}; allowed: {', '.join(LEVELS)}")
                with reg.lock:
                    if subject is None:
                        reg.compatibility = level
                    else:
                        reg.subjects.setdefault(subject, _Subject()).compatibility = level
                return 200, {"compatibility": level}
            if subject is None:
                return 200, {"compatibilityLevel": reg.compatibility}
            sub = subjects.get(subject)
            if sub is None or sub.compatibility is None:
                if query.get("defaultToGlobal") == ["true"]:
                    return 200, {"compatibilityLevel": reg.compatibility}
                raise _Refused(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
            return 200, {"compatibilityLevel": sub.compatibility}
        if re.fullmatch(r"", "/".join(path)):
            return 200, {}
        raise _Refused(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(path)}")
