"""Key and value serializers: turn application objects into the bytes a record carries.

Serialization runs on the caller's thread inside ``send()``, so the built-ins
are plain functions over the stdlib codecs with no per-call allocation beyond
the result. The producer keeps a fast path that skips serializers entirely for
bytes; :func:`is_passthrough` tells it when that path is allowed.
"""

from __future__ import annotations

import inspect
import logging
import struct
import sys
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from kproducer.common.loader import load_object
from kproducer.errors import ConfigError, SerializationError

logger = logging.getLogger(__name__)

__all__ = [
    "Headers",
    "Serializer",
    "AutoSerializer",
    "BytesSerializer",
    "StringSerializer",
    "IntegerSerializer",
    "LongSerializer",
    "DoubleSerializer",
    "JsonSerializer",
    "NoneSerializer",
    "CallableSerializer",
    "ContextSerializer",
    "SERIALIZER_NAMES",
    "resolve_serializer",
    "is_passthrough",
]

Headers = list[tuple[str, bytes | None]]

_BYTES_LIKE = (bytes, bytearray, memoryview)


@runtime_checkable
class Serializer(Protocol):
    """Converts a key or value to bytes (or None for a null key/value), like Java's ``Serializer``.

    Optional extras a serializer may define: ``close()`` (called when the producer
    closes) and ``passthrough`` (True when bytes come back unchanged, letting the
    producer skip the call for ``bytes``). :func:`resolve_serializer` always returns
    an object with ``passthrough`` set.
    """

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None: ...


def _field(is_key: bool) -> str:
    return "key" if is_key else "value"


def _config_key(is_key: bool) -> str:
    return "key.serializer" if is_key else "value.serializer"


def _type_error(is_key: bool, data: Any, expected: str, serializer: str) -> SerializationError:
    return SerializationError(
        f"cannot serialize {_field(is_key)} of type {type(data).__name__} with the {serializer} serializer "
        f"(expected {expected}); set {_config_key(is_key)} to a serializer for this type"
    )


def _user_serializer_result(is_key: bool, label: str, data: Any, func: Callable[..., Any], *args: Any) -> bytes | None:
    """``func(*args)``, a user's serializer: its own SerializationError as is, any other error wrapped
    naming ``label`` (the config key and the callable) and the data's type, and a result that is not
    bytes-like refused (bytearray and memoryview become bytes)."""
    try:
        out = func(*args)
    except SerializationError:
        raise
    except Exception as e:
        raise SerializationError(
            f"{label} failed on {_field(is_key)} of type {type(data).__name__}: {type(e).__name__}: {e}"
        ) from e
    if out is None or type(out) is bytes:
        return out
    if isinstance(out, _BYTES_LIKE):
        return bytes(out)
    raise SerializationError(f"{label} returned {type(out).__name__}; it must return bytes, bytearray, memoryview or None")


class _Base:
    """Holds which field (key or value) a serializer serves, so errors can name it."""

    __slots__ = ("is_key",)
    name = "base"
    passthrough = False

    def __init__(self, *, is_key: bool = False) -> None:
        self.is_key = is_key

    def close(self) -> None:
        """Built-ins hold no resources."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(is_key={self.is_key})"


class BytesSerializer(_Base):
    """Bytes-like passthrough (bytes, bytearray, memoryview); None stays None."""

    __slots__ = ()
    name = "bytes"
    passthrough = True

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, _BYTES_LIKE):
            return bytes(data)
        raise _type_error(self.is_key, data, "bytes, bytearray or memoryview", self.name)


class StringSerializer(_Base):
    """``str`` encoded with a configurable codec (UTF-8 by default), like Java's StringSerializer."""

    __slots__ = ("encoding",)
    name = "str"

    def __init__(self, encoding: str = "utf-8", *, is_key: bool = False) -> None:
        super().__init__(is_key=is_key)
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigError(f"{_config_key(is_key)}: unknown string encoding {encoding!r}")
        self.encoding = encoding

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None:
            return None
        if isinstance(data, str):
            try:
                return data.encode(self.encoding)
            except UnicodeEncodeError as e:
                raise SerializationError(
                    f"cannot encode {_field(self.is_key)} as {self.encoding}: {e}; "
                    f"set {_config_key(self.is_key)} to another encoding or serializer"
                )
        raise _type_error(self.is_key, data, "str", self.name)


