"""librdkafka's built-in mock Kafka cluster, driven from a child process.

The ``confluent-kafka`` wheel bundles librdkafka, which contains a complete
in-process mock cluster (``rd_kafka_mock_*``). We load that library with
ctypes in a *child* process that this module controls over a JSON-lines pipe,
so that a crash or hang inside librdkafka can never take the test process
down: the parent only ever waits on the pipe with a deadline.

Parent API: :func:`start_mock_cluster` returns a :class:`MockCluster`.
Child entry point: this file run as a script with the library path as argv[1].
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["MockCluster", "MockClusterError", "find_librdkafka", "start_mock_cluster", "REQUIRED_SYMBOLS"]

# Every librdkafka symbol the child resolves; a bundled build without one fails clearly at start.
REQUIRED_SYMBOLS = (
    "rd_kafka_conf_new",
    "rd_kafka_conf_set",
    "rd_kafka_new",
    "rd_kafka_destroy",
    "rd_kafka_err2name",
    "rd_kafka_mock_cluster_new",
    "rd_kafka_mock_cluster_destroy",
    "rd_kafka_mock_cluster_bootstraps",
    "rd_kafka_mock_topic_create",
    "rd_kafka_mock_partition_set_leader",
    "rd_kafka_mock_push_request_errors_array",
    "rd_kafka_mock_broker_push_request_error_rtts",
    "rd_kafka_mock_broker_set_down",
    "rd_kafka_mock_broker_set_up",
    "rd_kafka_mock_broker_set_rtt",
    "rd_kafka_mock_coordinator_set",
)


class MockClusterError(RuntimeError):
    """The mock cluster child failed, refused a command, or did not answer in time."""


def find_librdkafka() -> Path:
    """The librdkafka shared object bundled in the confluent-kafka wheel."""
    try:
        import confluent_kafka
    except ImportError as e:  # fail loudly: a test needing the mock cluster must not skip
        raise MockClusterError(
            "confluent-kafka is not installed: `pip install -e '.[test]'` installs it"
        ) from e
    site = Path(confluent_kafka.__file__).resolve().parent.parent
    candidates = sorted((site / "confluent_kafka.libs").glob("librdkafka*.so*"))
    candidates += sorted(Path(confluent_kafka.__file__).resolve().parent.glob("**/librdkafka*.so*"))
    if not candidates:
        raise MockClusterError(
            f"no librdkafka shared object found in {site / 'confluent_kafka.libs'} "
            "(a confluent-kafka wheel bundling librdkafka is required)"
        )
    return candidates[0]


# ----------------------------------------------------------------------------- parent side


@dataclass
class MockCluster:
    """Handle on a running mock cluster child; every method is one round trip over the pipe."""

    bootstrap: str
    broker_ids: list[int]
    process: subprocess.Popen[bytes]
    stderr_path: Path
    command_timeout: float = 10.0
    _buf: bytearray = field(default_factory=bytearray, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopped: bool = False

    # -------------------------------------------------------------- commands
    def create_topic(self, topic: str, partitions: int, replication_factor: int = 1) -> None:
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        if not 1 <= replication_factor <= len(self.broker_ids):
            raise ValueError(
                f"replication_factor must be in 1..{len(self.broker_ids)}, got {replication_factor}"
            )
        self._call("topic_create", topic=topic, partitions=partitions, replication_factor=replication_factor)

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the leader; clients see it on their next metadata refresh (-1 = no leader)."""
        self._call("partition_set_leader", topic=topic, partition=partition, broker_id=broker_id)

    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` to any broker fail with these codes, in order."""
        self._call("push_request_errors", api_key=api_key, errors=[int(e) for e in errors])

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors_rtts: list[tuple[int, int]]
    ) -> None:
        """The next requests of ``api_key`` to ``broker_id`` answer with (error code, delay ms) pairs."""
        pairs = [[int(e), int(r)] for e, r in errors_rtts]
        self._call("broker_push_request_error_rtts", broker_id=broker_id, api_key=api_key, errors_rtts=pairs)

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator of ``key`` (``key_type`` "transaction" or "group")."""
        self._call("coordinator_set", key_type=key_type, key=key, broker_id=broker_id)

    def broker_set_down(self, broker_id: int) -> None:
        """Disconnect the broker's clients and refuse new connections until :meth:`broker_set_up`."""
        self._call("broker_set_down", broker_id=broker_id)

    def broker_set_up(self, broker_id: int) -> None:
        self._call("broker_set_up", broker_id=broker_id)

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response from this broker by ``rtt_ms`` (0 to clear)."""
        self._call("broker_set_rtt", broker_id=broker_id, rtt_ms=rtt_ms)

    def ping(self) -> None:
        self._call("ping")

    def listening_addresses(self) -> list[tuple[str, int]]:
        """(ip, port) of every TCP socket the child listens on, read from /proc (Linux)."""
        return _listening_addresses(self.process.pid)

    def stop(self) -> None:
        """Destroy the cluster and end the child; kills it if it does not exit promptly. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            try:
                self._call("stop", _timeout=5.0)
            except MockClusterError as e:
                logger.warning("mock cluster did not stop cleanly: %s", e)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.process.stdin is not None:
            self.process.stdin.close()
        if self.process.stdout is not None:
            self.process.stdout.close()
        try:
            self.stderr_path.unlink()
        except OSError:
            pass

    def stderr_tail(self, limit: int = 4000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    # -------------------------------------------------------------- transport
    def _call(self, op: str, _timeout: float | None = None, **args: Any) -> Any:
        if self._stopped and op != "stop":
            raise MockClusterError(f"mock cluster is stopped; cannot {op}")
        with self._lock:
            if self.process.poll() is not None:
                raise MockClusterError(
                    f"mock cluster child exited with {self.process.returncode} before {op}; stderr:\n{self.stderr_tail()}"
                )
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(json.dumps({"op": op, "args": args}).encode() + b"\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise MockClusterError(
                    f"mock cluster child pipe broken on {op}: {e}; stderr:\n{self.stderr_tail()}"
                )
            reply = _read_reply(
                self.process, self._buf, _timeout or self.command_timeout, op, self.stderr_tail
            )
        if not reply.get("ok"):
            raise MockClusterError(f"mock cluster refused {op}({args}): {reply.get('error')}")
        return reply.get("result")


def _read_reply(
    process: subprocess.Popen[bytes], buf: bytearray, timeout: float, what: str, stderr_tail: Any
) -> dict[str, Any]:
    """One JSON line from the child, or MockClusterError after ``timeout`` seconds or on EOF."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise MockClusterError(
                f"mock cluster child did not answer {what} within {timeout}s; stderr:\n{stderr_tail()}"
            )
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            process.poll()
            raise MockClusterError(
                f"mock cluster child exited (rc={process.returncode}) while answering {what}; stderr:\n{stderr_tail()}"
            )
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    try:
        reply = json.loads(line)
    except ValueError:
        raise MockClusterError(f"mock cluster child sent a non-JSON line for {what}: {line[:200]!r}")
    if not isinstance(reply, dict):
        raise MockClusterError(f"mock cluster child sent {reply!r} for {what}")
    return reply


def start_mock_cluster(brokers: int = 3, start_timeout: float = 15.0) -> MockCluster:
    """Start a child process holding a librdkafka mock cluster of ``brokers`` brokers on loopback."""
    if not 1 <= brokers <= 32:
        raise ValueError(f"brokers must be in 1..32, got {brokers}")
    lib = find_librdkafka()
    fd, stderr_name = tempfile.mkstemp(prefix="kproducer-mock-cluster-", suffix=".log")
    stderr_path = Path(stderr_name)
    with os.fdopen(fd, "wb") as stderr_file:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(lib), str(brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            close_fds=True,
        )

    def tail() -> str:
        return stderr_path.read_text(errors="replace")[-4000:]

    try:
        hello = _read_reply(process, bytearray(), start_timeout, "start", tail)
    except MockClusterError:
        process.kill()
        process.wait(5)
        raise
    if not hello.get("ok"):
        process.kill()
        process.wait(5)
        raise MockClusterError(f"mock cluster failed to start: {hello.get('error')}; stderr:\n{tail()}")
    result = hello["result"]
    cluster = MockCluster(
        bootstrap=str(result["bootstrap"]),
        broker_ids=[int(b) for b in result["broker_ids"]],
        process=process,
        stderr_path=stderr_path,
    )
    logger.debug("mock cluster pid %d at %s", process.pid, cluster.bootstrap)
    return cluster


def _listening_addresses(pid: int) -> list[tuple[str, int]]:
    """Listening TCP sockets of ``pid``: match its socket inodes against /proc/<pid>/net/tcp{,6}."""
    fd_dir = Path(f"/proc/{pid}/fd")
    if not fd_dir.is_dir():
        raise MockClusterError(
            f"cannot inspect sockets of pid {pid}: {fd_dir} does not exist (Linux /proc needed)"
        )
    inodes: set[str] = set()
    for entry in fd_dir.iterdir():
        try:
            target = os.readlink(entry)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out: list[tuple[str, int]] = []
    for name, v6 in (("tcp", False), ("tcp6", True)):
        table = Path(f"/proc/{pid}/net/{name}")
        if not table.exists():
            continue
        for row in table.read_text().splitlines()[1:]:
            cols = row.split()
            if len(cols) < 10 or cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                continue
            hex_ip, hex_port = cols[1].split(":")
            out.append((_decode_ip(hex_ip, v6), int(hex_port, 16)))
    return out


def _decode_ip(hex_ip: str, v6: bool) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_ip)
    # /proc prints each 32-bit word in host (little-endian) order.
    fixed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.IPv6Address(fixed) if v6 else ipaddress.IPv4Address(fixed))


# ----------------------------------------------------------------------------- child side


def _child_main(lib_path: str, brokers: int) -> int:
    """Serve JSON-lines commands on stdin; answer one JSON line per command on stdout."""
    import ctypes

    out = sys.stdout.buffer

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj).encode() + b"\n")
        out.flush()

    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        send({"ok": False, "error": f"cannot load {lib_path}: {e}"})
        return 2
    missing = [s for s in REQUIRED_SYMBOLS if not hasattr(lib, s)]
    if missing:
        send({"ok": False, "error": f"{lib_path} does not export: {', '.join(missing)}"})
        return 2

    vp, cp, i32, i16, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int16, ctypes.c_size_t
    c_int = ctypes.c_int
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, sz]
    lib.rd_kafka_conf_set.restype = c_int
    lib.rd_kafka_new.argtypes = [c_int, vp, cp, sz]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_destroy.argtypes = [vp]
    lib.rd_kafka_err2name.argtypes = [c_int]
    lib.rd_kafka_err2name.restype = cp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, c_int]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, c_int, c_int]
    lib.rd_kafka_mock_topic_create.restype = c_int
    lib.rd_kafka_mock_partition_set_leader.argtypes = [vp, cp, i32, i32]
    lib.rd_kafka_mock_partition_set_leader.restype = c_int
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [vp, i16, sz, ctypes.POINTER(c_int)]
    lib.rd_kafka_mock_push_request_errors_array.restype = None
    # Variadic (err, rtt_ms) int pairs follow the fixed arguments; ctypes passes extras as given.
    lib.rd_kafka_mock_broker_push_request_error_rtts.restype = c_int
    for name in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
        getattr(lib, name).argtypes = [vp, i32]
        getattr(lib, name).restype = c_int
    lib.rd_kafka_mock_broker_set_rtt.argtypes = [vp, i32, c_int]
    lib.rd_kafka_mock_broker_set_rtt.restype = c_int
    lib.rd_kafka_mock_coordinator_set.argtypes = [vp, cp, cp, i32]
    lib.rd_kafka_mock_coordinator_set.restype = c_int

    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    for key, value in ((b"log_level", b"3"), (b"client.id", b"kproducer-mock-cluster")):
        if lib.rd_kafka_conf_set(conf, key, value, errstr, len(errstr)) != 0:
            send({"ok": False, "error": f"conf {key.decode()}: {errstr.value.decode(errors='replace')}"})
            return 2
    rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # RD_KAFKA_PRODUCER; rk takes ownership of conf
    if not rk:
        send({"ok": False, "error": f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}"})
        return 2
    mcluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
    if not mcluster:
        lib.rd_kafka_destroy(rk)
        send({"ok": False, "error": f"rd_kafka_mock_cluster_new(rk, {brokers}) returned NULL"})
        return 2
    bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
    # The mock cluster numbers its brokers 1..N.
    send({"ok": True, "result": {"bootstrap": bootstrap, "broker_ids": list(range(1, brokers + 1))}})

    def check(err: int, what: str) -> None:
        if err != 0:
            raise RuntimeError(f"{what}: {lib.rd_kafka_err2name(err).decode()} ({err})")

    def handle(op: str, a: dict[str, Any]) -> Any:
        if op == "ping":
            return None
        if op == "topic_create":
            check(
                lib.rd_kafka_mock_topic_create(
                    mcluster, a["topic"].encode(), a["partitions"], a["replication_factor"]
                ),
                "topic_create",
            )
            return None
        if op == "partition_set_leader":
            check(
                lib.rd_kafka_mock_partition_set_leader(
                    mcluster, a["topic"].encode(), a["partition"], a["broker_id"]
                ),
                "partition_set_leader",
            )
            return None
        if op == "push_request_errors":
            errs = a["errors"]
            arr = (c_int * max(1, len(errs)))(*errs)
            lib.rd_kafka_mock_push_request_errors_array(mcluster, a["api_key"], len(errs), arr)
            return None
        if op == "broker_push_request_error_rtts":
            flat: list[Any] = []
            for e, r in a["errors_rtts"]:
                flat += [c_int(e), c_int(r)]
            check(
                lib.rd_kafka_mock_broker_push_request_error_rtts(
                    vp(mcluster), i32(a["broker_id"]), i16(a["api_key"]), sz(len(a["errors_rtts"])), *flat
                ),
                "broker_push_request_error_rtts",
            )
            return None
        if op == "broker_set_down":
            check(lib.rd_kafka_mock_broker_set_down(mcluster, a["broker_id"]), "broker_set_down")
            return None
        if op == "broker_set_up":
            check(lib.rd_kafka_mock_broker_set_up(mcluster, a["broker_id"]), "broker_set_up")
            return None
        if op == "coordinator_set":
            check(
                lib.rd_kafka_mock_coordinator_set(
                    mcluster, a["key_type"].encode(), a["key"].encode(), a["broker_id"]
                ),
                "coordinator_set",
            )
            return None
        if op == "broker_set_rtt":
            check(lib.rd_kafka_mock_broker_set_rtt(mcluster, a["broker_id"], a["rtt_ms"]), "broker_set_rtt")
            return None
        raise RuntimeError(f"unknown op {op!r}")

    for raw in sys.stdin.buffer:
        try:
            msg = json.loads(raw)
            op, args = msg["op"], msg.get("args", {})
        except (ValueError, KeyError, TypeError) as e:
            send({"ok": False, "error": f"bad command line {raw[:200]!r}: {e}"})
            continue
        if op == "stop":
            break
        try:
            send({"ok": True, "result": handle(op, args)})
        except Exception as e:  # report to the parent, keep serving
            send({"ok": False, "error": f"{type(e).__name__}: {e}"})
    lib.rd_kafka_mock_cluster_destroy(mcluster)
    lib.rd_kafka_destroy(rk)
    send({"ok": True, "result": None})
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write("usage: mock_cluster.py LIBRDKAFKA_PATH BROKERS\n")
        sys.exit(2)
    sys.exit(_child_main(sys.argv[1], int(sys.argv[2])))
