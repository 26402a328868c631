"""Delivery callbacks: one convention per keyword, so that neither Java nor confluent-kafka users are trapped.

- ``callback=`` takes the Java client's ``Callback.onCompletion(metadata, exception)``:
  ``(RecordMetadata, None)`` on success, ``(None, exception)`` on failure.
- ``on_delivery=`` takes confluent-kafka's ``on_delivery(err, msg)``: ``err`` is
  None on success (else the record's :class:`~kproducer.errors.KafkaError`, which
  also answers confluent-kafka's ``code()``, ``name()``, ``str()``, ``retriable()``,
  ``fatal()`` and ``txn_requires_abort()``), and
  ``msg`` is a :class:`DeliveryReport` with confluent-kafka's ``Message``
  accessors: ``topic()``, ``partition()``, ``offset()``, ``key()``, ``value()``,
  ``headers()``, ``timestamp()``, ``error()`` and ``len()``. A callback copied
  from confluent-kafka's documentation therefore works unchanged.

Both conventions take two positional arguments, so only the keyword tells them
apart; a callable that cannot take two positional arguments (a one-argument
``future.add_done_callback``-style function, say) is rejected by ``send()`` with
a message naming the shape expected. The check inspects a function's signature
once per code object, not once per record.

Callbacks run on the producer's I/O thread, in send order per partition, and
must be quick (hand slow work to your own executor).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from kproducer.errors import KafkaError
from kproducer.structs import RecordMetadata

__all__ = [
    "Callback",
    "DeliveryReport",
    "OnDelivery",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "check_callback",
    "resolve_callback",
]

# The exception a callback receives is always a KafkaError: a parameter annotated with it, or with
# ``Exception | None`` or ``BaseException | None``, type-checks against these aliases.
Callback: TypeAlias = Callable[[RecordMetadata | None, KafkaError | None], object]
"""Java's ``Callback.onCompletion(metadata, exception)``, for ``callback=``."""

# confluent-kafka's timestamp types (librdkafka's RD_KAFKA_TIMESTAMP_*).
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

_SHAPES = {
    "callback": (
        "callback= takes the Java client's Callback: callback(metadata, exception), called with "
        "(RecordMetadata, None) on success and (None, exception) on failure"
    ),
    "on_delivery": (
        "on_delivery= takes confluent-kafka's delivery callback: on_delivery(err, msg), called with "
        "(None, msg) on success and (err, msg) on failure; msg has topic(), partition(), offset(), key(), value()"
    ),
}
_OTHER = {
    "callback": "for confluent-kafka's (err, msg) order pass it as on_delivery=",
    "on_delivery": "for the Java order (metadata, exception) pass it as callback=",
}

# Signature checks already done, by code object (or by class for callable instances).
_checked: dict[Any, bool] = {}
_CHECKED_MAX = 4096


def _cache_key(fn: Any) -> Any:
    code = getattr(fn, "__code__", None)
    if code is not None:
        return (code, len(getattr(fn, "__defaults__", None) or ()), False)
    func = getattr(fn, "__func__", None)  # a bound method: one argument fewer to pass
    code = getattr(func, "__code__", None)
    if code is not None:
        return (code, len(getattr(func, "__defaults__", None) or ()), True)
    call = type(fn).__dict__.get("__call__")  # noqa: B004 - the class's own __call__, to read its code
    if inspect.isfunction(call):  # an instance of a class with a Python __call__
        return type(fn)
    return None  # functools.partial and the like: checked each time (rare)


