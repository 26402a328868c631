"""Slow-broker isolation: does one 2,000 ms broker starve the healthy partitions?

Scenario: a fresh 3-broker librdkafka mock cluster per mode, a topic of
6 partitions spread over the brokers (partition p led by broker p % 3), keyless
100 B records produced at full speed from one thread; after ``--fault-at`` seconds
the first broker answers every request 2,000 ms late. Modes, in one run:

* ``baseline``: kproducer, no fault (the fault-free reference);
* ``breaker-off``: kproducer, no circuit breaker;
* ``breaker-on``: kproducer with the FailureRateCircuitBreaker;
* ``kip794``: kproducer with only ``partitioner.availability.timeout.ms``;
* ``confluent-kafka``: librdkafka on the same scenario.

Every mode uses ``request.timeout.ms=1000`` (so the slow broker's requests time
out and count as failures) and ``max.block.ms=1000`` (so a full buffer surfaces as
BufferExhausted instead of a minute-long block). Reported per mode: healthy-partition
throughput (records/s delivered to partitions not led by the slow broker, from the
fault on) and its ratio to the baseline, p99 delivery latency on those partitions,
minimum buffer-available-bytes, BufferExhausted errors; plus a PNG of throughput
over time (one line per mode) and the buffer-available-bytes series as JSON.

    .venv/bin/python benchmarks/slow_broker.py                 # 30 s per mode
    .venv/bin/python benchmarks/slow_broker.py --duration 20   # shorter

``--preset send-stall`` is the "a slow broker must never stall send()" scenario,
measured as a new user would meet it: broker 2 (leader of partitions 1 and 4)
turns to 2,000 ms RTT at t = 5 s of 20 s; ``acks=1``, ``linger.ms=5``,
``buffer.memory=4 MiB``, ``request.timeout.ms=1000``, ``delivery.timeout.ms=30000``,
``max.block.ms`` left at its default (60 s), and the failure-rate breaker with
trigger count 100, 20 % and a 5 s retry interval. Each mode (breaker off, breaker
on, KIP-794 only) runs ``--runs`` times on a fresh cluster; the table gives per
mode the distribution of the longest single send() call, the time from the fault
to the first mute, and the healthy partitions' delivery rate after the fault
relative to before it, per wall-clock second and per CPU second of this process
(the mute should cost the healthy partitions little: about 0.9x or better per CPU
second; tests/integration/mock_cluster/test_slow_broker_isolation.py checks the same
scenario's correctness on a fake clock and leaves this figure to the benchmark).
Every send() call longer than ``--stall-ms`` (250) is explained on its own line: how long of it this thread waited in the BufferPool for
memory (and how much of the pool the slow leader held then), how long the garbage collector ran, how much CPU the whole process got
meanwhile (against the 2 cores a full share would be), the machine's CPU pressure
(``/proc/pressure/cpu``) around it, and where the calling thread and the Sender
thread were while it lasted (a watchdog thread's snapshot of both stacks):

    .venv/bin/python benchmarks/slow_broker.py --preset send-stall --runs 10
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.mock_cluster import MockCluster, start_mock_cluster  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
PARTITIONS = 6
SLOW_RTT_MS = 2000
VALUE = b"x" * 100
MODES = ["baseline", "breaker-off", "breaker-on", "kip794", "confluent-kafka"]

COMMON = {
    "linger.ms": 5,
    "request.timeout.ms": 1000,
    "delivery.timeout.ms": 30_000,
    "max.block.ms": 1000,
}
BREAKER = {
    "producer.circuit.breaker.class": "failure_rate",
    "producer.circuit.breaker.trigger.message.count": 100,
    "producer.circuit.breaker.trigger.failure.perc": 50,
    "producer.circuit.breaker.window.ms": 2000,
    "producer.circuit.breaker.mute.retry.interval": 2000,
}
KIP794 = {"partitioner.availability.timeout.ms": 500}


class Fault:
    """Turns the slow broker to SLOW_RTT_MS once ``fault_at`` seconds have passed since ``start`` (not when disabled)."""

    def __init__(self, mc: MockCluster, slow: int, start: float, fault_at: float, enabled: bool = True) -> None:
        self.mc, self.slow, self.start, self.fault_at, self.enabled = mc, slow, start, fault_at, enabled
        self.done = False

    def apply_if_due(self, now: float) -> None:
        if not self.done and self.enabled and now - self.start >= self.fault_at:
            self.mc.broker_set_rtt(self.slow, SLOW_RTT_MS)
            self.done = True


class Recorder:
    """Delivery outcomes in time buckets: healthy deliveries, latencies, errors."""

    def __init__(self, start: float, healthy: set[int]) -> None:
        self.start = start
        self.healthy = healthy
        self.lock = threading.Lock()
        self.per_second: dict[int, int] = {}
        self.healthy_latencies_ms: list[float] = []  # from the fault on
        self.delivered = 0
        self.failed = 0
        self.buffer_exhausted = 0
        self.fault_at = 0.0

    def delivered_one(self, partition: int, latency_s: float, now: float) -> None:
        with self.lock:
            self.delivered += 1
            if partition in self.healthy:
                sec = int(now - self.start)
                self.per_second[sec] = self.per_second.get(sec, 0) + 1
                if now - self.start >= self.fault_at:
                    self.healthy_latencies_ms.append(latency_s * 1000.0)


def _spread(mc: MockCluster, topic: str, slow: int) -> set[int]:
    """Partition p of a new topic led by broker (p % 3)+1; the partitions not led by ``slow``."""
    mc.create_topic(topic, PARTITIONS)
    ids = mc.broker_ids
    for p in range(PARTITIONS):
        mc.partition_set_leader(topic, p, ids[p % 3])
    return {p for p in range(PARTITIONS) if ids[p % 3] != slow}


def _producer(mode: str, mc: MockCluster, topic: str, common: dict[str, Any], breaker: dict[str, Any]) -> Any:
    """A producer in ``mode`` (breaker-off, breaker-on, kip794) with the topic's metadata fetched."""
    from kproducer.producer import Producer

    config: dict[str, Any] = {"bootstrap.servers": mc.bootstrap, **common}
    if mode == "breaker-on":
        config.update(breaker)
    elif mode == "kip794":
        config.update(KIP794)
    p = Producer(config)
    p.partitions_for(topic)
    return p