def _check_int(is_key: bool, data: Any, name: str) -> int:
    # bool is an int subclass; a True key is almost certainly a bug, so refuse it.
    if type(data) is bool or not isinstance(data, int):
        raise _type_error(is_key, data, "int", name)
    return data


class _FixedIntSerializer(_Base):
    """A big-endian two's complement int of a fixed width (Java's Integer/LongSerializer)."""

    __slots__ = ()
    _pack: Any
    _range: str = ""

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None:
            return None
        value = _check_int(self.is_key, data, self.name)
        try:
            packed: bytes = self._pack(value)
        except struct.error:
            raise SerializationError(f"{_field(self.is_key)} {value} is outside the {self._range}{self._hint()}")
        return packed

    def _hint(self) -> str:
        """What to do instead, if there is a wider type."""
        return ""


class IntegerSerializer(_FixedIntSerializer):
    """Java IntegerSerializer: 4-byte big-endian two's complement."""

    __slots__ = ()
    name = "int"
    _pack = struct.Struct(">i").pack
    _range = "32-bit signed range [-2**31, 2**31-1]"

    def _hint(self) -> str:
        return f"; set {_config_key(self.is_key)} to 'long' for 64-bit values"


class LongSerializer(_FixedIntSerializer):
    """Java LongSerializer: 8-byte big-endian two's complement."""

    __slots__ = ()
    name = "long"
    _pack = struct.Struct(">q").pack
    _range = "64-bit signed range [-2**63, 2**63-1]"


class DoubleSerializer(_Base):
    """Java DoubleSerializer: 8-byte big-endian IEEE 754."""

    __slots__ = ()
    name = "float"
    _pack = struct.Struct(">d").pack

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None:
            return None
        if type(data) is bool or not isinstance(data, int | float):
            raise _type_error(self.is_key, data, "float or int", self.name)
        try:
            return self._pack(float(data))
        except OverflowError:
            raise SerializationError(f"{_field(self.is_key)} {data} does not fit a 64-bit IEEE double")


class JsonSerializer(_Base):
    """Compact JSON (no spaces after separators), UTF-8; None stays a null record, not ``null``."""

    __slots__ = ("_encode",)
    name = "json"

    def __init__(self, *, is_key: bool = False) -> None:
        super().__init__(is_key=is_key)
        import json  # loaded when a JSON serializer is configured, not by every import

        self._encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None:
            return None
        try:
            return self._encode(data).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise SerializationError(
                f"cannot serialize {_field(self.is_key)} of type {type(data).__name__} as JSON: {e}; "
                f"set {_config_key(self.is_key)} to a serializer for this type"
            )


class NoneSerializer(_Base):
    """Always None: for tombstones or key-less records whatever the caller passes."""

    __slots__ = ()
    name = "none"

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        return None


class AutoSerializer(_Base):
    """Used when no serializer is configured: bytes-like passthrough and str as UTF-8 (as confluent-kafka)."""

    __slots__ = ()
    name = "auto"
    passthrough = True

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        if data is None or type(data) is bytes:
            return data
        if isinstance(data, str):
            return data.encode("utf-8")
        if isinstance(data, _BYTES_LIKE):
            return bytes(data)
        raise SerializationError(
            f"{_field(self.is_key)} of type {type(data).__name__} needs a serializer: without "
            f"{_config_key(self.is_key)} only bytes, bytearray, memoryview, str and None are accepted; "
            f"set {_config_key(self.is_key)} (e.g. 'json', 'int', 'long', 'float' or a Serializer)"
        )


