"""NetworkClient rules checked without a broker: stub servers on 127.0.0.1, a fake resolver, a manual clock."""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kproducer.errors import IllegalStateError
from kproducer.metadata import Metadata
from kproducer.network.client import ClientRequest, ClientResponse, NetworkClient, build_metadata_request
from kproducer.network.connection import ConnectionState
from kproducer.network.protocol import ApiKey, build_produce_request
from kproducer.structs import TopicPartition
from tests.test_network_connection import api_versions_response, frame_response, parse_request

# What the stub brokers advertise: Produce, Metadata, ApiVersions.
_STUB_APIS = {0: (0, 11), 3: (0, 12), 18: (0, 3)}


class _QuietMetadata(Metadata):
    """Never due for a refresh, so that poll() sends nothing of its own and in-flight counts are ours."""

    def time_to_next_update(self, now: int) -> int:
        return 1 << 30


class StubBroker:
    """Accepts connections, answers ApiVersions, then answers nothing: reads (and counts) what
    arrives only while ``reading`` is set."""

    def __init__(self, *, reading: bool = True, receive_buffer_bytes: int | None = None) -> None:
        self.sock = socket.socket()
        if receive_buffer_bytes is not None:  # inherited by accepted sockets
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.reading = threading.Event()
        if reading:
            self.reading.set()
        self.bytes_read = 0
        self.closed_by_client = threading.Event()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.1)
            try:
                head = self._recv_exactly(conn, 4)
                (size,) = struct.unpack(">i", head)
                request = head + self._recv_exactly(conn, size)
                api_key, version, cid, _ = parse_request(request)
                assert api_key == ApiKey.API_VERSIONS
                body = api_versions_response(version, _STUB_APIS)
                conn.sendall(frame_response(ApiKey.API_VERSIONS, version, cid, body))
                while not self._stop.is_set():
                    if not self.reading.wait(0.05):
                        continue
                    try:
                        data = conn.recv(1 << 16)
                    except TimeoutError:
                        continue
                    if not data:
                        self.closed_by_client.set()
                        return
                    self.bytes_read += len(data)
            except (OSError, EOFError):
                self.closed_by_client.set()

    def _recv_exactly(self, conn: socket.socket, n: int) -> bytes:
        buf = b""
        deadline = time.monotonic() + 5
        while len(buf) < n and time.monotonic() < deadline and not self._stop.is_set():
            try:
                chunk = conn.recv(n - len(buf))
            except TimeoutError:
                continue
            if not chunk:
                raise EOFError("client closed")
            buf += chunk
        if len(buf) < n:
            raise EOFError("short read")
        return buf

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        self.sock.close()


@pytest.fixture
def stub_brokers() -> Iterator[Callable[..., StubBroker]]:
    made: list[StubBroker] = []

    def make(**kw: Any) -> StubBroker:
        b = StubBroker(**kw)
        made.append(b)
        return b

    try:
        yield make
    finally:
        for b in made:
            b.close()


def _client(bootstrap: str, **kw: Any) -> NetworkClient:
    kw.setdefault("metadata", _QuietMetadata())
    return NetworkClient(bootstrap_servers=bootstrap, **kw)


def _metadata_request(node_id: int, got: list[ClientResponse] | None = None) -> ClientRequest:
    return ClientRequest(
        node_id,
        ApiKey.METADATA,
        lambda v: build_metadata_request(v, [], True),
        callback=None if got is None else got.append,
    )


