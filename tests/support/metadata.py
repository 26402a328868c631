"""Metadata responses without a broker, and states for the KIP-526 policy's property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kproducer.metadata import Metadata, TopicState

#: ``metadata.max.age.ms`` and ``metadata.max.idle.ms`` of the policies these helpers exercise.
MAX_AGE = 10_000
IDLE = 60_000


class MetadataResponse:
    """A Metadata response body as kio decodes it (only the fields Metadata reads): one broker."""

    def __init__(self, topics: list[tuple[str, int, int]], leader: int = 1) -> None:
        """``topics`` holds (name, error code, partition count); every partition led by ``leader``."""
        b = type("B", (), {})()
        b.node_id, b.host, b.port, b.rack = 1, "h", 9092, None
        self.brokers = [b]
        self.cluster_id = "c"
        self.controller_id = 1
        self.topics: list[Any] = []
        for name, err, nparts in topics:
            t = type("T", (), {})()
            t.name, t.error_code, t.is_internal = name, err, False
            parts = []
            for i in range(nparts):
                p = type("P", (), {})()
                p.partition_index, p.leader_id, p.leader_epoch = i, leader, 0
                p.replica_nodes, p.isr_nodes, p.offline_replicas = [1], [1], []
                parts.append(p)
            t.partitions = parts
            self.topics.append(t)


def answer(m: Metadata, now: int, *, errors: dict[str, int] | None = None, size: int = 0) -> list[str]:
    """Send the policy's next request and answer it: every topic exists with one partition."""
    topics = m.topics_for_request(now)
    assert topics is not None
    errors = errors or {}
    m.handle_response(
        MetadataResponse([(t, errors.get(t, 0), 0 if errors.get(t) else 1) for t in topics]), topics, now, size
    )
    return topics


topic_names = st.text(alphabet="abcdefghij", min_size=1, max_size=4)


@st.composite
def working_sets(draw: st.DrawFn) -> tuple[dict[str, TopicState], int]:
    """A producer's topics at a random moment: used, refreshed, urgent and backing off at random."""
    now = draw(st.integers(min_value=200_000, max_value=400_000))
    names = draw(st.lists(topic_names, unique=True, max_size=120))
    topics: dict[str, TopicState] = {}
    for name in names:
        last_used = now - draw(st.integers(min_value=0, max_value=2 * IDLE))
        never = draw(st.booleans().filter(lambda _: True)) and draw(st.integers(0, 9)) == 0
        refreshed = -1 if never else now - draw(st.integers(min_value=0, max_value=2 * MAX_AGE))
        urgent = draw(st.integers(0, 9)) == 0
        retry_at = now + draw(st.integers(0, 500)) if draw(st.integers(0, 9)) == 0 else 0
        topics[name] = TopicState(last_used, refreshed, urgent, retry_at)
    return topics, now