class CallableSerializer(_Base):
    """Adapts a plain ``f(data) -> bytes`` function; checks what it returns."""

    __slots__ = ("func", "_label")
    name = "callable"

    def __init__(self, func: Callable[[Any], Any], *, is_key: bool = False) -> None:
        super().__init__(is_key=is_key)
        self.func = func
        self._label = f"{_config_key(is_key)} callable {_qualname(func)}"

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        return _user_serializer_result(self.is_key, self._label, data, self.func, data)

    def __repr__(self) -> str:
        return f"CallableSerializer({_qualname(self.func)}, is_key={self.is_key})"


class ContextSerializer(_Base):
    """A confluent-kafka serializer: any ``f(obj, SerializationContext) -> bytes``.

    confluent-kafka's ``StringSerializer``, its schema-registry ``AvroSerializer``,
    ``JSONSerializer`` and ``ProtobufSerializer`` (and any subclass of
    ``confluent_kafka.serialization.Serializer``) take the object and a
    ``SerializationContext(topic, MessageField.KEY or VALUE, headers)``, as
    confluent-kafka's ``SerializingProducer`` calls them. The context is built from
    confluent-kafka itself, so it stays an optional dependency: a callable that
    takes two positional arguments without confluent-kafka installed is refused
    when configured. The record's headers are the list the record is sent with:
    a serializer that adds a header (a schema id, say) adds it to the record.
    """

    __slots__ = ("func", "_context", "_field", "_label")
    name = "confluent-kafka"

    def __init__(self, func: Callable[[Any, Any], Any], *, is_key: bool = False) -> None:
        super().__init__(is_key=is_key)
        try:
            from confluent_kafka.serialization import MessageField, SerializationContext
        except ImportError as e:
            raise ConfigError(
                f"{_config_key(is_key)}: {_qualname(func)} takes (obj, ctx) like a confluent-kafka serializer, "
                "which needs confluent-kafka for its SerializationContext: pip install 'kproducer[confluent]'"
            ) from e
        self.func = func
        self._context: Any = SerializationContext
        self._field = MessageField.KEY if is_key else MessageField.VALUE
        self._label = f"{_config_key(is_key)} {_qualname(func)}"

    def serialize(self, topic: str, data: Any, headers: Headers | None) -> bytes | None:
        context = self._context(topic, self._field, headers)
        return _user_serializer_result(self.is_key, self._label, data, self.func, data, context)

    def __repr__(self) -> str:
        return f"ContextSerializer({_qualname(self.func)}, is_key={self.is_key})"


def _takes_context(obj: Any) -> bool:
    """Whether ``obj`` is a confluent-kafka serializer: one of its Serializer classes, or needs 2 arguments."""
    confluent = sys.modules.get("confluent_kafka.serialization")
    if confluent is not None and isinstance(obj, confluent.Serializer):
        return True
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind(None)
    except TypeError:
        pass
    else:
        return False  # f(data) works: a plain function serializer
    try:
        sig.bind(None, None)
    except TypeError:
        return False
    return True


class _UserSerializer:
    """Wraps a user Serializer lacking ``passthrough``; binds its methods directly, so no extra call layer."""

    __slots__ = ("serialize", "close", "wrapped")
    passthrough = False

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.serialize = wrapped.serialize
        close = getattr(wrapped, "close", None)
        self.close = close if callable(close) else _noop

    def __repr__(self) -> str:
        return f"_UserSerializer({self.wrapped!r})"


def _noop() -> None:
    """close() of a serializer that defines none."""


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


