"""kafka-python's ``kafka.serializer``: the ``Serializer`` base and its string and JSON serializers.

The adapter calls ``serialize(topic, headers, data)`` for every key and value,
``None`` included, on the caller's thread, and ``close()`` when the producer closes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

__all__ = ["DefaultSerializer", "Deserializer", "JsonSerializer", "Serializer"]


class Serializer(ABC):
    @abstractmethod
    def serialize(self, topic: str, headers: list[tuple[str, bytes]], data: Any) -> bytes | None:
        """The bytes for ``data`` (None for a null key or value)."""

    def close(self) -> None:  # noqa: B027 - optional hook, as in kafka-python
        """Called when the producer closes."""


class Deserializer(ABC):
    """Kept so that modules defining both keep importing; a producer never deserializes."""

    @abstractmethod
    def deserialize(self, topic: str, headers: list[tuple[str, bytes]], data: bytes) -> Any: ...

    def close(self) -> None:  # noqa: B027 - optional hook, as in kafka-python
        """Nothing to release by default."""


class DefaultSerializer(Serializer, Deserializer):
    """Bytes-like values and None unchanged; anything else ``.encode(encoding)``."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, headers: list[tuple[str, bytes]], data: Any) -> bytes | None:
        if data is None or type(data) in (bytes, bytearray, memoryview):
            return data  # type: ignore[no-any-return]
        return data.encode(self.encoding)  # type: ignore[no-any-return]

    def deserialize(self, topic: str, headers: list[tuple[str, bytes]], data: bytes) -> Any:
        return None if data is None else data.decode(self.encoding)


class JsonSerializer(DefaultSerializer):
    """``json.dumps(data)`` encoded; None stays None."""

    def serialize(self, topic: str, headers: list[tuple[str, bytes]], data: Any) -> bytes | None:
        return None if data is None else super().serialize(topic, headers, json.dumps(data))

    def deserialize(self, topic: str, headers: list[tuple[str, bytes]], data: bytes) -> Any:
        return None if data is None else json.loads(super().deserialize(topic, headers, data))
