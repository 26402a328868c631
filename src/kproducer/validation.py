"""Checks of ``send()``'s arguments whose errors name the argument and what is allowed.

They run off the hot path: the header list only when a record has headers, the
type checks of ``partition`` and ``timestamp`` only when they are given. Such a
mistake raises on the caller's thread, instead of surfacing later as an
unrelated TypeError. A topic name is checked once per topic the producer has not
seen; an illegal one fails the record's future and callback, as the broker's
INVALID_TOPIC_EXCEPTION does for Java's KafkaProducer.send.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kproducer.errors import InvalidTopicError

__all__ = [
    "SECONDS_LIKE_BELOW",
    "SecondsTimestampWarning",
    "check_headers",
    "check_partition",
    "check_timestamp",
    "invalid_topic_error",
]

#: Kafka's topic rule (org.apache.kafka.common.internals.Topic): ASCII letters, digits, '.', '_', '-'.
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_ALLOWED = "ASCII letters, digits, '.', '_' and '-', 1 to 249 characters, not '.' or '..'"


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def invalid_topic_error(topic: str) -> InvalidTopicError | None:
    """Why ``topic`` can never be a Kafka topic name (Kafka's ``Topic.validate``), or None.

    The message names what is wrong and what a topic name may be.
    """
    if not topic:
        reason = "it can't be empty"
    elif topic in (".", ".."):
        reason = "it can't be '.' or '..'"
    elif len(topic) > MAX_TOPIC_LENGTH:
        reason = f"it is {len(topic)} characters long"
    elif _LEGAL_TOPIC.fullmatch(topic) is None:
        bad = sorted({c for c in topic if _LEGAL_TOPIC.fullmatch(c) is None})
        reason = f"it contains {', '.join(map(repr, bad))}"
    else:
        return None
    shown = topic if len(topic) <= 60 else topic[:40] + "..."
    return InvalidTopicError(f"Topic name {shown!r} is illegal: {reason}; a topic name is {_ALLOWED}", topic=topic)


def check_partition(partition: Any) -> None:
    if type(partition) is not int:  # bool is an int subclass: reject it too
        raise TypeError(f"partition must be an int >= 0 or None, got {_shown(partition)}")
    if partition < 0:
        raise ValueError(f"partition must be an int >= 0 or None, got {partition}")


#: Record timestamps are milliseconds since the epoch; a value below this (1973-03-03 in ms, year
#: 5138 in seconds) is almost surely seconds, as ``int(time.time())`` gives.
SECONDS_LIKE_BELOW = 10**11


class SecondsTimestampWarning:
    """One producer's WARNING, logged once, for a record timestamp that looks like seconds.

    Such a record is valid (Kafka takes any non-negative timestamp) and is sent as given: the
    warning says it will be stored as a date in early 1970, and how to pass milliseconds.
    """

    __slots__ = ("_logger", "_client_id", "_warned")

    def __init__(self, logger: logging.Logger, client_id: str) -> None:
        self._logger = logger
        self._client_id = client_id
        self._warned = False

    def note(self, timestamp: int) -> None:
        """Called for a valid timestamp below :data:`SECONDS_LIKE_BELOW`."""
        if self._warned:
            return
        self._warned = True
        import datetime  # only for this once-per-producer line

        self._logger.warning(
            "producer %s: record timestamp %d looks like seconds, not milliseconds since the epoch "
            "(it is below 10^11 ms, 1973-03-03): the broker stores it as %s; pass int(seconds * 1000). "
            "Logged once per producer; the records are sent as given",
            self._client_id,
            timestamp,
            datetime.datetime.fromtimestamp(timestamp / 1000, datetime.UTC).isoformat(timespec="seconds"),
        )


def check_timestamp(
    timestamp: Any, max_timestamp: int, seconds_warning: SecondsTimestampWarning | None = None
) -> None:
    """A TypeError/ValueError for a timestamp that is not an int in 0..max_timestamp; a valid one
    below :data:`SECONDS_LIKE_BELOW` goes to ``seconds_warning`` (callers call this only for
    timestamps outside SECONDS_LIKE_BELOW..max_timestamp, so a millisecond one costs one comparison)."""
    if type(timestamp) is not int:
        hint = ""
        if hasattr(timestamp, "timestamp") and callable(timestamp.timestamp):
            hint = " (for a datetime: int(dt.timestamp() * 1000))"
        elif isinstance(timestamp, float):
            hint = " (milliseconds, not seconds: int(seconds * 1000))"
        raise TypeError(
            f"timestamp must be an int, milliseconds since the epoch, or None for now; got {_shown(timestamp)}{hint}"
        )
    if not 0 <= timestamp <= max_timestamp:
        raise ValueError(f"timestamp must be an int in 0..{max_timestamp} (milliseconds since the epoch), got {timestamp}")
    if timestamp < SECONDS_LIKE_BELOW and seconds_warning is not None:
        seconds_warning.note(timestamp)


_BYTES_LIKE = (bytes, bytearray, memoryview)
_HEADERS_ALLOWED = (
    "a list of (str, bytes | str | None) pairs, or a dict of str to bytes | str | None"
)


def check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """The record's headers as a list of ``(str, bytes | None)``; str values become UTF-8.

    Accepts a list or other iterable of pairs, or a mapping (as confluent-kafka does).
    """
    if type(headers) is list and all(
        type(h) is tuple and len(h) == 2 and type(h[0]) is str and (type(h[1]) is bytes or h[1] is None)
        for h in headers
    ):
        return headers  # the common shape, already right
    if isinstance(headers, Mapping):
        items: Iterable[Any] = headers.items()
    elif isinstance(headers, str | bytes | bytearray | memoryview) or not isinstance(headers, Iterable):
        raise TypeError(f"headers must be {_HEADERS_ALLOWED}; got {_shown(headers)}")
    else:
        items = headers
    out: list[tuple[str, bytes | None]] = []
    for i, item in enumerate(items):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"headers[{i}] must be a (key, value) pair; got {_shown(item)}; headers are {_HEADERS_ALLOWED}")
        key, value = item
        if not isinstance(key, str):
            raise TypeError(f"header key at headers[{i}] must be a str; got {_shown(key)}")
        if value is None or type(value) is bytes:
            out.append((key, value))
        elif isinstance(value, str):
            out.append((key, value.encode()))
        elif isinstance(value, _BYTES_LIKE):
            out.append((key, bytes(value)))
        else:
            raise TypeError(
                f"header {key!r} value must be bytes, bytearray, memoryview, str or None; got {_shown(value)}"
            )
    return out
