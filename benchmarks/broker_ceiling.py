"""The broker's own ceiling: records/s one connection can push into Tansu with no client work at all.

Every producer benchmark here runs against one Tansu. To tell a client's limit
from the broker's, this script pre-builds Produce requests (v2 record batches of
``--size``-byte records, ``--batch-size`` bytes per partition batch, one batch per
partition per request, as the Java producer drains) before the clock starts, then
writes them over one raw socket with at most ``--in-flight`` unanswered, reads
the responses and checks every partition error is 0. Nothing else runs in the
process while the clock runs, so the rate is what the broker accepts on one
connection at that request shape: no client can do better on it.

    .venv/bin/python benchmarks/broker_ceiling.py --size 1024 --batch-size 16384
    .venv/bin/python benchmarks/broker_ceiling.py --size 1024 --batch-size 1000000 --in-flight 5
    .venv/bin/python benchmarks/broker_ceiling.py --size 1024 --batch-size 1000000 --in-flight 100

It also prints the broker's CPU time per record (from /proc), the figure that
decides how far apart the 16 KB (Java default) and 1 MB (librdkafka default)
batch sizes land.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kproducer.network.protocol import (  # noqa: E402
    ApiKey,
    build_produce_request,
    decode_response_header,
    encode_request,
    parse_produce_response,
    response_header_version,
)
from kproducer.record.builder import MemoryRecordsBuilder  # noqa: E402
from kproducer.structs import TopicPartition  # noqa: E402

PRODUCE_VERSION = 8  # non-flexible, supported by Tansu and every Kafka since 2.4


def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _batch(size: int, batch_size: int, compression: str = "none") -> bytes:
    payload = os.urandom(size)
    b = MemoryRecordsBuilder(bytearray(), write_limit=batch_size, compression=compression)
    ts = int(time.time() * 1000)
    while b.try_append(ts, None, payload):
        pass
    b.close()
    return bytes(b.buffer())


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def run(bootstrap: str, topic: str, partitions: int, size: int, batch_size: int, records: int, in_flight: int, acks: int,
        max_request_size: int, broker_pid: int | None, compression: str = "none") -> dict[str, float]:
    """Blast pre-built Produce requests holding about ``records`` records over one connection; records/s and broker CPU."""
    batch = _batch(size, batch_size, compression)
    records_per_batch = struct.unpack_from(">i", batch, 57)[0]
    per_request = max(1, min(partitions, max_request_size // len(batch)))
    requests = max(1, records // (records_per_batch * per_request))
    frames = []
    p = 0
    for cid in range(requests):
        tps = {TopicPartition(topic, (p + i) % partitions): batch for i in range(per_request)}
        p = (p + per_request) % partitions
        body = build_produce_request(PRODUCE_VERSION, acks, 30000, None, tps)
        frames.append(b"".join(bytes(x) for x in encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, cid, "ceiling", body)))
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    hv = response_header_version(ApiKey.PRODUCE, PRODUCE_VERSION)
    pending: deque[int] = deque()
    errors = 0
    b0 = proc_cpu_s(broker_pid) if broker_pid else 0.0
    t0 = time.perf_counter()
    nxt = 0
    while nxt < requests or pending:
        while nxt < requests and len(pending) < in_flight:
            sock.sendall(frames[nxt])
            pending.append(nxt)
            nxt += 1
        (length,) = struct.unpack(">i", _recv_exact(sock, 4))
        frame = memoryview(_recv_exact(sock, length))
        cid, off = decode_response_header(hv, frame)
        if cid != pending.popleft():
            raise RuntimeError(f"response {cid} out of order")
        parts, _ = parse_produce_response(PRODUCE_VERSION, frame[off:])
        errors += sum(1 for r in parts.values() if r.error_code != 0)
    elapsed = time.perf_counter() - t0
    broker_cpu = (proc_cpu_s(broker_pid) - b0) if broker_pid else float("nan")
    sock.close()
    n = requests * per_request * records_per_batch
    return {
        "records": n,
        "records_per_batch": records_per_batch,
        "batches_per_request": per_request,
        "records_per_s": n / elapsed,
        "mb_per_s": n * size / elapsed / 1e6,
        "broker_cpu_us_per_record": broker_cpu / n * 1e6,
        "broker_cores": broker_cpu / elapsed,
        "partition_errors": errors,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    ap.add_argument("--batch-size", type=int, default=16384, help="bytes per partition batch")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--records", type=int, default=400_000, help="about this many records in all")
    ap.add_argument("--in-flight", type=int, default=5, help="unanswered requests at most (Java: 5 with idempotence)")
    ap.add_argument("--acks", type=int, default=1, choices=[-1, 1])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--max-request-size", type=int, default=1048576)
    ap.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    ap.add_argument("--broker-pid", type=int, help="with --bootstrap: the broker's pid, for its CPU time")
    args = ap.parse_args()

    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    with tansu_unless(args.bootstrap) as (bootstrap, broker):
        topic = f"ceiling-{int(time.time() * 1000)}"
        create_topic(bootstrap, topic, args.partitions)
        res = run(bootstrap, topic, args.partitions, args.size, args.batch_size, args.records, args.in_flight, args.acks,
                  args.max_request_size, broker.process.pid if broker else args.broker_pid, args.compression)
    print(
        f"{args.size} B records, {res['records_per_batch']:.0f} per batch ({args.batch_size:,} B), "
        f"{res['batches_per_request']:.0f} batches per request, {args.in_flight} in flight, acks={args.acks}: "
        f"{res['records_per_s']:,.0f} records/s ({res['mb_per_s']:.0f} MB/s); broker "
        f"{res['broker_cpu_us_per_record']:.2f} µs CPU per record ({res['broker_cores']:.2f} cores); "
        f"partition errors {res['partition_errors']:.0f}"
    )
    return 1 if res["partition_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
