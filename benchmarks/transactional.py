"""Transactional throughput: kproducer vs confluent-kafka, and kproducer against its own idempotent rate.

    .venv/bin/python benchmarks/compare.py --transactional            # 1M x 100 B, 10,000 records a transaction
    .venv/bin/python benchmarks/transactional.py --records 200000 --txn-records 5000 --repeat 3
    .venv/bin/python benchmarks/transactional.py --timeline --records 300000   # where a transaction's time goes

The same work for every client, each in its own child process against one Tansu
broker started here (or ``--bootstrap``), on a fresh 8-partition topic:

- ``kproducer-txn`` and ``confluent-kafka-txn``: ``init_transactions()`` before the
  clock; then ``begin`` / ``--txn-records`` sends / ``commit`` until ``--records``
  are written. The commit waits for every record (both clients flush in it).
- ``kproducer-idempotent``: the same sends with ``enable.idempotence`` and no
  transactions, one ``flush()`` at the end: the rate the transactional one is
  compared to.
- ``acks=all`` (transactions need it), ``linger.ms=5``, each client's other
  defaults; the payload is built before the clock; no delivery callbacks.
- After each run, outside the clock, the committed records are counted with
  confluent-kafka's consumer (``--no-verify`` skips it; aborted records would be
  counted too, but no run aborts).

Clients run interleaved, ``--repeat`` rounds; the table prints the median records/s,
each run's rate in order, and the ratios the targets are stated in, with the load average.

``--timeline`` runs only ``kproducer-txn``, with every request the producer's network
client sends timestamped (sent, answered) next to the caller's begin / commit calls,
and prints the median time of each phase of a transaction: where the time between
two commits goes (coordinator round trips, the wait for the last acknowledgement,
the hand-back to the caller). With ``KPRODUCER_TIMELINE_DUMP=1`` every transaction's
events are printed too (milliseconds since its begin; c/r: a call and its return,
s/a: a request sent and answered).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_loops import confluent_produce  # noqa: E402

CLIENTS = ["kproducer-txn", "kproducer-idempotent", "confluent-kafka-txn"]


def kproducer_config(bootstrap: str, transactional: bool) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        conf["transactional.id"] = f"bench-kproducer-{os.getpid()}"
    return conf


def confluent_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": True,
        "transactional.id": f"bench-confluent-{os.getpid()}",
    }


def _run_kproducer(bootstrap: str, topic: str, records: int, size: int, per_txn: int, transactional: bool) -> float:
    from kproducer import Producer

    p = Producer(kproducer_config(bootstrap, transactional))
    payload = os.urandom(size)
    if transactional:
        p.init_transactions(60)
    send = p.send
    t0 = time.perf_counter()
    if transactional:
        for start in range(0, records, per_txn):
            p.begin_transaction()
            for _ in range(min(per_txn, records - start)):
                send(topic, payload)
            p.commit_transaction(120)
    else:
        for _ in range(records):
            send(topic, payload)
        if p.flush(300) != 0:
            raise SystemExit("kproducer: records left undelivered")
    elapsed = time.perf_counter() - t0
    failed = int(p.metrics().get("record-error-total", 0.0))
    p.close()
    if failed:
        raise SystemExit(f"kproducer: {failed} records failed")
    return elapsed


def _run_confluent(bootstrap: str, topic: str, records: int, size: int, per_txn: int) -> float:
    from confluent_kafka import Producer as CProducer

    cp = CProducer(confluent_config(bootstrap))
    payload = os.urandom(size)
    cp.init_transactions(60)
    t0 = time.perf_counter()
    for start in range(0, records, per_txn):
        cp.begin_transaction()
        confluent_produce(cp, topic, payload, min(per_txn, records - start))
        cp.commit_transaction(120)
    elapsed = time.perf_counter() - t0
    return elapsed


def _instrument() -> list[tuple[float, str, Any]]:
    """Timestamp every request the network client sends and answers, and the caller's transaction calls."""
    from kproducer import Producer
    from kproducer.network.client import NetworkClient
    from kproducer.network.protocol import ApiKey

    events: list[tuple[float, str, Any]] = []
    clock = time.perf_counter
    send = NetworkClient.send

    def timed_send(self: Any, request: Any, now: int) -> None:
        name = ApiKey(request.api_key).name
        events.append((clock(), "sent", name))
        callback = request.callback
        if callback is not None:

            def answered(response: Any) -> None:
                events.append((clock(), "answered", name))
                callback(response)

            request.callback = answered
        send(self, request, now)

    NetworkClient.send = timed_send  # type: ignore[method-assign]
    for call in ("begin_transaction", "commit_transaction"):
        original = getattr(Producer, call)

        def timed(self: Any, *args: Any, _call: str = call, _original: Any = original, **kwargs: Any) -> Any:
            events.append((clock(), "call", _call))
            try:
                return _original(self, *args, **kwargs)
            finally:
                events.append((clock(), "return", _call))

        setattr(Producer, call, timed)
    return events