def check_callback(fn: Any, keyword: str) -> bool:
    """Raise TypeError unless ``fn`` can be called with two positional arguments (see the module doc).

    Returns True when the answer holds for every instance of ``type(fn)`` (a class
    whose own ``__call__`` was checked), so a caller may remember the class.
    """
    key = _cache_key(fn)
    by_type = key is type(fn)
    if key is not None and key in _checked:
        return by_type
    if not callable(fn):
        raise TypeError(f"{_SHAPES[keyword]}; got {type(fn).__name__} {fn!r}, which is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: it will tell for itself
        return False
    try:
        sig.bind(None, None)
    except TypeError:
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        raise TypeError(
            f"{_SHAPES[keyword]}; {name}{sig} cannot take 2 positional arguments ({_OTHER[keyword]})"
        ) from None
    if key is not None:
        if len(_checked) >= _CHECKED_MAX:
            _checked.clear()
        _checked[key] = True
    return by_type


class DeliveryReport:
    """The ``msg`` of an ``on_delivery(err, msg)`` callback, with confluent-kafka's ``Message`` accessors.

    The object itself is what the batch calls back (Java-shaped), so a record with
    an ``on_delivery`` callback costs this one object. As in confluent-kafka,
    ``key()`` and ``value()`` are the serialized bytes the record carries (a
    ``str`` key comes back UTF-8 encoded, so ``msg.key().decode()`` works) and
    ``headers()`` the list of ``(key, bytes)`` pairs sent, whether headers were
    given as a list or a dict; a record whose serializer failed keeps what was
    passed to ``send()``. ``partition()`` and ``offset()`` are None
    when unknown (a record that failed before reaching a partition, or acks=0),
    as in confluent-kafka.
    """

    __slots__ = ("_fn", "_topic", "_key", "_value", "_headers", "_partition", "_offset", "_timestamp", "_error")

    def __init__(
        self, fn: Callable[[Any, DeliveryReport], object], topic: str, key: Any, value: Any, headers: Any = None
    ) -> None:
        self._fn = fn
        self._topic = topic
        self._key = key
        self._value = value
        self._headers = headers
        self._partition: int | None = None
        self._offset: int | None = None
        self._timestamp = -1
        self._error: KafkaError | None = None

    def __call__(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        if metadata is not None:
            self._topic = metadata.topic
            self._partition = metadata.partition
            self._offset = metadata.offset if metadata.offset >= 0 else None
            self._timestamp = metadata.timestamp
        else:
            self._error = exception  # type: ignore[assignment]
            topic = getattr(exception, "topic", None)
            if topic and not self._topic:
                self._topic = topic
            partition = getattr(exception, "partition", None)
            if partition is not None and partition >= 0:
                self._partition = partition
        self._fn(self._error, self)

    def record_serialized(self, key: bytes | None, value: bytes | None, headers: Any) -> None:
        """The record as sent: its serialized key and value and its checked headers, what the accessors return."""
        self._key = key
        self._value = value
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        headers = self._headers
        if headers is None:
            return None
        if isinstance(headers, Mapping):  # a report for a record that failed before its headers were checked
            return list(headers.items())
        return list(headers)

    def error(self) -> KafkaError | None:
        return self._error

    def timestamp(self) -> tuple[int, int]:
        """(type, ms): the record's timestamp as the producer reports it (create time, or log-append time)."""
        if self._timestamp < 0:
            return (TIMESTAMP_NOT_AVAILABLE, 0)
        return (TIMESTAMP_CREATE_TIME, self._timestamp)

    def __len__(self) -> int:
        v = self._value
        return 0 if v is None else len(v)

    def __repr__(self) -> str:
        where = f"{self._topic}-{self._partition}@{self._offset}"
        return f"DeliveryReport({where}{', error=' + repr(self._error) if self._error else ''})"


OnDelivery: TypeAlias = Callable[[KafkaError | None, DeliveryReport], object]
"""confluent-kafka's ``on_delivery(err, msg)``, for ``on_delivery=``."""


class BulkDeliveryReports:
    """``on_delivery`` for a bulk call: gives each row its own :class:`DeliveryReport` when it completes.

    The batch asks ``for_row(row)`` with the caller's row number, so a report
    carries that row's key and value as the bytes sent (a ``bytearray``,
    ``memoryview`` or Arrow ``string`` cell comes back as ``bytes``) and the
    call's headers; only a call with ``on_delivery`` pays this.
    """

    __slots__ = ("_fn", "_topic", "_keys", "_values", "_offset", "_headers")

    def __init__(
        self, fn: Callable[[Any, DeliveryReport], object], topic: str, keys: Any, values: Any, offset: int = 0,
        headers: Any = None,
    ) -> None:
        self._fn = fn
        self._topic = topic
        self._keys = keys
        self._values = values
        self._offset = offset
        self._headers = headers

    def for_row(self, row: int) -> DeliveryReport:
        row += self._offset
        return DeliveryReport(
            self._fn, self._topic, _item(self._keys, row), _item(self._values, row), self._headers
        )

    def at_offset(self, offset: int) -> BulkDeliveryReports:
        """The same reports for a chunk whose row 0 is the call's row ``offset``."""
        return BulkDeliveryReports(self._fn, self._topic, self._keys, self._values, offset, self._headers)

    def for_columns(self, topic: str, keys: Any, values: Any) -> BulkDeliveryReports:
        """Reports for another set of rows (one topic's rows of a table routed by a topic column)."""
        return BulkDeliveryReports(self._fn, topic, keys, values, 0, self._headers)

    def __call__(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        # A whole call that failed before its rows were placed: no row number to look up.
        DeliveryReport(self._fn, self._topic, None, None)(metadata, exception)


def _item(column: Any, row: int) -> Any:
    """A row's key or value as the bytes the record carries (what confluent-kafka's ``msg.key()`` gives)."""
    if column is None:
        return None
    item = column[row]
    as_py = getattr(item, "as_py", None)  # a pyarrow scalar
    if as_py is not None:
        item = as_py()
    if isinstance(item, str):  # an Arrow string column: its cells are sent as their UTF-8 bytes
        return item.encode("utf-8")
    if isinstance(item, bytearray | memoryview):
        return bytes(item)
    return item


def _resolve(callback: Callback | None, on_delivery: Any, report: Callable[[], Callback]) -> Callback | None:
    if on_delivery is not None:
        if callback is not None:
            raise TypeError("pass either callback= (Java's order) or on_delivery= (confluent-kafka's), not both")
        check_callback(on_delivery, "on_delivery")
        return report()
    if callback is not None:
        check_callback(callback, "callback")
    return callback


def resolve_callback(
    callback: Callback | None, on_delivery: OnDelivery | None, topic: str, key: Any, value: Any, headers: Any
) -> Callback | None:
    """The (metadata, exception) callable a batch fires for one record, from either keyword (checked)."""
    return _resolve(callback, on_delivery, lambda: DeliveryReport(on_delivery, topic, key, value, headers))  # type: ignore[arg-type]


def resolve_bulk_callback(
    callback: Callback | None,
    on_delivery: OnDelivery | None,
    topic: str,
    keys: Any,
    values: Sequence[Any] | Any,
    headers: Any = None,
) -> Callback | None:
    """As :func:`resolve_callback`, for a bulk call: ``on_delivery`` gets one report per row (``headers``:
    the call's checked headers, on every row)."""
    return _resolve(
        callback, on_delivery, lambda: BulkDeliveryReports(on_delivery, topic, keys, values, 0, headers)  # type: ignore[arg-type]
    )