def _poll_until(c: NetworkClient, cond: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        c.poll(10, c._clock())
    return True


def _send_written(c: NetworkClient, node_id: int) -> None:
    """Send a Metadata request (the stubs never answer it) and poll until it is on the wire."""
    c.send(_metadata_request(node_id), c._clock())
    assert _poll_until(c, lambda: c._selector.pending_bytes(node_id) == 0)


def _acks0_request(payload: dict[TopicPartition, memoryview], done: list[ClientResponse]) -> ClientRequest:
    return ClientRequest(
        -1,
        ApiKey.PRODUCE,
        lambda v: build_produce_request(v, 0, 30_000, None, payload),
        expect_response=False,
        callback=done.append,
    )


# ------------------------------------------------------------------ acks=0 back-pressure
def test_acks0_requests_stay_in_flight_until_written(stub_brokers: Callable[..., StubBroker]) -> None:
    """A broker that stops reading: acks=0 requests pile up in the in-flight window, not in memory."""
    broker = stub_brokers(reading=False, receive_buffer_bytes=4096)
    max_in_flight = 3
    c = _client(
        broker.address,
        max_in_flight_requests_per_connection=max_in_flight,
        send_buffer_bytes=4096,
    )
    request_size = 256 * 1024  # far more than both socket buffers hold
    tp = TopicPartition("t", 0)
    payload = {tp: memoryview(bytearray(request_size))}
    done: list[ClientResponse] = []
    sent: list[ClientRequest] = []
    try:
        assert c.await_ready(-1, 5000)
        max_pending = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if c.can_send_more(-1):
                req = _acks0_request(payload, done)
                c.send(req, c._clock())
                sent.append(req)
            c.poll(5, c._clock())
            max_pending = max(max_pending, c._selector.pending_bytes(-1))
            assert c.in_flight_request_count(-1) <= max_in_flight
        assert not c.can_send_more(-1), "the window never filled although the broker reads nothing"
        assert len(sent) <= max_in_flight
        assert c.in_flight_request_count(-1) == len(sent) - len(done) > 0
        assert max_pending <= max_in_flight * (request_size + 1024)
        # In fact at most one request waits in the selector: the next one goes only when it is written.
        assert max_pending <= request_size + 1024
        assert all(r.response is None and r.error is None for r in done)

        broker.reading.set()
        total = len(sent) + 8
        deadline = time.monotonic() + 10
        while len(done) < total and time.monotonic() < deadline:
            if len(sent) < total and c.can_send_more(-1):
                req = _acks0_request(payload, done)
                c.send(req, c._clock())
                sent.append(req)
            c.poll(5, c._clock())
            assert c.in_flight_request_count(-1) <= max_in_flight
        assert len(done) == len(sent) == total, f"{len(done)} of {len(sent)} completed"
        assert [r.request for r in done] == sent  # completed in send order
        assert [r.request.correlation_id for r in done] == sorted(r.correlation_id for r in sent)
        assert all(r.response is None and r.error is None and not r.disconnected for r in done)
        assert c.in_flight_request_count(-1) == 0 and c.can_send_more(-1)
        assert _poll_until(c, lambda: broker.bytes_read >= total * request_size)
    finally:
        c.close()


def test_unwritten_acks0_request_fails_when_the_connection_drops(
    stub_brokers: Callable[..., StubBroker],
) -> None:
    broker = stub_brokers(reading=False, receive_buffer_bytes=4096)
    c = _client(broker.address, send_buffer_bytes=4096, reconnect_backoff_ms=10_000)
    payload = {TopicPartition("t", 0): memoryview(bytearray(512 * 1024))}
    done: list[ClientResponse] = []
    try:
        assert c.await_ready(-1, 5000)
        c.send(
            _acks0_request(payload, done),
            c._clock(),
        )
        for _ in range(5):
            c.poll(5, c._clock())
        assert not done and c.in_flight_request_count(-1) == 1
        c.disconnect(-1)
        c.poll(0, c._clock())
        assert len(done) == 1 and done[0].disconnected and done[0].error is not None
        assert c.in_flight_request_count(-1) == 0 and not c._unwritten
    finally:
        c.close()


# ------------------------------------------------------------------ in-flight window
def test_can_send_more_with_two_in_flight_and_metadata_has_no_exemption(
    stub_brokers: Callable[..., StubBroker],
) -> None:
    broker = stub_brokers()
    c = _client(broker.address, max_in_flight_requests_per_connection=2)
    try:
        assert c.await_ready(-1, 5000)
        assert c.can_send_more(-1)
        c.send(_metadata_request(-1), c._clock())
        # Queued but not yet written: a second request waits until the first is on the wire.
        assert not c.can_send_more(-1)
        assert _poll_until(c, lambda: c._selector.pending_bytes(-1) == 0)
        assert c.can_send_more(-1) and c.in_flight_request_count(-1) == 1
        _send_written(c, -1)
        assert c.in_flight_request_count(-1) == 2 and not c.can_send_more(-1)
        assert not c.ready(-1, c._clock())
        with pytest.raises(IllegalStateError, match="2 requests in flight"):
            c.send(_metadata_request(-1), c._clock())
    finally:
        c.close()


def test_least_loaded_node_prefers_fewest_in_flight_and_skips_backoff(
    stub_brokers: Callable[..., StubBroker],
) -> None:
    a, b = stub_brokers(), stub_brokers()
    with socket.socket() as s:  # nobody listens here
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    c = _client(f"{a.address},{b.address},127.0.0.1:{dead}", reconnect_backoff_ms=60_000)
    try:
        assert c.await_ready(-1, 5000) and c.await_ready(-2, 5000)
        assert not c.await_ready(-3, 300)  # refused: now in its reconnect backoff
        assert c.is_connection_failed(-3) and not c.can_connect(-3, c._clock())
        for _ in range(2):
            _send_written(c, -1)
        _send_written(c, -2)
        # -3 has nothing in flight but is backing off; -2 has fewer in flight than -1.
        picks = {c.least_loaded_node(c._clock()) for _ in range(6)}  # every round-robin start
        assert picks == {-2}
        _send_written(c, -2)
        _send_written(c, -1)
        # -1 has 3, -2 has 2 in flight.
        assert {c.least_loaded_node(c._clock()) for _ in range(6)} == {-2}
    finally:
        c.close()


# ------------------------------------------------------------------ connection lifetime
def test_idle_connection_is_closed_after_connections_max_idle_ms(
    stub_brokers: Callable[..., StubBroker],
) -> None:
    broker = stub_brokers()
    c = _client(broker.address, connections_max_idle_ms=200)
    try:
        assert c.await_ready(-1, 5000)
        ready_at = time.monotonic()
        assert _poll_until(c, lambda: not c.is_ready(-1), timeout_s=3)
        idle = time.monotonic() - ready_at
        assert 0.15 <= idle < 2.0, f"closed after {idle:.3f} s"
        assert c._nodes[-1].state is ConnectionState.DISCONNECTED and not c.is_connection_failed(-1)
        assert broker.closed_by_client.wait(2), "the broker never saw the socket close"
    finally:
        c.close()


def test_busy_connection_is_not_closed_as_idle(stub_brokers: Callable[..., StubBroker]) -> None:
    broker = stub_brokers()
    c = _client(broker.address, connections_max_idle_ms=100, request_timeout_ms=60_000)
    try:
        assert c.await_ready(-1, 5000)
        c.send(_metadata_request(-1), c._clock())
        t_end = time.monotonic() + 0.4
        while time.monotonic() < t_end:
            c.poll(10, c._clock())
        assert c.is_ready(-1) and c.in_flight_request_count(-1) == 1
    finally:
        c.close()


def test_connection_setup_timeout_grows_per_failure_up_to_max(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_000]
    c = _client(
        "127.0.0.1:9",
        clock_ms=lambda: clock[0],
        reconnect_backoff_ms=1,
        reconnect_backoff_max_ms=1,
        socket_connection_setup_timeout_ms=100,
        socket_connection_setup_timeout_max_ms=1_000,
        rng=random.Random(7),
    )
    # A connect that never completes: nothing is ever reported for the connection.
    monkeypatch.setattr(c._selector, "connect", lambda *a, **k: None)
    measured: list[int] = []
    try:
        for _ in range(7):
            clock[0] += 10
            assert not c.ready(-1, clock[0]) and c.is_connecting(-1)
            started = clock[0]
            while c.is_connecting(-1):
                assert clock[0] - started < 5_000, "the setup timeout never fired"
                clock[0] += 5
                c.poll(0, clock[0])
            measured.append(clock[0] - started)
        reason = c.metadata.tried_addresses["127.0.0.1:9"]
        assert "connection setup timed out" in reason
    finally:
        c.close()
    for attempt, ms in enumerate(measured):
        base = min(100 * 2**attempt, 1_000)
        assert 0.8 * base - 5 <= ms <= 1.2 * base + 5, (attempt, ms, measured)
    assert measured[-1] <= 1_205 and measured[3] > measured[0] * 4


@pytest.mark.parametrize("send_buffer,receive_buffer", [(40_000, 50_000), (70_000, 30_000)])
def test_socket_buffer_sizes_are_applied(
    stub_brokers: Callable[..., StubBroker], send_buffer: int, receive_buffer: int
) -> None:
    broker = stub_brokers()
    c = _client(broker.address, send_buffer_bytes=send_buffer, receive_buffer_bytes=receive_buffer)
    try:
        assert c.await_ready(-1, 5000)
        sock = c._selector._channels[-1].sock
        # Linux reports twice what was asked (bookkeeping overhead); others report it as given.
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (send_buffer, 2 * send_buffer)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) in (receive_buffer, 2 * receive_buffer)
    finally:
        c.close()
