"""KIP-526's metadata refresh policy: which topics of the working set the next Metadata request names.

Pure: the caller passes ``now`` and the topics' states; nothing here reads a clock or
holds a lock. :class:`~kproducer.metadata.producer_metadata.Metadata` keeps the working
set and applies the policy's choices.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(slots=True)
class TopicState:
    """Bookkeeping for one topic of the working set (times are the holder's clock, in ms)."""

    last_used_ms: int
    last_refresh_ms: int = -1  # -1: never fetched, so the topic has no metadata yet
    urgent: bool = True  # new, or flagged by a metadata-changing error
    retry_at_ms: int = 0  # per-topic backoff after a per-topic error in a response
    errors: int = 0  # consecutive per-topic errors
    mark_seq: int = 0  # when it was last flagged urgent (Metadata's flag counter)
    added_ms: int = 0


@dataclass(frozen=True, slots=True)
class RefreshSelection:
    """What one metadata request names, and why (KIP-526's T, U and target)."""

    topics: list[str]
    urgent: int
    non_urgent: int
    target: int


class MetadataRefreshPolicy:
    """KIP-526's partial-refresh algorithm over the working set; pure (the caller passes ``now``).

    * urgent T: topics with no metadata yet, topics flagged by a metadata-changing
      error, topics not refreshed for ``metadata.max.age.ms`` (skipping those in
      their per-topic error backoff);
    * non-urgent U: the others not refreshed for half of ``metadata.max.age.ms``,
      oldest first;
    * target = max(cached / (max_age_s) × 10, 20): all of T plus U up to the
      target when T is non-empty, else the target's oldest of U once |U| reaches it.

    Topics idle for ``metadata.max.idle.ms`` are evicted unless they still have
    buffered records (``has_buffered_records``). All topics of the cluster are
    never chosen here: that is only the explicit ``request_update_for_all_topics``.
    """

    MIN_TARGET = 20
    TARGET_WINDOW_S = 10

    def __init__(
        self,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        has_buffered_records: Callable[[str], bool] | None = None,
    ) -> None:
        if metadata_max_age_ms < 0:
            raise ValueError(f"metadata.max.age.ms must be >= 0, got {metadata_max_age_ms}")
        if metadata_max_idle_ms < 0:
            raise ValueError(f"metadata.max.idle.ms must be >= 0, got {metadata_max_idle_ms}")
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self.has_buffered_records: Callable[[str], bool] = has_buffered_records or (lambda _t: False)

    # ------------------------------------------------------------- pieces
    def target_size(self, cached_topics: int) -> int:
        """targetMetadataFetchSize = max(topicsPerSec × 10, 20)."""
        if self.metadata_max_age_ms <= 0:
            return max(cached_topics, self.MIN_TARGET)
        topics_per_sec = cached_topics / (self.metadata_max_age_ms / 1000)
        return max(int(topics_per_sec * self.TARGET_WINDOW_S), self.MIN_TARGET)

    def is_urgent(self, st: TopicState, now: int) -> bool:
        """In T (ignoring the per-topic backoff)."""
        return st.urgent or st.last_refresh_ms < 0 or now - st.last_refresh_ms >= self.metadata_max_age_ms

    def evictable(self, topics: Mapping[str, TopicState], now: int) -> list[str]:
        """Topics idle for longer than metadata.max.idle.ms and holding no buffered records."""
        idle = self.metadata_max_idle_ms
        return [
            t for t, st in topics.items() if now - st.last_used_ms > idle and not self.has_buffered_records(t)
        ]

    def classify(self, topics: Mapping[str, TopicState], now: int) -> tuple[list[str], list[str]]:
        """(T due now, U oldest first)."""
        half = self.metadata_max_age_ms / 2
        urgent: list[str] = []
        non_urgent: list[tuple[int, str]] = []
        for t, st in topics.items():
            if self.is_urgent(st, now):
                if st.retry_at_ms <= now:
                    urgent.append(t)
            elif now - st.last_refresh_ms >= half:
                non_urgent.append((st.last_refresh_ms, t))
        non_urgent.sort()
        return urgent, [t for _, t in non_urgent]

    def piggyback_quota(self, target: int, now: int, last_request_ms: int | None) -> int:
        """The share of the target accrued since the last request: how many of U an urgent request may carry.

        The target is a quota per 10-second window (the topics to refresh in that
        time so that each is refreshed about once per max age). Urgent requests
        can go out every few milliseconds while new topics keep arriving; filling
        each one up to the whole target would refresh every topic as soon as it
        reaches half its max age, twice as often as needed. A request takes only
        the share of the quota that accrued since the previous one, so the refresh
        rate stays at the target's rate however often urgent requests go out.
        """
        if last_request_ms is None or last_request_ms < 0:
            return target
        elapsed = max(0, now - last_request_ms)
        window = self.TARGET_WINDOW_S * 1000
        return target if elapsed >= window else -(-target * elapsed // window)

    def select(
        self, topics: Mapping[str, TopicState], now: int, last_request_ms: int | None = None
    ) -> RefreshSelection:
        """The topics the next request names; empty when nothing is due.

        T is always taken whole. What it may piggyback of U (oldest first, and
        never past the target) is further limited when ``last_request_ms`` (the
        previous request) is known:

        * to the target's share accrued since that request (:meth:`piggyback_quota`);
        * when T holds new or flagged topics (arrivals, which recur at about the
          pace they came so far), to the topics of U that would turn urgent
          before the next such request: those at least ``max age - elapsed`` old.
          A topic refreshed earlier than that would be fetched again too soon.

        Without ``last_request_ms``, T takes U up to the target, as KIP-526 states it.
        """
        urgent, non_urgent = self.classify(topics, now)
        target = self.target_size(len(topics))
        if urgent:
            room = target - len(urgent)
            if last_request_ms is not None and last_request_ms >= 0 and room > 0 and non_urgent:
                room = min(room, self.piggyback_quota(target, now, last_request_ms))
                if any(topics[t].urgent or topics[t].last_refresh_ms < 0 for t in urgent):
                    # U is sorted oldest first: count the prefix old enough to go stale before then.
                    edge = now - self.metadata_max_age_ms + max(0, now - last_request_ms)
                    room = min(room, bisect_right([topics[t].last_refresh_ms for t in non_urgent], edge))
            chosen = urgent + non_urgent[: max(0, room)]
        elif len(non_urgent) >= target:
            chosen = non_urgent[:target]
        else:
            chosen = []
        return RefreshSelection(chosen, len(urgent), len(non_urgent), target)

    def next_due_ms(self, topics: Mapping[str, TopicState], now: int) -> int | None:
        """The earliest time ``select`` would name a topic (≤ now: due now); None if never without a change."""
        if not topics:
            return None
        max_age = self.metadata_max_age_ms
        best: int | None = None
        refresh_times: list[int] = []
        for st in topics.values():
            if st.urgent or st.last_refresh_ms < 0:
                due = st.retry_at_ms
            else:
                due = max(st.retry_at_ms, st.last_refresh_ms + max_age)
                refresh_times.append(st.last_refresh_ms)
            if best is None or due < best:
                best = due
        target = self.target_size(len(topics))
        if len(refresh_times) >= target:
            # |U| reaches the target once the target-th oldest refresh is half max age old.
            refresh_times.sort()
            u_due = refresh_times[target - 1] + (max_age + 1) // 2
            best = u_due if best is None else min(best, u_due)
        return best


#: The name the working-set policy had before KIP-526's algorithm replaced it.
WorkingSetPolicy = MetadataRefreshPolicy
