"""CPU a batch to frame a Produce request and write it to a socket, on the Sender's thread.

One request of ``--partitions`` batches of ``--batch-bytes`` each (one topic), as the drain of a
keyed topic over many partitions makes them: ``build_produce_request`` frames it, then the
``Selector`` queues its buffers and its write loop hands them to ``sendmsg`` on a local TCP
connection, until every byte is written. A second thread reads and discards what arrives; only
the sending thread's CPU time is counted (``time.thread_time``). No broker, no response.

    .venv/bin/python benchmarks/request_framing.py                              # 1,000 x 700 B, v11
    .venv/bin/python benchmarks/request_framing.py --batch-bytes 16384 --partitions 60
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from kproducer.network.protocol import build_produce_request  # noqa: E402
from kproducer.network.selector import Selector  # noqa: E402
from kproducer.structs import TopicPartition  # noqa: E402


def _discard(server: socket.socket) -> None:
    conn, _ = server.accept()
    with conn:
        sink = bytearray(1 << 20)
        while conn.recv_into(sink):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--batch-bytes", type=int, default=700)
    ap.add_argument("--version", type=int, default=11, help="Produce request version")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()

    server = socket.create_server(("127.0.0.1", 0))
    reader = threading.Thread(target=_discard, args=(server,), daemon=True)
    reader.start()
    selector = Selector(send_buffer_bytes=4 << 20)
    selector.connect(1, "127.0.0.1", server.getsockname()[1])
    while 1 not in selector.poll(1.0).connected:
        pass
    # Batches as pool buffers hold them: views of the first bytes of batch.size bytearrays.
    pool = [bytearray(os.urandom(max(args.batch_bytes, 16384))) for _ in range(args.partitions)]
    batches = {TopicPartition("t", p): memoryview(pool[p])[: args.batch_bytes] for p in range(args.partitions)}

    def one_request() -> None:
        request = build_produce_request(args.version, 1, 30000, None, batches)
        selector.send(1, request.buffers)
        while selector.pending_bytes(1):
            selector.poll(0.05)

    for _ in range(20):
        one_request()  # warm
    t0 = time.thread_time()
    for _ in range(args.rounds):
        one_request()
    cpu = time.thread_time() - t0
    selector.close_all()
    server.close()
    print(f"{args.partitions:,} batches of {args.batch_bytes:,} B a request, Produce v{args.version}, {args.rounds} requests: "
          f"{cpu / args.rounds / args.partitions * 1e6:.2f} µs CPU a batch to frame and write")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
