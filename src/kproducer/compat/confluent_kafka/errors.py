"""confluent-kafka's error types: ``KafkaError`` (librdkafka's codes), ``KafkaException`` and the serialization errors."""

from __future__ import annotations

import builtins
from typing import Any

from kproducer.compat.librdkafka_errors import CODES, NAMES
from kproducer.errors import KafkaError as _EngineError

__all__ = ["KafkaError", "KafkaException", "KeySerializationError", "SerializationError", "ValueSerializationError"]


class KafkaError:
    """confluent-kafka's ``KafkaError``: ``code()``, ``name()``, ``str()``, ``fatal()``, ``retriable()``,
    ``txn_requires_abort()``; librdkafka's codes as class attributes (``KafkaError._MSG_TIMED_OUT``)."""

    __slots__ = ("_code", "_reason", "_fatal", "_retriable", "_txn_requires_abort", "exception")

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        self._code = int(error)
        self._reason = reason
        self._fatal = fatal
        self._retriable = retriable
        self._txn_requires_abort = txn_requires_abort
        #: The kproducer exception this error stands for (None when built by the application).
        self.exception: BaseException | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> KafkaError:
        """The confluent-kafka view of a kproducer exception (librdkafka's code for the same condition)."""
        if isinstance(exc, _EngineError):
            err = cls(exc.code(), exc.str(), bool(exc.fatal()), bool(exc.retriable()), exc.txn_requires_abort())
        else:
            err = cls(CODES["_FAIL"], f"{type(exc).__name__}: {exc}")
        err.exception = exc
        return err

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> builtins.str:  # noqa: A003 - confluent-kafka's KafkaError.str()
        return self._reason if self._reason is not None else self.name()

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return self.str()

    def __repr__(self) -> builtins.str:
        return f"KafkaError{{code={self.name()},val={self._code},str={self.str()!r}}}"


for _name, _code in CODES.items():
    setattr(KafkaError, _name, _code)


class KafkaException(Exception):
    """confluent-kafka's ``KafkaException``: ``e.args[0]`` is the :class:`KafkaError`."""

    def __init__(self, kafka_error: Any = None, *args: Any, **kwargs: Any) -> None:
        if kafka_error is None and "kafka_error" in kwargs:
            kafka_error = kwargs.pop("kafka_error")
        super().__init__(kafka_error, *args)


class SerializationError(KafkaException):
    """A serializer failed in ``SerializingProducer.produce()`` (confluent-kafka's ``serialization.SerializationError``)."""


class KeySerializationError(SerializationError):
    """The key serializer failed."""


class ValueSerializationError(SerializationError):
    """The value serializer failed."""


def _raise_as_confluent(exc: _EngineError) -> KafkaException:
    raised = KafkaException(KafkaError.from_exception(exc))
    raised.__cause__ = exc
    return raised