def _run_kproducer(mode: str, mc: MockCluster, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    from kproducer.errors import BufferExhaustedError

    slow = mc.broker_ids[0]
    healthy = _spread(mc, topic, slow)
    p = _producer(mode, mc, topic, COMMON, BREAKER)
    start = time.monotonic()
    rec = Recorder(start, healthy)
    rec.fault_at = args.fault_at
    buffer_series: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            buffer_series.append((time.monotonic() - start, p.metrics()["buffer-available-bytes"]))
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    fault = Fault(mc, slow, start, args.fault_at, enabled=mode != "baseline")
    end = start + args.duration
    send = p.send
    while True:
        now = time.monotonic()
        if now >= end:
            break
        fault.apply_if_due(now)
        for _ in range(200):
            t0 = time.monotonic()

            def cb(md: Any, exc: BaseException | None, t0: float = t0) -> None:
                t = time.monotonic()
                if exc is None:
                    rec.delivered_one(md.partition, t - t0, t)
                else:
                    with rec.lock:
                        rec.failed += 1
                        if isinstance(exc, BufferExhaustedError):
                            rec.buffer_exhausted += 1

            send(topic, VALUE, callback=cb)
    stop.set()
    sampler.join()
    p.close(5)
    return _summary(mode, rec, buffer_series, args)


def _run_confluent(mc: MockCluster, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    slow = mc.broker_ids[0]
    healthy = _spread(mc, topic, slow)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": mc.bootstrap,
            "linger.ms": COMMON["linger.ms"],
            "request.timeout.ms": COMMON["request.timeout.ms"],
            "delivery.timeout.ms": COMMON["delivery.timeout.ms"],
            "partitioner": "murmur2_random",
        }
    )
    p.list_topics(topic, timeout=10)
    start = time.monotonic()
    rec = Recorder(start, healthy)
    rec.fault_at = args.fault_at

    def cb(err: Any, msg: Any) -> None:
        t = time.monotonic()
        if err is None:
            rec.delivered_one(msg.partition(), msg.latency() or 0.0, t)
        else:
            with rec.lock:
                rec.failed += 1

    fault = Fault(mc, slow, start, args.fault_at)
    end = start + args.duration
    while True:
        now = time.monotonic()
        if now >= end:
            break
        fault.apply_if_due(now)
        for _ in range(200):
            try:
                p.produce(topic, VALUE, on_delivery=cb)
            except BufferError:
                with rec.lock:
                    rec.buffer_exhausted += 1
                p.poll(0.05)
        p.poll(0)
    p.flush(5)
    return _summary("confluent-kafka", rec, [], args)


