"""NetworkClient rules checked without a broker: stub servers on 127.0.0.1, a fake resolver, a manual clock."""

from __future__ import annotations

import errno
import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kproducer.errors import ConfigError, IllegalStateError
from kproducer.metadata import Metadata
from kproducer.network.client import ClientRequest, ClientResponse, NetworkClient, build_metadata_request
from kproducer.network.connection import ConnectionState
from kproducer.network.protocol import ApiKey, build_produce_request
from kproducer.structs import TopicPartition
from tests.support.clock import FakeClock
from tests.support.latch import LATCH_S
from tests.support.wire import api_versions_response, frame_response, parse_request

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
    # The client's clock stands still while it connects (every activity at ready_at), then moves
    # 1 ms a poll: the connection must close once idle for more than 200 ms of that clock.
    clock = FakeClock(1_000)
    c = _client(broker.address, connections_max_idle_ms=200, clock_ms=clock)
    try:
        c.ready(-1, clock())
        assert _poll_until(c, lambda: c.is_ready(-1)), "never connected to the stub broker"
        ready_at = clock()
        while c.is_ready(-1) and clock() - ready_at <= 5_000:
            clock.advance(1)
            c.poll(0, clock())
        idle = clock() - ready_at
        assert 200 < idle <= 202, f"closed after {idle} ms idle on the client's clock"
        assert c._nodes[-1].state is ConnectionState.DISCONNECTED and not c.is_connection_failed(-1)
        assert broker.closed_by_client.wait(LATCH_S), "the broker never saw the socket close"
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


def _client_whose_connect_never_completes(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock, backoff_ms: int, setup_timeout_ms: int, setup_timeout_max_ms: int
) -> NetworkClient:
    """A client of one bootstrap address whose TCP connect is never reported as done."""
    c = _client(
        "127.0.0.1:9",
        clock_ms=clock,
        reconnect_backoff_ms=backoff_ms,
        reconnect_backoff_max_ms=backoff_ms,
        socket_connection_setup_timeout_ms=setup_timeout_ms,
        socket_connection_setup_timeout_max_ms=setup_timeout_max_ms,
        rng=random.Random(7),
    )
    monkeypatch.setattr(c._selector, "connect", lambda *a, **k: None)
    return c


