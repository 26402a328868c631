"""``compare.py --tls``: what TLS costs kproducer and confluent-kafka, side by side in one run.

Two Tansu brokers: one plaintext, one behind Debian's stunnel4 (TLS 1.3, a per-run CA from trustme),
advertising the stunnel port so that every connection goes through TLS. For each workload (default
1M x 100 B and 200k x 1 KB) kproducer and confluent-kafka run plaintext then TLS, interleaved, each
in its own child process (compare.py's runner: same work, same settings as the plain table, records
counted on the topic afterwards). The table gives records/s on both paths and TLS/plaintext per
client: kproducer's TLS cost should be no larger, relatively, than confluent-kafka's.

    .venv/bin/python benchmarks/compare.py --tls [--repeat 3] [--workloads 1000000x100,200000x1024]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLIENTS = ("kproducer", "confluent-kafka")


def _create_topic(bootstrap: str, topic: str, partitions: int, security: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        fut.result(30)


def run_tls_comparison(args: argparse.Namespace, cell_for: Callable[[int, int, str, str], Any]) -> int:
    from benchmarks import compare
    from tests.support.tls import Stunnel, make_certificates

    from kproducer.embedded_broker import free_port, start_embedded_broker

    # compare.py's --workloads default is the pair: 1M x 100 B and 200k x 1 KB.
    cells = [
        cell_for(int(n), int(size), args.acks, args.compression)
        for n, size in (w.split("x") for w in args.workloads.split(",") if w)
    ]
    certs = make_certificates(Path(tempfile.mkdtemp(prefix="kproducer-bench-certs-")))
    tls_port = free_port()
    plain = start_embedded_broker(cluster_id="bench-plain")
    secured = start_embedded_broker(advertised_port=tls_port, cluster_id="bench-tls")
    stunnel = Stunnel(secured.port, certs.server, port=tls_port)
    paths = {
        "plaintext": (plain.bootstrap, {}),
        "TLS": (stunnel.bootstrap, {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}),
    }
    all_ok = True
    try:
        for cell in cells:
            load_before = os.getloadavg()[0]
            rates: dict[tuple[str, str], list[float]] = {}
            ratios: dict[str, list[float]] = {}
            # kproducer / confluent-kafka on each path, from the same repetition.
            versus: dict[str, list[float]] = {}
            loads: list[float] = []
            failures: list[str] = []
            for _ in range(args.repeat):
                per_run: dict[tuple[str, str], float] = {}
                for client in CLIENTS:
                    for path, (bootstrap, security) in paths.items():
                        os.environ["KPRODUCER_BENCH_SECURITY"] = json.dumps(security)
                        topic = f"bench-tls-{client}-{path}-{int(time.time() * 1000)}"
                        _create_topic(bootstrap, topic, cell.partitions, security)
                        print(f"running {client} over {path} ({cell.records:,} x {cell.size} B) ...", file=sys.stderr, flush=True)
                        res = compare.run_client(client, bootstrap, topic, cell, args)
                        if "error" in res or res.get("on_topic", res["records"]) != res["records"]:
                            failures.append(f"{client} {path}: {res.get('error') or res.get('on_topic')}")
                            all_ok = False
                            continue
                        per_run[(client, path)] = res["records_per_s"]
                        rates.setdefault((client, path), []).append(res["records_per_s"])
                for client in CLIENTS:
                    if (client, "TLS") in per_run and (client, "plaintext") in per_run:
                        ratios.setdefault(client, []).append(per_run[(client, "TLS")] / per_run[(client, "plaintext")])
                for path in paths:
                    if all((c, path) in per_run for c in CLIENTS):
                        versus.setdefault(path, []).append(per_run[(CLIENTS[0], path)] / per_run[(CLIENTS[1], path)])
                loads.append(os.getloadavg()[0])
            os.environ.pop("KPRODUCER_BENCH_SECURITY", None)
            load_after = os.getloadavg()[0]
            lines = [
                f"### TLS vs plaintext: {cell.records:,} x {cell.size} B, acks={cell.acks}, compression={cell.compression}, "
                f"{cell.partitions} partitions",
                "",
                f"{args.repeat} run(s), paths and clients interleaved; load average (1 min) {load_before:.2f} before, "
                f"{load_after:.2f} after, {os.cpu_count()} CPUs. TLS: stunnel4 (TLS 1.3) in front of Tansu.",
                "",
                "| client | plaintext records/s | TLS records/s | TLS / plaintext (same run) |",
                "|---|---:|---:|---:|",
            ]
            for client in CLIENTS:
                p = rates.get((client, "plaintext"), [])
                t = rates.get((client, "TLS"), [])
                r = ratios.get(client, [])
                lines.append(
                    f"| {client} | {compare._fmt_range(p, ',.0f') if p else 'error'} | "
                    f"{compare._fmt_range(t, ',.0f') if t else 'error'} | {compare._fmt_range(r, '.2f') if r else 'n/a'} |"
                )
            lines += [
                "",
                f"{CLIENTS[0]} / {CLIENTS[1]} (same repetition): "
                + "; ".join(f"{path} {compare._fmt_range(v, '.2f')}" for path, v in versus.items()),
                "Load average (1 min) after each repetition: " + ", ".join(f"{x:.2f}" for x in loads),
            ]
            if failures:
                lines += ["", "Failures: " + "; ".join(failures)]
            lines += ["", "Config of each client (plus security.protocol=SSL, ssl.ca.location on the TLS path):", ""]
            lines += [f"- {c}: {compare.RUNNERS[c].config(cell)}" for c in CLIENTS]
            table = "\n".join(lines)
            print(table, flush=True)
            if args.markdown:
                with args.markdown.open("a") as fh:
                    fh.write(table + "\n\n")
    finally:
        stunnel.stop()
        secured.stop()
        plain.stop()
    return 0 if all_ok else 1