def _phases(events: list[tuple[float, str, Any]]) -> dict[str, list[float]]:
    """Per transaction (begin call to commit return), the milliseconds spent in each phase."""
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value * 1000)

    txn: list[tuple[float, str, Any]] = []
    for ev in events:
        if ev[1] == "call" and ev[2] == "begin_transaction":
            txn = [ev]
            continue
        txn.append(ev)
        if not (ev[1] == "return" and ev[2] == "commit_transaction"):
            continue
        begin = txn[0][0]
        commit_call = next(t for t, kind, what in txn if kind == "call" and what == "commit_transaction")
        end_sent = [t for t, kind, what in txn if kind == "sent" and what == "END_TXN"]
        end_answered = [t for t, kind, what in txn if kind == "answered" and what == "END_TXN"]
        adds = [(t, kind) for t, kind, what in txn if what == "ADD_PARTITIONS_TO_TXN"]
        produce_acks = [t for t, kind, what in txn if kind == "answered" and what == "PRODUCE"]
        first_produce = next((t for t, kind, what in txn if kind == "sent" and what == "PRODUCE"), None)
        add("transaction (begin -> commit returns)", ev[0] - begin)
        if os.environ.get("KPRODUCER_TIMELINE_DUMP"):
            print(f"txn {ev[0] - begin:.4f}s: " + " ".join(f"{(t - begin) * 1000:.2f}:{k[0]}:{w}" for t, k, w in txn
                  ), file=sys.stderr)  # fmt: skip
        add("appending (begin -> commit called)", commit_call - begin)
        add("commit (commit called -> returns)", ev[0] - commit_call)
        if adds:
            add("begin -> first AddPartitionsToTxn sent", adds[0][0] - begin)
            sent = [t for t, k in adds if k == "sent"]
            answered = [t for t, k in adds if k == "answered"]
            out.setdefault("AddPartitionsToTxn requests per transaction", []).append(len(sent))
            for s_, a_ in zip(sent, answered, strict=False):
                add("AddPartitionsToTxn round trip", a_ - s_)
        if first_produce is not None:
            add("begin -> first Produce sent", first_produce - begin)
        if end_sent and end_answered:
            last_ack = max((t for t in produce_acks if t <= end_sent[-1]), default=commit_call)
            add("commit called -> last Produce answered", max(0.0, last_ack - commit_call))
            add("last Produce answered -> EndTxn sent", end_sent[-1] - max(last_ack, commit_call))
            add("EndTxn round trip", end_answered[-1] - end_sent[-1])
            add("EndTxn answered -> commit returns", ev[0] - end_answered[-1])
            out.setdefault("EndTxn requests per transaction", []).append(len(end_sent))
    return out


def _child(client: str, bootstrap: str, topic: str, records: int, size: int, per_txn: int, timeline: bool = False) -> dict[str, Any]:
    events = _instrument() if timeline else None
    if client == "confluent-kafka-txn":
        elapsed = _run_confluent(bootstrap, topic, records, size, per_txn)
    else:
        elapsed = _run_kproducer(bootstrap, topic, records, size, per_txn, client == "kproducer-txn")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {"client": client, "elapsed_s": elapsed, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024}
    if events is not None:
        out["phases"] = _phases(events)
    return out


