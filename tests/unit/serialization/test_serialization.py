"""Built-in serializers (Java wire formats), the auto serializer, and resolve_serializer."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproducer.errors import ConfigError, SerializationError
from kproducer.serialization import (
    SERIALIZER_NAMES,
    AutoSerializer,
    BytesSerializer,
    CallableSerializer,
    DoubleSerializer,
    IntegerSerializer,
    JsonSerializer,
    LongSerializer,
    NoneSerializer,
    Serializer,
    StringSerializer,
    is_passthrough,
    resolve_serializer,
)

T = "topic"


class Upper:
    """A user serializer without ``passthrough`` (resolution wraps it)."""

    closed = False

    def serialize(
        self, topic: str, data: Any, headers: list[tuple[str, bytes | None]] | None
    ) -> bytes | None:
        return None if data is None else str(data).upper().encode()

    def close(self) -> None:
        Upper.closed = True


class NeedsArgs:
    def __init__(self, required: int) -> None:
        self.required = required

    def serialize(self, topic: str, data: Any, headers: Any) -> bytes | None:
        return b""


# ------------------------------------------------------------------ built-ins


def test_bytes_passthrough() -> None:
    s = BytesSerializer()
    b = b"\x00\xff"
    assert s.serialize(T, b, None) is b
    assert s.serialize(T, bytearray(b"ab"), None) == b"ab"
    assert s.serialize(T, memoryview(b"xyz")[1:], None) == b"yz"
    assert s.serialize(T, None, None) is None
    with pytest.raises(SerializationError, match=r"value of type str .*bytes.*value\.serializer"):
        s.serialize(T, "text", None)
    with pytest.raises(SerializationError, match=r"key of type int.*key\.serializer"):
        BytesSerializer(is_key=True).serialize(T, 3, None)


def test_string_encodings() -> None:
    assert StringSerializer().serialize(T, "héllo", None) == "héllo".encode()
    assert StringSerializer("latin-1").serialize(T, "héllo", None) == "héllo".encode("latin-1")
    assert StringSerializer().serialize(T, None, None) is None
    with pytest.raises(SerializationError, match=r"cannot encode value as ascii"):
        StringSerializer("ascii").serialize(T, "é", None)
    with pytest.raises(SerializationError, match=r"key of type bytes.*key\.serializer"):
        StringSerializer(is_key=True).serialize(T, b"x", None)
    with pytest.raises(ConfigError, match=r"value\.serializer: unknown string encoding 'no-such-codec'"):
        StringSerializer("no-such-codec")


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00\x00\x00\x00"),
        (1, b"\x00\x00\x00\x01"),
        (-1, b"\xff\xff\xff\xff"),
        (2**31 - 1, b"\x7f\xff\xff\xff"),
        (-(2**31), b"\x80\x00\x00\x00"),
        (0x01020304, b"\x01\x02\x03\x04"),
    ],
)
def test_integer_is_java_int(value: int, wire: bytes) -> None:
    assert IntegerSerializer().serialize(T, value, None) == wire


def test_integer_errors() -> None:
    with pytest.raises(SerializationError, match=r"32-bit signed range.*'long'"):
        IntegerSerializer().serialize(T, 2**31, None)
    with pytest.raises(SerializationError, match=r"value of type bool"):
        IntegerSerializer().serialize(T, True, None)
    with pytest.raises(SerializationError, match=r"key of type float.*int"):
        IntegerSerializer(is_key=True).serialize(T, 1.5, None)
    assert IntegerSerializer().serialize(T, None, None) is None


def test_long_is_java_long() -> None:
    s = LongSerializer()
    assert s.serialize(T, 1, None) == b"\x00" * 7 + b"\x01"
    assert s.serialize(T, -2, None) == b"\xff" * 7 + b"\xfe"
    assert s.serialize(T, 2**63 - 1, None) == b"\x7f" + b"\xff" * 7
    assert s.serialize(T, None, None) is None
    with pytest.raises(SerializationError, match=r"64-bit signed range"):
        s.serialize(T, 2**63, None)
    with pytest.raises(SerializationError, match=r"value of type str"):
        s.serialize(T, "1", None)


def test_double_is_java_double() -> None:
    s = DoubleSerializer()
    assert s.serialize(T, 1.0, None) == bytes.fromhex("3ff0000000000000")
    assert s.serialize(T, -2.5, None) == bytes.fromhex("c004000000000000")
    assert s.serialize(T, 3, None) == bytes.fromhex("4008000000000000")
    assert s.serialize(T, math.inf, None) == bytes.fromhex("7ff0000000000000")
    assert s.serialize(T, None, None) is None
    with pytest.raises(SerializationError, match=r"does not fit a 64-bit IEEE double"):
        s.serialize(T, 10**400, None)
    with pytest.raises(SerializationError, match=r"value of type str"):
        s.serialize(T, "1.0", None)


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.floats(allow_nan=False))
def test_numeric_round_trip(i: int, f: float) -> None:
    assert struct.unpack(">i", IntegerSerializer().serialize(T, i, None) or b"")[0] == i
    assert struct.unpack(">q", LongSerializer().serialize(T, i, None) or b"")[0] == i
    assert struct.unpack(">d", DoubleSerializer().serialize(T, f, None) or b"")[0] == f


def test_json_compact_utf8() -> None:
    s = JsonSerializer()
    assert s.serialize(T, {"a": [1, 2], "b": "é"}, None) == '{"a":[1,2],"b":"é"}'.encode()
    assert s.serialize(T, None, None) is None
    assert json.loads(s.serialize(T, [1.5, True, "x"], None) or b"") == [1.5, True, "x"]
    with pytest.raises(SerializationError, match=r"key of type set as JSON.*key\.serializer"):
        JsonSerializer(is_key=True).serialize(T, {1, 2}, None)
    with pytest.raises(SerializationError, match=r"as JSON"):
        s.serialize(T, {"x": object()}, None)


def test_none_serializer() -> None:
    assert NoneSerializer().serialize(T, b"anything", None) is None
    assert NoneSerializer().serialize(T, {"x": 1}, None) is None


def test_auto_serializer() -> None:
    s = AutoSerializer()
    b = b"raw"
    assert s.serialize(T, b, None) is b
    assert s.serialize(T, "é", None) == "é".encode()
    assert s.serialize(T, bytearray(b"ba"), None) == b"ba"
    assert s.serialize(T, memoryview(b"mv"), None) == b"mv"
    assert s.serialize(T, None, None) is None
    with pytest.raises(SerializationError) as err:
        AutoSerializer(is_key=True).serialize(T, {"a": 1}, None)
    msg = str(err.value)
    assert "key of type dict" in msg and "key.serializer" in msg
    with pytest.raises(SerializationError, match=r"value of type int.*value\.serializer"):
        s.serialize(T, 42, None)


def test_callable_serializer_checks_results() -> None:
    s = CallableSerializer(lambda d: d.encode("utf-16-be"))
    assert s.serialize(T, "a", None) == b"\x00a"
    assert CallableSerializer(lambda d: bytearray(b"x")).serialize(T, 1, None) == b"x"
    with pytest.raises(SerializationError, match=r"value\.serializer callable .* returned str"):
        CallableSerializer(lambda d: "not bytes").serialize(T, 1, None)
    with pytest.raises(
        SerializationError, match=r"key\.serializer callable .* failed on key of type int: ZeroDivisionError"
    ):
        CallableSerializer(lambda d: d / 0, is_key=True).serialize(T, 1, None)


# ------------------------------------------------------------------ resolution


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        (None, AutoSerializer),
        ("auto", AutoSerializer),
        ("bytes", BytesSerializer),
        ("str", StringSerializer),
        ("string", StringSerializer),
        ("STRING", StringSerializer),
        ("int", IntegerSerializer),
        ("integer", IntegerSerializer),
        ("long", LongSerializer),
        ("float", DoubleSerializer),
        ("double", DoubleSerializer),
        ("json", JsonSerializer),
        ("none", NoneSerializer),
        ("org.apache.kafka.common.serialization.StringSerializer", StringSerializer),
        ("org.apache.kafka.common.serialization.ByteArraySerializer", BytesSerializer),
        ("org.apache.kafka.common.serialization.LongSerializer", LongSerializer),
        ("kproducer.serialization:JsonSerializer", JsonSerializer),
        ("kproducer.serialization.LongSerializer", LongSerializer),
        (JsonSerializer, JsonSerializer),
    ],
)
def test_resolve_names(spec: Any, cls: type) -> None:
    for is_key in (True, False):
        s = resolve_serializer(spec, is_key=is_key)
        assert type(s) is cls
        assert isinstance(s, Serializer)
        assert getattr(s, "is_key") is is_key  # noqa: B009 - errors name the right field


def test_resolve_instances_and_callables() -> None:
    inst = StringSerializer("latin-1")
    assert resolve_serializer(inst, is_key=False) is inst
    user = resolve_serializer(Upper(), is_key=False)
    assert user.serialize(T, "ab", None) == b"AB"
    assert getattr(user, "passthrough") is False  # noqa: B009
    user.close()  # type: ignore[attr-defined]
    assert Upper.closed
    from_path = resolve_serializer("tests.unit.serialization.test_serialization:Upper", is_key=True)
    assert from_path.serialize(T, "x", None) == b"X"
    fn = resolve_serializer(lambda d: str(d).encode(), is_key=True)
    assert isinstance(fn, CallableSerializer) and fn.serialize(T, 7, None) == b"7"


def test_passthrough_flags() -> None:
    assert is_passthrough(resolve_serializer(None, is_key=True))
    assert is_passthrough(resolve_serializer("bytes", is_key=True))
    for name in ("str", "int", "long", "float", "json", "none"):
        assert not is_passthrough(resolve_serializer(name, is_key=False)), name
        assert resolve_serializer(name, is_key=False).passthrough is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("yaml", r"key\.serializer: unknown serializer 'yaml'; .*'bytes'.*'json'"),
        ("no_such_module_xyz.Thing", r"key\.serializer: cannot import module 'no_such_module_xyz'"),
        (
            "kproducer.serialization:Nope",
            r"key\.serializer: module 'kproducer.serialization' has no attribute 'Nope'",
        ),
        (
            "tests.unit.serialization.test_serialization:NeedsArgs",
            r"key\.serializer: cannot instantiate NeedsArgs with no arguments",
        ),
        (42, r"key\.serializer: 42 \(type int\) is not usable; .*'long'"),
        (dict, r"key\.serializer: class dict has no serialize\(\)"),
        (":x", r"key\.serializer: ':x' is not a known name nor a dotted path"),
    ],
)
def test_resolve_errors_name_the_key(spec: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        resolve_serializer(spec, is_key=True)


def test_resolve_error_names_value_key() -> None:
    with pytest.raises(ConfigError, match=r"^value\.serializer: unknown serializer") as err:
        resolve_serializer("bogus", is_key=False)
    for name in SERIALIZER_NAMES:
        assert repr(name) in str(err.value)
