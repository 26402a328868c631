"""Side-by-side producer benchmark: kproducer vs confluent-kafka, aiokafka and kafka-python.

Every client runs in its own child process against one Tansu broker started here,
so the CPU time and peak RSS reported are the client's alone. Each run writes to a
fresh topic. Prints records/s, MB/s, client CPU µs per record, p99 delivery
latency (send → acknowledgement) and peak RSS, with ratios against confluent-kafka,
and writes a Markdown table (and a PNG bar chart with --png).

    .venv/bin/python benchmarks/compare.py                          # issue 4's workload
    .venv/bin/python benchmarks/compare.py --records 200000 --size 1024 --acks all --compression lz4
    # issue 8's matrix in one run (one Tansu): workloads x acks x compression, all six clients
    .venv/bin/python benchmarks/compare.py --matrix --markdown out.md --png out.png

Every kproducer client uses the same config (``--kproducer-config k=v,...`` adds
to it); confluent-kafka, aiokafka and kafka-python use linger.ms=5 and their
other defaults. The defaults differ in one way that matters: librdkafka batches
up to 1 MB (``batch.size=1000000``) per partition, the Java client and so
kproducer, aiokafka and kafka-python up to 16 KB. ``--batch-size BYTES`` gives
every client the same per-partition batch size, for a like-for-like run:

    .venv/bin/python benchmarks/compare.py --records 200000 --size 1024 --batch-size 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLIENTS = ["kproducer", "kproducer-batch", "kproducer-arrow", "confluent-kafka", "aiokafka", "kafka-python"]
MATRIX_WORKLOADS = [(1_000_000, 100), (200_000, 1024)]
MATRIX_ACKS = ["1", "all"]
MATRIX_COMPRESSION = ["none", "lz4", "zstd"]


# ---------------------------------------------------------------- child side
def _rss_mb() -> float:
    """Peak RSS so far (ru_maxrss), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _lat_p99(samples: list[float]) -> float:
    if not samples:
        return 0.0
    samples.sort()
    return samples[min(len(samples) - 1, int(0.99 * (len(samples) - 1)))]


def _child(
    client: str,
    bootstrap: str,
    topic: str,
    n: int,
    size: int,
    acks: str,
    compression: str,
    extra: dict[str, str],
    batch_size: int | None = None,
) -> dict[str, Any]:
    payload = os.urandom(size)
    lat: list[float] = []
    sample_every = max(1, n // 20000)
    perf = time.perf_counter
    failed = 0
    t0 = perf()
    rss_before = _rss_mb()
    if client in ("kproducer", "kproducer-batch", "kproducer-arrow"):
        from kproducer.producer import Producer

        errors: list[BaseException] = []
        conf = {"bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression}
        if batch_size is not None:
            conf["batch.size"] = str(batch_size)
        p = Producer({**conf, **extra})
        if client == "kproducer-arrow":
            import pyarrow as pa  # imported and the table built before the clock starts

            # From buffers: pa.array() on Python objects would import pandas (~40 MB RSS) when it is installed.
            rows = 10000
            offsets = pa.py_buffer(b"".join(int.to_bytes(i * size, 4, "little") for i in range(rows + 1)))
            column = pa.BinaryArray.from_buffers(pa.binary(), rows, [None, offsets, pa.py_buffer(payload * rows)])
            arrow_chunk = pa.table({"value": column})
        rss_before = _rss_mb()
        t0 = perf()
        if client == "kproducer":
            send = p.send
            for i in range(n):
                if i % sample_every == 0:
                    s = perf()

                    def cb(md: Any, exc: BaseException | None, s: float = s) -> None:
                        lat.append((perf() - s) * 1000)
                        if exc is not None:
                            errors.append(exc)

                    send(topic, payload, on_delivery=cb)
                else:
                    send(topic, payload)
        elif client == "kproducer-batch":
            chunk = 10000
            values = [payload] * chunk
            for start in range(0, n, chunk):
                m = min(chunk, n - start)
                s = perf()
                fut = p.send_batch(topic, values[:m])
                fut.add_done_callback(lambda f, s=s: lat.append((perf() - s) * 1000))
        else:
            chunk = 10000
            for start in range(0, n, chunk):
                m = min(chunk, n - start)
                s = perf()
                fut = p.send_arrow(arrow_chunk.slice(0, m), topic)
                fut.add_done_callback(lambda f, s=s: lat.append((perf() - s) * 1000))
        p.flush()
        elapsed = perf() - t0
        failed = max(len(errors), int(p.metrics().get("record-error-total", 0.0)))
        p.close()
    elif client == "confluent-kafka":
        from confluent_kafka import Producer as CProducer

        cp = CProducer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks if acks != "all" else "-1",
                "compression.type": compression,
                "linger.ms": 5,
                **({"batch.size": batch_size} if batch_size is not None else {}),
            }
        )
        errs = [0]
        rss_before = _rss_mb()

        def ccb(err: Any, msg: Any, s: float | None = None) -> None:
            if err is not None:
                errs[0] += 1

        t0 = perf()
        for i in range(n):
            while True:
                try:
                    if i % sample_every == 0:
                        s = perf()
                        cp.produce(topic, payload, on_delivery=lambda err, msg, s=s: lat.append((perf() - s) * 1000))
                    else:
                        cp.produce(topic, payload, on_delivery=ccb)
                    break
                except BufferError:
                    cp.poll(0.05)
            if i % 1000 == 0:
                cp.poll(0)
        cp.flush()
        elapsed = perf() - t0
        failed = errs[0]
    elif client == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaProducer

        started_rss = [rss_before]

        async def run() -> float:
            ap = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                acks=int(acks) if acks != "all" else "all",
                compression_type=None if compression == "none" else compression,
                linger_ms=5,
                **({"max_batch_size": batch_size} if batch_size is not None else {}),
            )
            await ap.start()
            started_rss[0] = _rss_mb()
            t = perf()
            futs = []
            for i in range(n):
                fut = await ap.send(topic, payload)
                if i % sample_every == 0:
                    s = perf()
                    fut.add_done_callback(lambda f, s=s: lat.append((perf() - s) * 1000))
                futs.append(fut)
                if len(futs) >= 20000:
                    await asyncio.gather(*futs)
                    futs.clear()
            await asyncio.gather(*futs)
            el = perf() - t
            await ap.stop()
            return el

        elapsed = asyncio.run(run())
        rss_before = started_rss[0]
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks=int(acks) if acks != "all" else "all",
            compression_type=None if compression == "none" else compression,
            linger_ms=5,
            **({"batch_size": batch_size} if batch_size is not None else {}),
        )
        rss_before = _rss_mb()
        t0 = perf()
        for i in range(n):
            fut = kp.send(topic, payload)
            if i % sample_every == 0:
                s = perf()
                fut.add_callback(lambda md, s=s: lat.append((perf() - s) * 1000))
        kp.flush()
        elapsed = perf() - t0
        kp.close()
    else:
        raise SystemExit(f"unknown client {client!r}; choose from {CLIENTS}")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "client": client,
        "records": n,
        "failed": failed,
        "elapsed_s": elapsed,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mb": ru.ru_maxrss / 1024.0,
        # What the run itself added: peak RSS above the peak before the clock started (imports
        # and the producer made, payload built; for Arrow, pyarrow alone is about 36 MB).
        "rss_growth_mb": ru.ru_maxrss / 1024.0 - rss_before,
        "p99_ms": _lat_p99(lat),
    }