def _summary(mode: str, rec: Recorder, buffer_series: list[tuple[float, float]], args: argparse.Namespace) -> dict[str, Any]:
    fault_secs = [s for s in range(int(args.fault_at), int(args.duration))]
    healthy_rate = sum(rec.per_second.get(s, 0) for s in fault_secs) / max(len(fault_secs), 1)
    lat = sorted(rec.healthy_latencies_ms)
    p99 = lat[min(len(lat) - 1, int(0.99 * (len(lat) - 1)))] if lat else float("nan")
    return {
        "mode": mode,
        "healthy_rate": healthy_rate,
        "healthy_p99_ms": p99,
        "min_buffer_available": min((v for _, v in buffer_series), default=float("nan")),
        "buffer_series": buffer_series,
        "buffer_exhausted": rec.buffer_exhausted,
        "delivered": rec.delivered,
        "failed": rec.failed,
        "per_second": [rec.per_second.get(s, 0) for s in range(int(args.duration))],
    }


def _plot(results: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for r in results:
        ax1.plot(range(len(r["per_second"])), r["per_second"], label=r["mode"])
        if r["buffer_series"]:
            xs, ys = zip(*r["buffer_series"], strict=True)
            ax2.plot(xs, [y / 1e6 for y in ys], label=r["mode"])
    for ax in (ax1, ax2):
        ax.axvline(args.fault_at, color="grey", linestyle="--")
        ax.legend()
    ax1.set_ylabel("healthy-partition records/s")
    ax1.set_title(f"Slow broker ({SLOW_RTT_MS} ms RTT from t={args.fault_at:g}s): throughput over time")
    ax2.set_ylabel("buffer-available-bytes (MB)")
    ax2.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path)


# ---------------------------------------------------------------------------- send-stall preset
STALL_MODES = ["breaker-off", "breaker-on", "kip794"]
STALL_SLOW_BROKER = 2
STALL_COMMON = {
    "acks": 1,
    "linger.ms": 5,
    "buffer.memory": 4 * 1024 * 1024,
    "request.timeout.ms": 1000,
    "delivery.timeout.ms": 30_000,
}
STALL_BREAKER = {
    "producer.circuit.breaker.class": "failure_rate",
    "producer.circuit.breaker.trigger.message.count": 100,
    "producer.circuit.breaker.trigger.failure.perc": 20,
    "producer.circuit.breaker.mute.retry.interval": 5000,
}