def test_connection_setup_timeout_grows_per_failure_up_to_max(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(1_000)
    c = _client_whose_connect_never_completes(monkeypatch, clock, 1, 100, 1_000)
    measured: list[int] = []
    try:
        for _ in range(7):
            clock.now += 10
            assert not c.ready(-1, clock.now) and c.is_connecting(-1)
            started = clock.now
            while c.is_connecting(-1):
                assert clock.now - started < 5_000, "the setup timeout never fired"
                clock.now += 5
                c.poll(0, clock.now)
            measured.append(clock.now - started)
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


# ------------------------------------------------------------------ client.dns.lookup
class FakeResolver:
    """Stands in for socket.getaddrinfo / gethostbyaddr; ``names`` may change between calls."""

    def __init__(self, names: dict[str, list[str]], reverse: dict[str, str] | None = None) -> None:
        self.names = names
        self.reverse = reverse or {}
        self.calls: list[str] = []

    def getaddrinfo(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.calls.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in self.names[host]]

    def gethostbyaddr(self, ip: str) -> tuple[str, list[str], list[str]]:
        if ip not in self.reverse:
            raise socket.herror(1, "Unknown host")
        return self.reverse[ip], [], [ip]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> FakeResolver:
    r = FakeResolver({})
    monkeypatch.setattr(socket, "getaddrinfo", r.getaddrinfo)
    monkeypatch.setattr(socket, "gethostbyaddr", r.gethostbyaddr)
    return r


def _attempts(c: NetworkClient, node_id: int, n: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make ``n`` connection attempts that are refused at once; returns the addresses tried."""
    tried: list[str] = []

    def refuse(conn_id: int, host: str, port: int, family: int = socket.AF_INET) -> None:
        tried.append(f"{host}:{port}")
        raise OSError(errno.ECONNREFUSED, "refused")

    monkeypatch.setattr(c._selector, "connect", refuse)
    for _ in range(n):
        now = max(c._nodes[node_id].last_attempt_ms, 0) + 10_000  # past any reconnect backoff
        assert c.can_connect(node_id, now)
        c.ready(node_id, now)
        assert c.is_connection_failed(node_id)
    return tried


def test_every_address_is_tried_then_the_name_is_resolved_again(
    resolver: FakeResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolver.names["multi.test"] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    c = _client("multi.test:9092")
    try:
        assert resolver.calls == ["multi.test"]
        tried = _attempts(c, -1, 3, monkeypatch)
        assert tried == ["10.0.0.1:9092", "10.0.0.2:9092", "10.0.0.3:9092"]
        assert resolver.calls == ["multi.test"]  # the constructor's lookup served all three
        # Used up: the next attempt resolves again and sees the new addresses.
        resolver.names["multi.test"] = ["10.0.0.4", "10.0.0.5"]
        assert _attempts(c, -1, 3, monkeypatch) == ["10.0.0.4:9092", "10.0.0.5:9092", "10.0.0.4:9092"]
        assert resolver.calls == ["multi.test"] * 3
    finally:
        c.close()


def test_reresolution_skips_the_address_just_tried(
    resolver: FakeResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolver.names["multi.test"] = ["10.0.0.1", "10.0.0.2"]
    c = _client("multi.test:9092")
    try:
        assert _attempts(c, -1, 2, monkeypatch) == ["10.0.0.1:9092", "10.0.0.2:9092"]
        resolver.names["multi.test"] = ["10.0.0.2", "10.0.0.1"]  # the last one tried now comes first
        assert _attempts(c, -1, 1, monkeypatch) == ["10.0.0.1:9092"]
    finally:
        c.close()


def test_name_is_resolved_again_after_an_established_connection_drops(
    resolver: FakeResolver, stub_brokers: Callable[..., StubBroker], monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = stub_brokers()
    resolver.names["stub.test"] = ["127.0.0.1", "10.0.0.9"]
    c = _client(f"stub.test:{broker.port}")
    try:
        assert c.await_ready(-1, 5000)
        c.disconnect(-1)
        resolver.names["stub.test"] = ["10.0.0.7", "10.0.0.8"]  # moved while we were connected
        assert _attempts(c, -1, 1, monkeypatch) == [f"10.0.0.7:{broker.port}"]
        assert resolver.calls == ["stub.test"] * 2
    finally:
        c.close()


def test_one_unresolvable_bootstrap_entry_is_skipped_with_a_warning(
    resolver: FakeResolver, caplog: pytest.LogCaptureFixture
) -> None:
    resolver.names["good.test"] = ["10.0.0.1"]
    with caplog.at_level(logging.WARNING, logger="kproducer.network.client"):
        c = _client("bad.test:9092,good.test:9093")
    try:
        assert [n.address for n in c._bootstrap] == ["good.test:9093"]
        assert "bad.test:9092" in caplog.text and "cannot be resolved" in caplog.text
    finally:
        c.close()


def test_no_resolvable_bootstrap_entry_is_a_config_error(resolver: FakeResolver) -> None:
    with pytest.raises(ConfigError) as ei:
        _client("bad1.test:9092,bad2.test:9092")
    assert "bad1.test:9092" in str(ei.value) and "bad2.test:9092" in str(ei.value)


def test_unresolvable_node_later_fails_the_attempt_not_the_poll(
    resolver: FakeResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolver.names["gone.test"] = ["10.0.0.1"]
    c = _client("gone.test:9092")
    try:
        assert _attempts(c, -1, 1, monkeypatch) == ["10.0.0.1:9092"]
        del resolver.names["gone.test"]  # the name disappears from DNS
        assert _attempts(c, -1, 1, monkeypatch) == []
        assert "cannot resolve gone.test:9092" in c.metadata.tried_addresses["gone.test:9092"]
    finally:
        c.close()


def test_canonical_lookup_expands_each_address_to_its_host_name(
    resolver: FakeResolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolver.names.update(
        {
            "alias.test": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
            "b1.test": ["10.0.0.1", "10.0.1.1"],
            "b2.test": ["10.0.0.2"],
        }
    )
    # 10.0.0.3 has no reverse entry: Java then keeps the IP itself as the "canonical" name.
    resolver.reverse.update({"10.0.0.1": "b1.test", "10.0.0.2": "b2.test"})
    resolver.names["10.0.0.3"] = ["10.0.0.3"]
    c = _client("alias.test:9092", client_dns_lookup="resolve_canonical_bootstrap_servers_only")
    try:
        assert [n.address for n in c._bootstrap] == ["b1.test:9092", "b2.test:9092", "10.0.0.3:9092"]
        assert [n.address for n in c.known_nodes()] == ["b1.test:9092", "b2.test:9092", "10.0.0.3:9092"]
        # Then as use_all_dns_ips: every address of a canonical name is tried in turn.
        assert _attempts(c, -1, 3, monkeypatch) == ["10.0.0.1:9092", "10.0.1.1:9092", "10.0.0.1:9092"]
    finally:
        c.close()


def test_canonical_lookup_skips_a_name_that_does_not_resolve(
    resolver: FakeResolver, caplog: pytest.LogCaptureFixture
) -> None:
    resolver.names.update({"alias.test": ["10.0.0.1", "10.0.0.2"], "b2.test": ["10.0.0.2"]})
    resolver.reverse.update({"10.0.0.1": "stale.test", "10.0.0.2": "b2.test"})
    with caplog.at_level(logging.WARNING, logger="kproducer.network.client"):
        c = _client("alias.test:9092", client_dns_lookup="resolve_canonical_bootstrap_servers_only")
    try:
        assert [n.address for n in c._bootstrap] == ["b2.test:9092"]
        assert "stale.test" in caplog.text
    finally:
        c.close()


def test_a_connection_counts_as_stalled_from_the_start_of_its_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """stalled_connections (the circuit breaker's symptom for a leader that never gets a request in
    flight): from the start of a setup that does not complete, across its timeout and the retries."""
    clock = FakeClock(1_000)
    c = _client_whose_connect_never_completes(monkeypatch, clock, 50, 400, 400)
    try:
        assert c.stalled_connections(clock.now, 300) == {}  # never tried
        assert not c.ready(-1, clock.now) and c.is_connecting(-1)
        started = clock.now
        clock.now += 299
        c.poll(0, clock.now)
        assert c.stalled_connections(clock.now, 300) == {}
        clock.now += 1
        assert c.stalled_connections(clock.now, 300) == {-1: started}
        for _ in range(200):  # past the setup timeout, then a new attempt after the backoff
            clock.now += 5
            c.poll(0, clock.now)
            c.ready(-1, clock.now)
        assert c.metadata.tried_addresses["127.0.0.1:9"].startswith("connection setup timed out")
        assert c.stalled_connections(clock.now, 300) == {-1: started}
    finally:
        c.close()


def test_wakeup_by_wakes_a_poll_whose_wait_ends_later_and_only_that(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new batch needs the Sender by when it becomes sendable: a wait that ends by then is left alone."""
    clock = FakeClock(1_000)
    client = _client("127.0.0.1:9", clock_ms=clock)
    wakes: list[bool] = []
    real_wakeup = client._selector.wakeup

    def counted() -> None:
        wakes.append(True)
        real_wakeup()

    monkeypatch.setattr(client._selector, "wakeup", counted)
    try:
        # Not in a poll (the Sender is running, perhaps past the batch's partition): always woken.
        client.wakeup_by(10**9)
        assert len(wakes) == 1
        client.poll(0, clock())  # takes the wakeup byte
        # In a poll of a minute on the fake clock, its wait ending at 61,000.
        returned = threading.Event()
        poller = threading.Thread(target=lambda: (client.poll(60_000, clock()), returned.set()), daemon=True)
        poller.start()
        deadline = time.monotonic() + LATCH_S
        while client._wait_ends_ms != 61_000:
            assert time.monotonic() < deadline, "the poll never published when its wait ends"
            time.sleep(0.001)
        client.wakeup_by(61_000)  # it looks by then anyway
        client.wakeup_by(70_000)
        assert len(wakes) == 1 and not returned.is_set()
        client.wakeup_by(60_999)  # it would look a millisecond late
        assert len(wakes) == 2
        assert returned.wait(LATCH_S), "wakeup_by() with an earlier deadline did not end the poll"
        poller.join(LATCH_S)
        assert client._wait_ends_ms == -1  # no longer waiting: the next wakeup_by() wakes
    finally:
        client.close()