# ---------------------------------------------------------------- parent side
def run_client(client: str, bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        client,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--records",
        str(args.records),
        "--size",
        str(args.size),
        "--acks",
        args.acks,
        "--compression",
        args.compression,
        "--kproducer-config",
        args.kproducer_config,
    ]
    if args.batch_size is not None:
        cmd += ["--batch-size", str(args.batch_size)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        return {"client": client, "error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["records_per_s"] = res["records"] / res["elapsed_s"]
    res["mb_per_s"] = res["records"] * args.size / res["elapsed_s"] / 1e6
    res["cpu_us_per_record"] = res["cpu_s"] / res["records"] * 1e6
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--acks", default="1", choices=["0", "1", "all"])
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--matrix", action="store_true", help="run issue 8's workloads x acks x compression matrix")
    ap.add_argument("--workloads", default=",".join(f"{n}x{s}" for n, s in MATRIX_WORKLOADS), help="NxSIZE,... for --matrix")
    ap.add_argument("--acks-list", default=",".join(MATRIX_ACKS), help="for --matrix")
    ap.add_argument("--compression-list", default=",".join(MATRIX_COMPRESSION), help="for --matrix")
    ap.add_argument("--kproducer-config", default="", help="extra kproducer config, k=v,k=v")
    ap.add_argument(
        "--batch-size",
        type=int,
        help="give every client this per-partition batch size in bytes (default: each client's own default)",
    )
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="after each uncompressed cell, measure the broker's one-connection ceiling (benchmarks/broker_ceiling.py) "
        "at 16 KB and 1 MB batches",
    )
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--markdown", type=Path, help="append the table to this Markdown file")
    ap.add_argument("--png", type=Path, help="write a bar chart of records/s here")
    ap.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    ap.add_argument("--child")
    ap.add_argument("--topic")
    args = ap.parse_args()

    if args.child:
        extra = dict(kv.split("=", 1) for kv in args.kproducer_config.split(",") if kv)
        res = _child(
            args.child, args.bootstrap, args.topic, args.records, args.size, args.acks, args.compression, extra, args.batch_size
        )
        print(json.dumps(res))
        return 0

    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if args.matrix:
        cells = [
            (int(n), int(size), acks, comp)
            for n, size in (w.split("x") for w in args.workloads.split(",") if w)
            for acks in args.acks_list.split(",")
            for comp in args.compression_list.split(",")
        ]
    else:
        cells = [(args.records, args.size, args.acks, args.compression)]

    all_ok = True
    chart: list[tuple[str, list[dict[str, Any]]]] = []
    with tansu_unless(args.bootstrap) as (bootstrap, broker):
        for n, size, acks, comp in cells:
            cell_args = argparse.Namespace(**{**vars(args), "records": n, "size": size, "acks": acks, "compression": comp})
            results = []
            for client in clients:
                topic = f"bench-{client}-{int(time.time() * 1000)}"
                create_topic(bootstrap, topic, args.partitions)
                print(f"running {client} ({n:,} x {size} B, acks={acks}, {comp}) ...", file=sys.stderr, flush=True)
                results.append(run_client(client, bootstrap, topic, cell_args))
            table, ok = _report(results, cell_args)
            if args.ceiling and comp == "none":
                table += "\n" + _ceiling_lines(bootstrap, broker, n, size, acks, args.partitions)
            all_ok &= all("error" not in r for r in results)
            print(table, flush=True)
            if args.markdown:
                with args.markdown.open("a") as fh:
                    fh.write(table + "\n\n")
            chart.append((f"{n // 1000}k x {size} B\nacks={acks} {comp}", ok))
    if args.png and chart:
        _chart(chart, args.png, clients)
    return 0 if all_ok else 1


def _ceiling_lines(bootstrap: str, broker: Any, n: int, size: int, acks: str, partitions: int) -> str:
    """The broker's own ceiling for this cell's records on one connection, with no client work.

    Run in a child process: the pre-built requests are large, and a big parent would raise
    every later child's peak RSS (Linux keeps ru_maxrss across fork and exec).
    """
    lines = []
    for batch_size in (16384, 1_000_000):
        cmd = [
            sys.executable, str(ROOT / "benchmarks" / "broker_ceiling.py"), "--bootstrap", bootstrap,
            "--size", str(size), "--batch-size", str(batch_size), "--partitions", str(partitions),
            "--records", str(n), "--acks", "-1" if acks == "all" else acks,
        ]  # fmt: skip
        if broker is not None:
            cmd += ["--broker-pid", str(broker.process.pid)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        out = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-1:] or ["failed"]
        lines.append(f"- broker ceiling (benchmarks/broker_ceiling.py): {out[0]}")
    return "\n".join(lines) + "\n"


def _report(results: list[dict[str, Any]], args: argparse.Namespace) -> tuple[str, list[dict[str, Any]]]:
    base = next((r for r in results if r.get("client") == "confluent-kafka" and "error" not in r), None)
    extra = f", kproducer {args.kproducer_config}" if args.kproducer_config else ""
    if args.batch_size is not None:
        extra += f", batch size {args.batch_size:,} B for every client"
    else:
        extra += ", each client's default batch size"
    title = (
        f"{args.records:,} x {args.size} B, acks={args.acks}, compression={args.compression}, "
        f"{args.partitions} partitions, one Tansu{extra}"
    )
    lines = [
        f"### {title}",
        "",
        "| client | records/s | MB/s | CPU µs/record | p99 ms | peak RSS MB | RSS growth MB | failed | vs confluent-kafka |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['client']} | error: {r['error'][0][:80]} | | | | | | | |")
            continue
        ratio = f"{r['records_per_s'] / base['records_per_s']:.2f}x" if base else "n/a"
        lines.append(
            f"| {r['client']} | {r['records_per_s']:,.0f} | {r['mb_per_s']:.1f} | {r['cpu_us_per_record']:.2f} | "
            f"{r['p99_ms']:.1f} | {r['peak_rss_mb']:.0f} | {r.get('rss_growth_mb', 0.0):.0f} | {r['failed']} | {ratio} |"
        )
    ok = [r for r in results if "error" not in r]
    by = {r["client"]: r["records_per_s"] for r in ok}
    lines.append("")
    for a, b in (("kproducer", "confluent-kafka"), ("kproducer", "aiokafka"), ("kproducer-batch", "confluent-kafka"), ("kproducer-arrow", "confluent-kafka")):
        if a in by and b in by:
            lines.append(f"- {a} / {b}: {by[a] / by[b]:.2f}x records/s")
    return "\n".join(lines), ok


def _chart(chart: list[tuple[str, list[dict[str, Any]]]], path: Path, clients: list[str]) -> None:
    """Grouped bars: one group per matrix cell, one bar per client (records/s)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(clients))
    fig, ax = plt.subplots(figsize=(max(8, 2.2 * len(chart)), 4.5))
    for ci, client in enumerate(clients):
        heights = [next((r["records_per_s"] for r in ok if r["client"] == client), 0.0) for _, ok in chart]
        ax.bar([g + ci * width for g in range(len(chart))], heights, width, label=client)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(chart))])
    ax.set_xticklabels([label for label, _ in chart], fontsize=7)
    ax.set_ylabel("records/s")
    ax.set_title("kproducer vs other Python clients, one Tansu (higher is better)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
