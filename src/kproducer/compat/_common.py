"""What the aiokafka and kafka-python adapters share: their keyword names turned into kproducer's config."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kproducer.errors import ConfigError
from kproducer.structs import PartitionInfo

__all__ = ["PeerPartitioner", "bootstrap_with_port", "refuse"]

# Both clients (after the Java client) take a bootstrap entry without a port to mean port 9092.
_DEFAULT_PORT = 9092


def bootstrap_with_port(servers: str | Iterable[str]) -> list[str]:
    """``bootstrap_servers`` as aiokafka and kafka-python read it: a str (comma-separated) or a list;
    an entry without a port gets 9092."""
    entries = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        if entry.startswith("["):
            has_port = "]:" in entry
        else:
            has_port = entry.count(":") == 1
        out.append(entry if has_port else f"{entry}:{_DEFAULT_PORT}")
    return out


def refuse(error_class: type[ConfigError], client: str, keyword: str, reason: str) -> ConfigError:
    """The error for a keyword of ``client`` that has no meaning on kproducer, naming it and why.

    ``error_class`` is the adapter's configuration error (a ConfigError, so a ValueError).
    """
    return error_class(f"{client} keyword {keyword!r} is not supported by kproducer's adapter: {reason}")


class PeerPartitioner:
    """A partitioner written for aiokafka or kafka-python, as kproducer's ``partitioner.class``.

    aiokafka calls ``partitioner(key_bytes, all_partitions, available_partitions)``;
    kafka-python calls ``partitioner.partition(topic, key, key_bytes, value, value_bytes, cluster)``
    with its own cluster object, or (before 3.0) ``partitioner(key_bytes, all, available)``
    too. Both get the partition ids as ints, all of them sorted, and those with a leader.
    """

    def __init__(self, func: Any) -> None:
        self.func = func

    def partition(
        self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Any
    ) -> int:
        infos: list[PartitionInfo] = list(cluster.partitions_for_topic(topic))
        all_partitions = sorted(p.partition for p in infos)
        available = [p.partition for p in cluster.available_partitions_for_topic(topic)]
        result = self.func(key_bytes, all_partitions, available)
        if type(result) is not int or result not in all_partitions:
            raise ValueError(f"partitioner {self.func!r} returned {result!r}; it must be one of {all_partitions}")
        return result

    def close(self) -> None:
        """Nothing to release: the function is the application's."""
