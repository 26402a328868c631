"""The Sender sends a due metadata request before its ready/drain pass (a blocked send() waits for it)."""

from __future__ import annotations

from typing import Any

from kproducer.accumulator.accumulator import ReadyCheckResult
from kproducer.metadata import Metadata, MetadataRefreshPolicy
from kproducer.sender import Sender


class _Client:
    def __init__(self, md: Metadata, calls: list[str]) -> None:
        self.metadata = md
        self.calls = calls

    def metadata_request_due(self, now: int) -> bool:
        return self.metadata.time_to_next_update(now) == 0

    def poll(self, timeout: int, now: int) -> list[Any]:
        if self.metadata.time_to_next_update(now) == 0:
            self.calls.append(f"metadata request {self.metadata.topics_for_request(now)}")
        self.calls.append(f"poll({timeout})")
        return []

    def ready(self, node_id: int, now: int) -> bool:
        return True


class _Accumulator:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def ready(self, cluster: Any, now: int) -> ReadyCheckResult:
        self.calls.append("ready")
        return ReadyCheckResult(set(), 100, set())

    def expired_batches(self, now: int) -> list[Any]:
        return []

    def seal_full_batches(self, *, wait: bool = True) -> None:
        self.calls.append("seal")


def _sender(md: Metadata, calls: list[str]) -> Sender:
    return Sender(
        client=_Client(md, calls),  # type: ignore[arg-type]
        metadata=md,
        accumulator=_Accumulator(calls),  # type: ignore[arg-type]
        clock_ms=lambda: 1_000,
        acks=1,
        retries=3,
        max_request_size=1 << 20,
        request_timeout_ms=30_000,
        delivery_timeout_ms=120_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1_000,
        guarantee_message_order=False,
    )


def test_due_metadata_request_goes_out_before_the_ready_pass() -> None:
    md = Metadata(policy=MetadataRefreshPolicy(10_000))
    md.topics_for_request(0)  # the startup request is answered
    md.handle_response(type("R", (), {"brokers": [], "topics": []})(), [], 0)
    md.add_topic("new", 1_000)
    calls: list[str] = []
    _sender(md, calls).run_once()
    assert calls[:3] == ["metadata request ['new']", "poll(0)", "ready"]


def test_without_a_due_request_the_loop_is_unchanged() -> None:
    md = Metadata(policy=MetadataRefreshPolicy(10_000))
    md.topics_for_request(0)
    md.handle_response(type("R", (), {"brokers": [], "topics": []})(), [], 0)
    calls: list[str] = []
    _sender(md, calls).run_once()
    assert calls == ["ready", "seal", "poll(100)"]  # seal: full compressed batches, before the poll
