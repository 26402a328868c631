"""The mutable :class:`Metadata` holder (Java's ``ProducerMetadata``): the current Cluster, its version and the topic working set.

It keeps each topic's refresh state, asks :class:`~kproducer.metadata.refresh_policy.MetadataRefreshPolicy`
which topics the next request names (KIP-526), applies the answer (read by
:func:`~kproducer.metadata.response.read_metadata_response`) as a new Cluster snapshot, backs off
after failures and wakes the callers waiting for a newer version.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.errors import KafkaTimeoutError
from kproducer.metadata.cluster import Cluster
from kproducer.metadata.refresh_policy import MetadataRefreshPolicy, RefreshSelection, TopicState
from kproducer.metadata.response import RETRIABLE_TOPIC_ERRORS, read_metadata_response
from kproducer.structs import Node

# The package's logger, as when metadata was one module.
logger = logging.getLogger("kproducer.metadata")


class _SensorsLike(Protocol):
    metadata_request: Any
    metadata_response_bytes: Any

    def add_gauge(self, name: str, fn: Callable[[], float]) -> None: ...


class Metadata:
    """The current Cluster (replaced atomically), its version and the topic working set.

    The Sender thread's NetworkClient drives refreshes (``time_to_next_update`` →
    ``topics_for_request`` → ``handle_response``/``handle_failure``); caller
    threads add topics, flag them (``mark_urgent``) and wait with ``await_update``.
    Coalescing: only one metadata request is in flight at a time, so topics
    that become urgent meanwhile join the next request. With ``coalesce_ms`` > 0
    a request due because urgent topics arrived also waits while more keep
    arriving (each within ``coalesce_quiet_ms`` of the last), for at most
    ``coalesce_ms`` after the first: the new topics several caller threads
    send to at once then share one request instead of two or three.
    """

    def __init__(
        self,
        *,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        allow_auto_topic_creation: bool = True,
        policy: MetadataRefreshPolicy | None = None,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] | None = None,
        coalesce_ms: int = 0,
        coalesce_quiet_ms: int = 2,
    ) -> None:
        self.policy = policy or MetadataRefreshPolicy(metadata_max_age_ms, metadata_max_idle_ms)
        self._clock: Callable[[], int] = clock_ms or monotonic_ms
        self.metadata_max_age_ms = self.policy.metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._backoff = ExponentialBackoff(retry_backoff_ms, self.retry_backoff_max_ms, rng=rng)
        self._cond = threading.Condition()
        self._cluster = Cluster()
        self._version = 0
        self._topics: dict[str, TopicState] = {}
        self._need_update = True
        self._need_all_topics = False
        self._last_refresh_ms = -1
        self._last_success_ms = -1
        self._last_request_ms = -1
        self.coalesce_ms = max(0, coalesce_ms)
        self.coalesce_quiet_ms = max(1, coalesce_quiet_ms)
        self._burst_first_ms = -1  # first and latest urgent arrival since the last request
        self._burst_last_ms = -1
        self._failures = 0
        self._backoff_ms = 0
        self._mark_seq = 0
        self._request_mark_seq = 0
        self._due_ms: int | None = None
        self._dirty = True
        self._sensors: _SensorsLike | None = None
        self._on_evict: Callable[[str], None] | None = None
        self.requests_sent = 0
        self.last_selection: RefreshSelection | None = None
        self.bootstrap_nodes: tuple[Node, ...] = ()
        self.tried_addresses: dict[str, str] = {}
        self.last_error: Exception | None = None
        # The last TLS or SASL failure (Java's Metadata.fatalException for AuthenticationException):
        # callers waiting for metadata end with it instead of waiting out max.block.ms.
        self.authentication_error: Exception | None = None

    # ------------------------------------------------------------- wiring
    def set_buffered_records_check(self, fn: Callable[[str], bool]) -> None:
        """The producer's accumulator answers "does this topic still hold records?" (never evict those)."""
        self.policy.has_buffered_records = fn

    def bind_metrics(self, sensors: _SensorsLike, on_evict: Callable[[str], None] | None = None) -> None:
        """Record the metadata sensors and register the urgent-topics and age gauges."""
        self._sensors = sensors
        self._on_evict = on_evict
        sensors.add_gauge("metadata-urgent-topics", lambda: float(self.urgent_topic_count()))
        sensors.add_gauge("metadata-age-max", lambda: self.max_age_ms() / 1000.0)

    # ------------------------------------------------------------- readers
    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @property
    def version(self) -> int:
        return self._version

    @property
    def topics(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._topics)

    def topic_state(self, topic: str) -> TopicState | None:
        return self._topics.get(topic)

    def urgent_topic_count(self, now: int | None = None) -> int:
        """|T| now, counting topics in their per-topic backoff (the ``metadata-urgent-topics`` gauge)."""
        now = self._clock() if now is None else now
        with self._cond:
            return sum(1 for st in self._topics.values() if self.policy.is_urgent(st, now))

    def max_age_ms(self, now: int | None = None) -> int:
        """Age of the least recently refreshed topic (never-fetched topics count from when they were added)."""
        now = self._clock() if now is None else now
        with self._cond:
            return max(
                (
                    now - (st.last_refresh_ms if st.last_refresh_ms >= 0 else st.added_ms)
                    for st in self._topics.values()
                ),
                default=0,
            )

    def bootstrap(self, nodes: Iterable[Node]) -> None:
        """Seed with the bootstrap brokers (negative ids) until the first response names the real ones."""
        self.bootstrap_nodes = tuple(nodes)

    # ------------------------------------------------------------- working set
    def add_topic(self, topic: str, now: int) -> bool:
        """Add (or touch) a topic; a new topic is urgent, and skips a failed request's backoff."""
        with self._cond:
            st = self._topics.get(topic)
            if st is None:
                self._topics[topic] = TopicState(now, added_ms=now)
                self._backoff_ms = 0
                self._dirty = True
                self._note_urgent_arrival(now)
                return True
            st.last_used_ms = now
            return False

    def _note_urgent_arrival(self, now: int) -> None:
        """A topic joined T: the burst it belongs to may hold the request briefly (see ``coalesce_ms``)."""
        if self._burst_first_ms < 0:
            self._burst_first_ms = now
        self._burst_last_ms = max(self._burst_last_ms, now)

    def touch(self, topic: str, now: int) -> None:
        """Mark a known topic as used, without taking the lock (send()'s hot path).

        A racing eviction can at worst drop a topic that is then re-added by the
        next send() to it, which is what idle eviction means anyway.
        """
        st = self._topics.get(topic)
        if st is None:
            self.add_topic(topic, now)
        else:
            st.last_used_ms = now

    def mark_urgent(self, topic: str, now: int | None = None) -> int:
        """Flag one topic urgent (a metadata-changing error or a lost leader); returns the version to wait past.

        Only this topic joins the next request (with the non-urgent topics the
        target allows). A topic in its per-topic error backoff keeps the backoff.
        """
        with self._cond:
            st = self._topics.get(topic)
            if st is None:
                t = self._clock() if now is None else now
                st = self._topics[topic] = TopicState(t, added_ms=t)
                self._backoff_ms = 0
                self._mark_seq += 1
                st.mark_seq = self._mark_seq
                self._dirty = True
                self._note_urgent_arrival(t)
            elif not st.urgent:
                st.urgent = True
                self._mark_seq += 1
                st.mark_seq = self._mark_seq
                self._dirty = True
                self._note_urgent_arrival(self._clock() if now is None else now)
            return self._version

    request_update_for_topic = mark_urgent

    def describe_reachability(self) -> str:
        """Which bootstrap addresses were tried and why they failed, for timeout messages."""
        with self._cond:
            tried = ", ".join(f"{a} ({r})" for a, r in self.tried_addresses.items())
            boot = ", ".join(n.address for n in self.bootstrap_nodes)
        return f"bootstrap servers {boot or 'none'}" + (
            f"; addresses tried: {tried}"
            if tried
            else ""
            if self._cluster.nodes
            else "; no broker answered yet"
        )

    def request_update(self) -> int:
        """Ask for a request as soon as the backoff allows (brokers, plus what the policy selects).

        It never widens the request to the whole working set: errors about one
        topic use :meth:`mark_urgent`.
        """
        with self._cond:
            self._need_update = True
            return self._version

    def request_update_for_all_topics(self) -> int:
        """An explicit "all topics" refresh (the CLI listing); normal refreshes name a subset."""
        with self._cond:
            self._need_update = True
            self._need_all_topics = True
            return self._version

    def update_requested(self) -> bool:
        return self._need_update or self._need_all_topics

    def time_to_next_update(self, now: int) -> int:
        """Milliseconds until a metadata request is due (0 = now)."""
        with self._cond:
            backoff_end = self._last_refresh_ms + self._backoff_ms if self._last_refresh_ms >= 0 else 0
            if self._need_update or self._need_all_topics:
                return max(0, backoff_end - now)
            if self._dirty:
                # The due time depends on the topics' states only, never on the clock, so it is
                # recomputed (a pass over every topic) only after one of them changed; a request
                # already due stays due until one is sent and answered, which marks a change.
                self._due_ms = self.policy.next_due_ms(self._topics, now)
                self._dirty = False
            due = self._due_ms
            if not self._topics:
                # Nothing to ask about: keep the broker list fresh every metadata.max.age.ms.
                due = self._last_success_ms + self.metadata_max_age_ms if self._last_success_ms >= 0 else 0
            if due is None:
                return 2**31 - 1
            wait = max(0, due - now, backoff_end - now)
            if wait == 0 and self._burst_last_ms >= 0 and self.coalesce_ms > 0:
                # Coalescing: while urgent topics keep arriving (each within coalesce_quiet_ms of
                # the last), hold the request, for at most coalesce_ms after the first of them.
                hold = min(
                    self.coalesce_quiet_ms - (now - self._burst_last_ms),
                    self.coalesce_ms - (now - self._burst_first_ms),
                )
                if hold > 0:
                    return hold
            return wait

    def topics_for_request(self, now: int) -> list[str] | None:
        """Evict idle topics, then choose the next request's topics; None means all topics (explicit only).

        The NetworkClient calls this only when it sends the request, so this is
        where the request is counted and logged.
        """
        with self._cond:
            self._request_mark_seq = self._mark_seq
            self._burst_first_ms = self._burst_last_ms = -1
            if self._need_all_topics:
                self._record_request(None, now)
                return None
            evicted = self.policy.evictable(self._topics, now)
            for t in evicted:
                logger.debug("evicting idle topic %s from the metadata working set", t)
                del self._topics[t]
            if evicted:
                self._dirty = True
            selection = self.policy.select(self._topics, now, self._last_request_ms)
            self._last_request_ms = now
            self.last_selection = selection
            self._record_request(selection, now)
        if evicted and self._on_evict is not None:
            for t in evicted:
                self._on_evict(t)
        return list(selection.topics)

    def _record_request(self, selection: RefreshSelection | None, now: int) -> None:
        self.requests_sent += 1
        if selection is None:
            logger.debug("metadata request for all topics (explicit)")
        elif logger.isEnabledFor(logging.DEBUG):
            cached = self._cluster
            logger.debug(
                "metadata request: |T|=%d |U|=%d target=%d topics(%d)=%s; %d of them already cached",
                selection.urgent,
                selection.non_urgent,
                selection.target,
                len(selection.topics),
                selection.topics,
                sum(1 for t in selection.topics if cached.partition_count(t) is not None),
            )
        if self._sensors is not None:
            self._sensors.metadata_request.record(float(len(selection.topics) if selection else 0), now)

    # ------------------------------------------------------------- updates
    def handle_response(
        self, response: Any, requested_topics: list[str] | None, now: int, size_bytes: int = 0
    ) -> Cluster:
        """Apply a Metadata response (any version) for ``requested_topics`` (None = all).

        Topics come back refreshed, except those flagged urgent after the request
        went out (the answer may predate the error) and those with a retriable
        per-topic error or a partition without a leader: they stay urgent, with
        a per-topic backoff.
        """
        data = read_metadata_response(response)
        names = data.topics
        errors = data.topic_errors
        leaderless = data.leaderless
        refreshed = names if requested_topics is None else list(set(requested_topics) | set(names))
        if self._sensors is not None and size_bytes > 0:
            self._sensors.metadata_response_bytes.record(float(size_bytes), now)
        with self._cond:
            cluster = self._cluster.merged_with(
                data.nodes,
                data.partitions,
                refreshed_topics=refreshed,
                topic_errors=errors,
                cluster_id=data.cluster_id,
                controller_id=data.controller_id,
                internal_topics=data.internal_topics,
                # A partial answer also drops evicted topics from the snapshot (they are forgotten).
                retained_topics=None if requested_topics is None else set(self._topics) | set(refreshed),
            )
            self._cluster = cluster
            self._version += 1
            self._last_refresh_ms = now
            self._last_success_ms = now
            self._failures = 0
            self._backoff_ms = 0
            self._need_update = False
            if requested_topics is None:
                self._need_all_topics = False
            for name in refreshed:
                st = self._topics.get(name)
                if st is None:
                    continue
                if (
                    errors.get(name) in RETRIABLE_TOPIC_ERRORS
                    or name in leaderless
                    or (name not in names and requested_topics is not None)
                ):
                    st.errors += 1
                    st.urgent = True
                    st.retry_at_ms = now + self._topic_backoff(st.errors)
                    if st.last_refresh_ms < 0 and cluster.partition_count(name) is not None:
                        st.last_refresh_ms = now
                    continue
                st.last_refresh_ms = now
                st.errors = 0
                st.retry_at_ms = 0
                if st.mark_seq <= self._request_mark_seq:
                    st.urgent = False
            self._dirty = True
            self.last_error = None
            self._cond.notify_all()
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "metadata response: %d topics (%d with errors, %d without a leader), %d bytes; %d cached",
                len(names),
                len(errors),
                len(leaderless),
                size_bytes,
                len(cluster.topics),
            )
        return cluster

    def _topic_backoff(self, errors: int) -> int:
        return self._backoff.backoff(errors - 1)

    def handle_failure(self, now: int, error: Exception | None = None) -> None:
        """A metadata request failed: back off exponentially (with ±20% jitter) up to retry.backoff.max.ms.

        The topics it named keep their state: urgent ones stay urgent for the retry.
        """
        with self._cond:
            self._failures += 1
            self._backoff_ms = self._topic_backoff(self._failures)
            self._last_refresh_ms = now
            self._need_update = True
            self._dirty = True
            if error is not None:
                self.last_error = error
            self._cond.notify_all()

    def record_authentication_failure(self, error: Exception | None) -> None:
        """A broker refused the TLS handshake or the SASL credentials (None: one accepted them)."""
        with self._cond:
            if error is None and self.authentication_error is None:
                return
            self.authentication_error = error
            self._cond.notify_all()

    def record_connection_failure(self, address: str, reason: str) -> None:
        """Remember why an address was unreachable, for the timeout message callers see."""
        with self._cond:
            self.tried_addresses[address] = reason

    # ------------------------------------------------------------- waiting
    def await_update(self, last_version: int, timeout_s: float) -> bool:
        """Block until ``version`` moves past ``last_version``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._version <= last_version:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def wait_for_update(self, last_version: int, timeout_s: float) -> None:
        """Like ``await_update`` but raises KafkaTimeoutError naming the addresses tried."""
        if not self.await_update(last_version, timeout_s):
            with self._cond:
                tried = ", ".join(f"{a} ({r})" for a, r in self.tried_addresses.items())
                boot = ", ".join(n.address for n in self.bootstrap_nodes)
            raise KafkaTimeoutError(
                f"metadata not updated within {timeout_s:.1f}s; bootstrap servers {boot or 'none'}"
                + (f"; addresses tried: {tried}" if tried else "; no connection attempt completed")
            )

