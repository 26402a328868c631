"""One producer per Python worker process per distinct config, closed when idle too long.

Spark reuses Python workers across tasks, so a module-level cache lets every
task in a worker share one producer (its connections, metadata and buffer
pool) instead of paying a producer start-up per task. As in Spark's own Kafka
sink (``spark.kafka.producer.cache.timeout``, default 10 min), a producer that
no task has used for the timeout is closed; one in use is never closed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kproducer.common import monotonic_ms

logger = logging.getLogger(__name__)

__all__ = ["CachedProducer", "ProducerCache", "default_cache"]

ConfigKey = tuple[tuple[str, str], ...]


# Producer keys naming files: on an executor a relative name is also looked up among the files Spark
# shipped with --files / spark.files (SparkFiles), since local mode keeps them outside the task's cwd.
_FILE_KEYS = (
    "ssl.truststore.location",
    "ssl.ca.location",
    "ssl.keystore.location",
    "ssl.certificate.location",
    "ssl.key.location",
)


def _shipped_files(config: Mapping[str, str]) -> dict[str, str]:
    out = dict(config)
    for key in _FILE_KEYS:
        path = out.get(key)
        if not path or os.path.isabs(path) or os.path.exists(path):
            continue
        try:
            from pyspark import SparkFiles

            shipped = SparkFiles.get(path)
        except Exception:  # no Spark context here (a plain Python worker, or tests)
            continue
        if os.path.exists(shipped):
            out[key] = shipped
    return out


def _default_factory(config: Mapping[str, str]) -> Any:
    from kproducer.errors import ConfigError
    from kproducer.producer import Producer

    try:
        return Producer(_shipped_files(config))
    except ConfigError as e:
        if "cannot be read" in e.message:
            raise ConfigError(
                f"{e.message} on executor host {socket.gethostname()}: a certificate or key file must exist "
                "on every executor; ship it with spark-submit --files (or spark.files) and give its file name, "
                "or give the PEM inline (kafka.ssl.truststore.certificates, kafka.ssl.keystore.certificate.chain "
                "and kafka.ssl.keystore.key)"
            ) from e
        raise


@dataclass(slots=True)
class CachedProducer:
    """A cache entry: the producer, how many tasks hold it, and when the last one let go."""

    producer: Any
    key: ConfigKey
    created_ms: int
    serial: int
    in_use: int = 0
    last_release_ms: int = 0
    uses: int = field(default=0)


class ProducerCache:
    """Producers keyed by their config; idle ones closed after ``timeout_ms``.

    ``factory`` and ``clock_ms`` are injectable so the expiry can be tested
    without real producers or sleeping. ``expire()`` runs on each acquire and
    release and, when ``reaper_interval_s`` is set, from a daemon thread, so an
    idle worker still closes its producers.
    """

    def __init__(
        self,
        factory: Callable[[Mapping[str, str]], Any] = _default_factory,
        clock_ms: Callable[[], int] = monotonic_ms,
        reaper_interval_s: float | None = 30.0,
        close_timeout_s: float = 30.0,
    ) -> None:
        self._factory = factory
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._entries: dict[ConfigKey, CachedProducer] = {}
        self._timeouts: dict[ConfigKey, int] = {}
        self._serial = 0
        self._close_timeout_s = close_timeout_s
        self._reaper_interval_s = reaper_interval_s
        self._reaper: threading.Thread | None = None

    @staticmethod
    def key_for(config: Mapping[str, str]) -> ConfigKey:
        return tuple(sorted((str(k), str(v)) for k, v in config.items()))

    @contextmanager
    def producer(self, config: Mapping[str, str], timeout_ms: int) -> Iterator[CachedProducer]:
        """Hold the config's producer for the duration of a task."""
        entry = self.acquire(config, timeout_ms)
        try:
            yield entry
        finally:
            self.release(entry)

    def acquire(self, config: Mapping[str, str], timeout_ms: int) -> CachedProducer:
        """Get (or lazily create) the producer for ``config`` and mark it in use."""
        key = self.key_for(config)
        self.expire()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._serial += 1
                entry = CachedProducer(
                    producer=self._factory(dict(key)),
                    key=key,
                    created_ms=self._clock_ms(),
                    serial=self._serial,
                )
                self._entries[key] = entry
                logger.info("created producer #%d for %s", entry.serial, dict(key).get("bootstrap.servers"))
            self._timeouts[key] = timeout_ms
            entry.in_use += 1
            entry.uses += 1
        self._start_reaper()
        return entry

    def release(self, entry: CachedProducer) -> None:
        with self._lock:
            entry.in_use -= 1
            entry.last_release_ms = self._clock_ms()
        self.expire()

    def expire(self) -> list[CachedProducer]:
        """Close and drop the producers idle for longer than their timeout; returns them."""
        now = self._clock_ms()
        expired: list[CachedProducer] = []
        with self._lock:
            for key, entry in list(self._entries.items()):
                if entry.in_use == 0 and now - entry.last_release_ms >= self._timeouts.get(key, 0):
                    expired.append(entry)
                    del self._entries[key]
                    self._timeouts.pop(key, None)
        for entry in expired:
            logger.info("closing producer #%d: idle beyond the cache timeout", entry.serial)
            self._close(entry)
        return expired

    def close_all(self) -> None:
        """Close every cached producer (the worker is going away)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self._timeouts.clear()
        for entry in entries:
            self._close(entry)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _close(self, entry: CachedProducer) -> None:
        try:
            entry.producer.close(timeout=self._close_timeout_s)
        except Exception:
            logger.exception("closing cached producer #%d failed", entry.serial)

    def _start_reaper(self) -> None:
        if self._reaper_interval_s is None or self._reaper is not None:
            return
        interval = self._reaper_interval_s

        def run() -> None:
            while True:
                with self._lock:
                    shortest = min(self._timeouts.values(), default=int(interval * 1000))
                # Wake often enough that a short timeout is honoured promptly.
                time.sleep(max(0.05, min(interval, shortest / 2000.0)))
                self.expire()

        self._reaper = threading.Thread(target=run, name="kproducer-cache-reaper", daemon=True)
        self._reaper.start()


_default: ProducerCache | None = None
_default_lock = threading.Lock()


def default_cache() -> ProducerCache:
    """The worker process's cache, created on first use (never pickled with a writer)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProducerCache()
        return _default
