"""Import cost of kproducer next to confluent-kafka: the median of ``python -X importtime`` over fresh interpreters.

Each case is ``LABEL=PYTHONPATH::STATEMENT`` (an empty PYTHONPATH keeps the environment's); the
cases run interleaved, RUNS times each (default 15), ``.pyc`` files already written. The figure is
the sum of the cumulative times of the statement's top-level imports (what ``-X importtime``
prints after interpreter start-up), in milliseconds.

    python benchmarks/import_cost.py "confluent_kafka=::import confluent_kafka" \\
        "import kproducer=src::import kproducer" "from kproducer import Producer=src::from kproducer import Producer"
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys

_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$")


def import_ms(path: str, statement: str) -> float:
    env = dict(os.environ)
    env.pop("KPRODUCER_PURE_PYTHON", None)
    if path:
        env["PYTHONPATH"] = path
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], env=env, capture_output=True, text=True, check=True
    ).stderr
    lines = err.splitlines()
    start = max(i for i, line in enumerate(lines) if line.rstrip().endswith("| site")) + 1
    total = 0
    for line in lines[start:]:
        m = _LINE.match(line)
        if m:  # a top-level import (no indent): its cumulative time covers its children
            total += int(m.group(1))
    return total / 1000


def main(argv: list[str]) -> int:
    runs = int(os.environ.get("RUNS", "15"))
    cases = [(label, *spec.split("::", 1)) for label, spec in (a.split("=", 1) for a in argv)]
    results: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    for _ in range(runs):
        for label, path, statement in cases:
            results[label].append(import_ms(path, statement))
    print(f"load average before the last run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {runs} runs each")
    for label, values in results.items():
        print(
            f"{label}: median {statistics.median(values):.1f} ms "
            f"(min {min(values):.1f}, max {max(values):.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
