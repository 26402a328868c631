"""Warm a fresh broker before a benchmark measures anything.

A fresh Tansu takes its first few hundred MB more slowly (its in-memory storage
grows), and without a warm-up the first measured run paid for it: in
``spark_sink.py`` the path measured first ran at 0.85M rows/s where the same path
later in the same run ran at 1.1M. The warm-up writes 200 MB with confluent-kafka
to a topic of its own, in a child process (a large parent would raise every later
child's peak RSS, which the benchmarks report).
"""

from __future__ import annotations

import subprocess
import sys
import time

__all__ = ["warm_broker"]

_WARM_UP = """
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 5})
payload = bytes(1024)
for i in range(int(sys.argv[3])):
    while True:
        try:
            p.produce(sys.argv[2], payload)
            break
        except BufferError:
            p.poll(0.01)
if p.flush(60):
    sys.exit("warm-up: records left unflushed")
"""


def warm_broker(bootstrap: str, megabytes: int = 200) -> None:
    """Write ``megabytes`` MB of 1 KB records to a new 8-partition topic and wait for them."""
    from tests.support.readback import create_topic

    topic = f"bench-warm-up-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic, 8)
    subprocess.run([sys.executable, "-c", _WARM_UP, bootstrap, topic, str(megabytes * 1024)], check=True, timeout=300)