def _run_stall_once(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One fresh cluster, one producer, keyless 100 B records for ``args.duration`` seconds."""
    mc = start_mock_cluster(brokers=3)
    try:
        topic = "send-stall"
        slow = STALL_SLOW_BROKER
        healthy = _spread(mc, topic, slow)
        p = _producer(mode, mc, topic, STALL_COMMON, STALL_BREAKER)
        start = time.monotonic()
        lock = threading.Lock()
        per_second = [0] * (int(args.duration) + 2)
        outcome = {"delivered": 0, "failed": 0}
        first_mute: list[float] = []
        manager = p.circuit_break_manager
        if manager is not None:

            def on_change(change: Any) -> None:
                if change.is_mute and not first_mute:
                    first_mute.append(time.monotonic() - start)

            manager.add_listener(on_change)

        def cb(md: Any, exc: BaseException | None) -> None:
            with lock:
                if exc is None:
                    outcome["delivered"] += 1
                    if md.partition in healthy:
                        sec = int(time.monotonic() - start)
                        if sec < len(per_second):
                            per_second[sec] += 1
                else:
                    outcome["failed"] += 1

        longest = 0.0
        longest_at = 0.0
        longest_before = 0.0
        fault = Fault(mc, slow, start, args.fault_at)
        end = start + args.duration
        send = p.send
        value = VALUE
        clock = time.monotonic
        sent = 0
        probe = StallProbe(p, args.stall_ms / 1000.0, slow)
        probe.start()
        current = probe.current
        stalls: list[tuple[float, float]] = []
        stall_s = args.stall_ms / 1000.0
        # This process's CPU seconds at the start of second 1 (second 0 holds the connection
        # set-up), at the fault and at the end: healthy records per CPU second before and after.
        cpu_at: dict[str, float] = {}
        try:
            while True:
                now = clock()
                if now >= end:
                    break
                if "one" not in cpu_at and now - start >= 1.0:
                    cpu_at["one"] = time.process_time()
                was_done = fault.done
                fault.apply_if_due(now)
                if fault.done and not was_done:
                    cpu_at["fault"] = time.process_time()
                for _ in range(200):
                    t0 = clock()
                    current[0] = t0
                    send(topic, value, callback=cb)
                    current[0] = 0.0
                    dt = clock() - t0
                    if dt > longest:
                        longest, longest_at = dt, t0 - start
                        if not fault.done:
                            longest_before = dt
                    if dt >= stall_s:
                        stalls.append((t0, dt))
                sent += 200
        finally:
            probe.stop()
        cpu_at["end"] = time.process_time()
        metrics = p.metrics()
        mc.broker_set_rtt(slow, 0)
        p.close(60)
    finally:
        mc.stop()
    fault_second = int(args.fault_at)
    before_secs = range(1, fault_second)  # second 0 includes the connection set-up
    after_secs = range(fault_second, int(args.duration))
    before = sum(per_second[s] for s in before_secs) / max(len(before_secs), 1)
    after = sum(per_second[s] for s in after_secs) / max(len(after_secs), 1)
    cpu_before = cpu_at.get("fault", cpu_at["end"]) - cpu_at.get("one", cpu_at["end"])
    cpu_after = cpu_at["end"] - cpu_at.get("fault", cpu_at["end"])
    per_cpu_before = sum(per_second[s] for s in before_secs) / cpu_before if cpu_before > 0 else float("nan")
    per_cpu_after = sum(per_second[s] for s in after_secs) / cpu_after if cpu_after > 0 else float("nan")
    return {
        "mode": mode,
        "healthy_per_cpu_s_before": per_cpu_before,
        "healthy_per_cpu_s_after": per_cpu_after,
        "healthy_per_cpu_ratio": per_cpu_after / per_cpu_before if per_cpu_before else float("nan"),
        "longest_send_s": longest,
        "longest_send_at_s": longest_at,
        "longest_send_before_fault_s": longest_before,
        "stalls": [probe.explain(t0, dt, start) for t0, dt in stalls],
        "mute_after_fault_s": (first_mute[0] - args.fault_at) if first_mute else None,
        "healthy_before": before,
        "healthy_after": after,
        "healthy_ratio": after / before if before else float("nan"),
        "sent": sent,
        "delivered": outcome["delivered"],
        "failed": outcome["failed"],
        "metrics": {k: v for k, v in metrics.items() if "circuit" in k or "moved" in k or "node" in k},
        "loadavg": _loadavg(),
    }


class StallProbe:
    """What a send() call that took long was waiting on (see the module docstring).

    The producer's BufferPool wait is wrapped to log each wait of the calling thread;
    ``gc.callbacks`` log collections; a sampler logs this process's CPU time and the
    machine's CPU pressure every 50 ms; a watchdog snapshots the stacks of the calling
    thread and the Sender thread once a send() has lasted ``stall_s``. The send loop
    sets ``current[0]`` to the start of the call in progress (0.0 between calls).
    """

    def __init__(self, producer: Any, stall_s: float, slow_node: int) -> None:
        self.current = [0.0]
        self.stall_s = stall_s
        self.pool_waits: list[tuple[float, float, int]] = []  # (start, end, slow leader's bytes at the start)
        self.gc_pauses: list[tuple[float, float, int]] = []
        self.cpu: list[tuple[float, float, str]] = []  # (monotonic, process CPU s, cpu pressure line)
        self.stacks: dict[float, dict[str, list[str]]] = {}
        self._stop = threading.Event()
        self._gc_start = 0.0
        self._caller = threading.get_ident()
        pool = producer._pool
        original = pool._wait_for_memory
        waits = self.pool_waits

        sender = producer._sender

        def wait_for_memory(size: int, max_time_to_block_ms: int) -> Any:
            t0 = time.monotonic()
            held = sender.buffer_bytes_by_node().get(slow_node, 0)
            try:
                return original(size, max_time_to_block_ms)
            finally:
                waits.append((t0, time.monotonic(), held))

        self._pool, self._original = pool, original
        pool._wait_for_memory = wait_for_memory
        self._threads = [threading.Thread(target=self._sample, daemon=True), threading.Thread(target=self._watch, daemon=True)]

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.monotonic()
        else:
            self.gc_pauses.append((self._gc_start, time.monotonic(), int(info.get("generation", -1))))

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        gc.callbacks.remove(self._on_gc)
        self._pool._wait_for_memory = self._original

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.cpu.append((time.monotonic(), time.process_time(), _cpu_pressure()))

    def _watch(self) -> None:
        seen = 0.0
        while not self._stop.wait(0.02):
            t0 = self.current[0]
            if t0 and t0 != seen and time.monotonic() - t0 >= self.stall_s:
                seen = t0
                names = {t.ident: t.name for t in threading.enumerate()}
                snap: dict[str, list[str]] = {}
                for ident, frame in sys._current_frames().items():
                    name = names.get(ident, str(ident))
                    if ident == self._caller or "network-thread" in name or "sender" in name.lower():
                        snap[name] = [line.strip().replace("\n", " | ") for line in traceback.format_stack(frame)[-4:]]
                self.stacks[t0] = snap

    def explain(self, t0: float, dt: float, start: float) -> dict[str, Any]:
        t1 = t0 + dt

        def overlap(spans: list[Any]) -> float:
            return float(sum(max(0.0, min(b, t1) - max(a, t0)) for a, b, *_ in spans))

        inside = [c for c in self.cpu if t0 - 0.05 <= c[0] <= t1 + 0.05]
        cpu_share = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]) if len(inside) >= 2 and inside[-1][0] > inside[0][0] else None
        return {
            "at_s": round(t0 - start, 3),
            "ms": round(dt * 1000),
            "pool_wait_ms": round(overlap(self.pool_waits) * 1000),
            "slow_leader_bytes_when_waiting": max((h for a, b, h in self.pool_waits if b > t0 and a < t1), default=None),
            "gc_ms": round(overlap(self.gc_pauses) * 1000),
            "gc_generations": sorted({g for a, b, g in self.gc_pauses if b > t0 and a < t1}),
            "process_cpu_cores": None if cpu_share is None else round(cpu_share, 2),
            "cpu_pressure": inside[-1][2] if inside else "",
            "stacks": self.stacks.get(t0, {}),
        }


def _cpu_pressure() -> str:
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return ""


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def _span(values: list[float], fmt: str) -> str:
    if not values:
        return "n/a"
    v = sorted(values)
    return f"{fmt.format(v[len(v) // 2])} ({fmt.format(v[0])}–{fmt.format(v[-1])})"


def _per_cpu_ratio(rs: list[dict[str, Any]]) -> str:
    """Healthy records per CPU second of this process after the fault over before it: the mean of
    the runs' ratios and their range (one run's short phase varies a lot in CPU cost)."""
    ok = [r for r in rs if r["healthy_per_cpu_s_before"] == r["healthy_per_cpu_s_before"] and r["healthy_per_cpu_s_after"] > 0]
    if not ok:
        return "n/a"
    ratios = [r["healthy_per_cpu_ratio"] for r in ok]
    return f"{sum(ratios) / len(ratios):.2f} (runs {min(ratios):.2f}–{max(ratios):.2f})"


def run_send_stall(args: argparse.Namespace) -> None:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()] if args.modes_given else STALL_MODES
    unknown = [m for m in modes if m not in STALL_MODES]
    if unknown:
        raise SystemExit(f"unknown modes {unknown} for --preset send-stall; allowed: {STALL_MODES}")
    print(f"config: {STALL_COMMON}; breaker-on adds {STALL_BREAKER}; kip794 adds {KIP794}", flush=True)
    print(f"broker {STALL_SLOW_BROKER} at {SLOW_RTT_MS} ms RTT from t={args.fault_at:g}s of {args.duration:g}s", flush=True)
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    # Modes interleaved run by run, so that a burst of machine load hits every mode alike.
    for i in range(args.runs):
        for mode in modes:
            r = _run_stall_once(mode, args)
            results[mode].append(r)
            mute = "n/a" if r["mute_after_fault_s"] is None else f"{r['mute_after_fault_s']:.2f}s"
            for stall in r["stalls"]:
                print(f"  stall: {json.dumps(stall)}", flush=True)
            print(
                f"run {i + 1} {mode}: longest send() {r['longest_send_s'] * 1000:.0f} ms at t={r['longest_send_at_s']:.1f}s "
                f"(before the fault {r['longest_send_before_fault_s'] * 1000:.0f} ms), "
                f"mute {mute} after the fault, healthy {r['healthy_before']:.0f} -> {r['healthy_after']:.0f} rec/s "
                f"({r['healthy_ratio']:.2f}x; per CPU second {r['healthy_per_cpu_s_before']:,.0f} -> "
                f"{r['healthy_per_cpu_s_after']:,.0f}, {r['healthy_per_cpu_ratio']:.2f}x), "
                f"delivered {r['delivered']:,}/{r['sent']:,} failed {r['failed']:,}, "
                f"load {r['loadavg']}, {r['metrics']}",
                flush=True,
            )
    print()
    print(
        "| mode | runs | longest send() ms, median (min–max) | runs with a send() >= 1 s | "
        "longest send() before the fault ms | "
        "fault -> first mute s, median (min–max) | healthy after/before, median (min–max) | "
        "healthy per CPU second after/before (all runs) | failed records |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, rs in results.items():
        longest = [r["longest_send_s"] * 1000 for r in rs]
        before = [r["longest_send_before_fault_s"] * 1000 for r in rs]
        mutes = [r["mute_after_fault_s"] for r in rs if r["mute_after_fault_s"] is not None]
        print(
            f"| {mode} | {len(rs)} | {_span(longest, '{:,.0f}')} | {sum(1 for x in longest if x >= 1000)} | "
            f"{_span(before, '{:,.0f}')} | "
            f"{_span(mutes, '{:.2f}') if mode == 'breaker-on' else 'n/a'} | {_span([r['healthy_ratio'] for r in rs], '{:.2f}')} | "
            f"{_per_cpu_ratio(rs)} | {sum(r['failed'] for r in rs):,} |"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "slow_broker_send_stall.json").write_text(json.dumps(results))
    print(f"\nraw: {OUT / 'slow_broker_send_stall.json'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=["send-stall"], help="a named scenario (see the module docstring)")
    ap.add_argument("--runs", type=int, default=10, help="runs per mode (--preset send-stall)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per mode")
    ap.add_argument("--fault-at", type=float, default=5.0, help="seconds before the broker turns slow")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {MODES}")
    ap.add_argument("--stall-ms", type=float, default=250.0, help="explain every send() at least this long (send-stall)")
    args = ap.parse_args()
    if args.preset == "send-stall":
        args.modes_given = "--modes" in sys.argv
        if "--duration" not in sys.argv:
            args.duration = 20.0
        run_send_stall(args)
        return
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; allowed: {MODES}")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for mode in modes:
        mc = start_mock_cluster(brokers=3)
        try:
            topic = f"slow-broker-{mode}"
            r = _run_confluent(mc, topic, args) if mode == "confluent-kafka" else _run_kproducer(mode, mc, topic, args)
        finally:
            mc.stop()
        results.append(r)
        print(f"{mode}: healthy {r['healthy_rate']:.0f} rec/s, p99 {r['healthy_p99_ms']:.0f} ms", flush=True)
    base = next((r["healthy_rate"] for r in results if r["mode"] == "baseline"), None)
    print()
    print("| mode | healthy rec/s (from the fault on) | vs baseline | healthy p99 ms | min buffer-available MB | BufferExhausted | delivered | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ratio = f"{100 * r['healthy_rate'] / base:.0f}%" if base else "n/a"
        mb = r["min_buffer_available"]
        print(
            f"| {r['mode']} | {r['healthy_rate']:,.0f} | {ratio} | {r['healthy_p99_ms']:,.0f} | "
            f"{'n/a' if mb != mb else f'{mb / 1e6:.1f}'} | {r['buffer_exhausted']:,} | {r['delivered']:,} | {r['failed']:,} |"
        )
    png = OUT / "slow_broker.png"
    _plot(results, args, png)
    (OUT / "slow_broker.json").write_text(json.dumps(results))
    print(f"\nplot: {png}\nraw series: {OUT / 'slow_broker.json'}")


if __name__ == "__main__":
    main()