_BUILTINS: dict[str, Callable[[bool], Serializer]] = {
    "bytes": lambda k: BytesSerializer(is_key=k),
    "str": lambda k: StringSerializer(is_key=k),
    "string": lambda k: StringSerializer(is_key=k),
    "int": lambda k: IntegerSerializer(is_key=k),
    "integer": lambda k: IntegerSerializer(is_key=k),
    "long": lambda k: LongSerializer(is_key=k),
    "float": lambda k: DoubleSerializer(is_key=k),
    "double": lambda k: DoubleSerializer(is_key=k),
    "json": lambda k: JsonSerializer(is_key=k),
    "none": lambda k: NoneSerializer(is_key=k),
    "auto": lambda k: AutoSerializer(is_key=k),
}

# Java serializer class names map onto the built-in with the same wire format.
_JAVA_NAMES = {
    "org.apache.kafka.common.serialization.ByteArraySerializer": "bytes",
    "org.apache.kafka.common.serialization.BytesSerializer": "bytes",
    "org.apache.kafka.common.serialization.ByteBufferSerializer": "bytes",
    "org.apache.kafka.common.serialization.StringSerializer": "str",
    "org.apache.kafka.common.serialization.IntegerSerializer": "int",
    "org.apache.kafka.common.serialization.LongSerializer": "long",
    "org.apache.kafka.common.serialization.DoubleSerializer": "float",
    "org.apache.kafka.common.serialization.VoidSerializer": "none",
}

SERIALIZER_NAMES: tuple[str, ...] = tuple(_BUILTINS)


def _allowed(is_key: bool) -> str:
    return (
        f"{_config_key(is_key)} must be None, one of {', '.join(repr(n) for n in SERIALIZER_NAMES)}, "
        "a dotted path 'pkg.mod:Class' or 'pkg.mod.Class', a Serializer class or instance, "
        "a callable f(data) -> bytes, or a confluent-kafka serializer f(obj, SerializationContext) -> bytes"
    )


def _from_object(obj: Any, is_key: bool, spec: Any) -> Serializer:
    if isinstance(obj, type):
        if not callable(getattr(obj, "serialize", None)):
            raise ConfigError(
                f"{_config_key(is_key)}: class {obj.__name__} has no serialize(); {_allowed(is_key)}"
            )
        try:
            # Built-ins are told which field they serve, so their errors name it.
            obj = obj(is_key=is_key) if issubclass(obj, _Base) else obj()
        except Exception as e:
            raise ConfigError(
                f"{_config_key(is_key)}: cannot instantiate {obj.__name__} with no arguments: {e}"
            )
    if callable(getattr(obj, "serialize", None)):
        if isinstance(getattr(obj, "passthrough", None), bool):
            serializer: Serializer = obj
            return serializer
        return _UserSerializer(obj)
    if callable(obj):
        if _takes_context(obj):
            return ContextSerializer(obj, is_key=is_key)
        return CallableSerializer(obj, is_key=is_key)
    raise ConfigError(
        f"{_config_key(is_key)}: {spec!r} (type {type(spec).__name__}) is not usable; {_allowed(is_key)}"
    )


def resolve_serializer(spec: Any, *, is_key: bool) -> Serializer:
    """Turn a ``key.serializer``/``value.serializer`` setting into a Serializer."""
    if spec is None:
        return AutoSerializer(is_key=is_key)
    if isinstance(spec, str):
        name = spec.strip()
        lowered = name.lower()
        if lowered in _BUILTINS:
            return _BUILTINS[lowered](is_key)
        if name in _JAVA_NAMES:
            return _BUILTINS[_JAVA_NAMES[name]](is_key)
        if "." not in name and ":" not in name:
            raise ConfigError(f"{_config_key(is_key)}: unknown serializer {spec!r}; {_allowed(is_key)}")
        return _from_object(load_object(name, _config_key(is_key), _allowed(is_key)), is_key, spec)
    return _from_object(spec, is_key, spec)


def is_passthrough(serializer: Serializer) -> bool:
    """True when the serializer returns bytes unchanged, so the producer may skip calling it for bytes."""
    return getattr(serializer, "passthrough", False) is True