def _count(bootstrap: str, topic: str, partitions: int, records: int, timeout: float) -> int:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--count", topic, "--bootstrap", bootstrap,
         "--partitions", str(partitions), "--records", str(records)],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transactional", action="store_true", help=argparse.SUPPRESS)  # compare.py's switch
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txn-records", type=int, default=10_000, help="records per transaction")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--timeline", action="store_true", help="time each phase of kproducer's transactions")
    ap.add_argument("--child")
    ap.add_argument("--topic")
    args, _unknown = ap.parse_known_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.bootstrap, args.topic, args.records, args.size, args.txn_records, args.timeline)))
        return 0
    if args.timeline:
        args.clients = "kproducer-txn"

    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    clients = [c for c in args.clients.split(",") if c]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    ok = True
    load_before = os.getloadavg()[0]
    with tansu_unless(args.bootstrap) as (bootstrap, _broker):
        for _ in range(args.repeat):
            for client in clients:
                topic = f"bench-txn-{client}-{int(time.time() * 1000)}"
                create_topic(bootstrap, topic, args.partitions)
                print(f"running {client} ({args.records:,} x {args.size} B, {args.txn_records:,} a transaction) ...",
                      file=sys.stderr, flush=True)  # fmt: skip
                cmd = [sys.executable, __file__, "--child", client, "--bootstrap", bootstrap, "--topic", topic,
                       "--records", str(args.records), "--size", str(args.size), "--txn-records", str(args.txn_records)]  # fmt: skip
                if args.timeline:
                    cmd.append("--timeline")
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                if proc.returncode != 0:
                    print(f"{client} failed: {proc.stderr.strip()[-2000:]}", file=sys.stderr)
                    ok = False
                    continue
                if os.environ.get("KPRODUCER_TIMELINE_DUMP"):
                    print(proc.stderr, file=sys.stderr)
                res = json.loads(proc.stdout.strip().splitlines()[-1])
                res["records_per_s"] = args.records / res["elapsed_s"]
                if args.verify:
                    res["on_topic"] = _count(bootstrap, topic, args.partitions, args.records, args.timeout)
                    ok &= res["on_topic"] == args.records
                results[client].append(res)
    load_after = os.getloadavg()[0]
    print(_table(results, args, (load_before, load_after)))
    for rs in results.values():
        for r in rs:
            if "phases" in r:
                print(_phase_table(r["phases"]))
    return 0 if ok else 1


def _table(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, load: tuple[float, float]) -> str:
    median = {c: statistics.median(r["records_per_s"] for r in rs) for c, rs in results.items() if rs}
    lines = [
        f"### Transactional producer: {args.records:,} x {args.size} B, {args.txn_records:,} records a transaction, "
        f"{args.partitions} partitions, {args.repeat} round(s), load average {load[0]:.1f} -> {load[1]:.1f}",
        "",
        "| client | records/s (median) | each run, in order | CPU s | peak RSS MB | on topic |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c, rs in results.items():
        if not rs:
            lines.append(f"| {c} | failed | | | | |")
            continue
        rates = [r["records_per_s"] for r in rs]
        lines.append(
            f"| {c} | {median[c]:,.0f} | {', '.join(f'{r:,.0f}' for r in rates)} | "
            f"{statistics.median(r['cpu_s'] for r in rs):.1f} | {max(r['peak_rss_mb'] for r in rs):.0f} | "
            f"{', '.join(str(r.get('on_topic', '-')) for r in rs)} |"
        )
    lines.append("")
    if "kproducer-txn" in median and "confluent-kafka-txn" in median:
        lines.append(f"- kproducer-txn / confluent-kafka-txn: **{median['kproducer-txn'] / median['confluent-kafka-txn']:.2f}x** (target >= 0.5)")
    if "kproducer-txn" in median and "kproducer-idempotent" in median:
        lines.append(f"- kproducer-txn / kproducer-idempotent: **{median['kproducer-txn'] / median['kproducer-idempotent']:.2f}x** (target >= 0.8)")
    lines.append(f"- kproducer config: {kproducer_config('<broker>', True)} (transactional.id per run)")
    lines.append(f"- confluent-kafka config: {confluent_config('<broker>')}")
    return "\n".join(lines)


def _phase_table(phases: dict[str, list[float]]) -> str:
    lines = ["", "| phase of a transaction | median | p90 | transactions |", "|---|---:|---:|---:|"]
    for name, values in phases.items():
        values = sorted(values)
        unit = "" if "per transaction" in name else " ms"
        p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
        lines.append(f"| {name} | {statistics.median(values):.2f}{unit} | {p90:.2f}{unit} | {len(values)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
