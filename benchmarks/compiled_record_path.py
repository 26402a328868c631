"""Does compiling the record path's Python modules, unchanged, make a batch cheaper?

The issue it answers: the per-batch work (append, batch lifecycle, drain, request
assembly, response handling, completion) is Python, and one way to make it faster would
be to compile the same source (Cython reads ``.py`` files as they are; classes stay Python
classes, so the C send lane's view of them holds). This copies ``src/`` to a temporary
directory, compiles the record path's modules there with Cython (untyped: no
``cython.cclass``, annotations not turned into C types), and runs
``benchmarks/batch_cost.py`` against the interpreted tree and the compiled one in turn.

    .venv/bin/python benchmarks/compiled_record_path.py               # 4 interleaved runs each
    .venv/bin/python benchmarks/compiled_record_path.py --runs 6 --rounds 60

Needs Cython (``pip install cython``) and a C compiler; the build takes a few minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The modules a batch passes through, caller and Sender side.
MODULES = [
    "accumulator/accumulator",
    "accumulator/batch",
    "accumulator/futures",
    "accumulator/buffer_pool",
    "accumulator/incomplete",
    "record/builder",
    "router",
    "sender",
    "producer",
    "partitioner",
    "metrics/stats",
    "metrics/registry",
    "metrics/producer_metrics",
    "network/protocol",
]

_BUILD = """
import sys
from setuptools import setup
from Cython.Build import cythonize

setup(
    name="kproducer-compiled-record-path",
    package_dir={"": "src"},
    ext_modules=cythonize(
        [f"src/kproducer/{m}.py" for m in sys.argv.pop().split(",")],
        compiler_directives={"language_level": 3, "binding": True, "annotation_typing": False},
        quiet=True,
    ),
)
"""


def _batch_cost(tree: Path, rounds: int) -> tuple[float, float]:
    """(caller, Sender) CPU µs per batch of one batch_cost.py run on ``tree``."""
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "batch_cost.py"), "--rounds", str(rounds)],
        capture_output=True, text=True, check=True, cwd=tree,
    ).stdout  # fmt: skip
    m = re.search(r"caller ([\d.]+) \+ Sender ([\d.]+)", out)
    if m is None:
        raise SystemExit(f"batch_cost.py printed no figures:\n{out}")
    return float(m.group(1)), float(m.group(2))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4, help="runs of each tree, interleaved")
    ap.add_argument("--rounds", type=int, default=60, help="batch_cost.py --rounds")
    args = ap.parse_args()
    try:
        import Cython
    except ImportError:
        raise SystemExit("Cython is needed: .venv/bin/pip install cython") from None
    with tempfile.TemporaryDirectory(prefix="kproducer-compiled-") as tmp:
        tree = Path(tmp)
        for part in ("src", "benchmarks", "tests"):
            shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy(ROOT / "setup.py", tree / "setup.py")
        shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
        env = {**os.environ, "PYTHONPATH": str(tree / "src")}
        print(
            f"building the C extensions and compiling {len(MODULES)} modules with Cython {Cython.__version__} ..."
        )
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tree, env=env, check=True,
                       capture_output=True)  # fmt: skip
        (tree / "compile_record_path.py").write_text(_BUILD)
        subprocess.run(
            [sys.executable, "compile_record_path.py", "build_ext", "--inplace", "-q", ",".join(MODULES)],
            cwd=tree, env=env, check=True, capture_output=True,
        )  # fmt: skip
        compiled = [m for m in MODULES if list((tree / "src" / "kproducer").glob(f"{m}.*.so"))]
        if len(compiled) != len(MODULES):
            raise SystemExit(f"only {compiled} were compiled")
        # The interpreted tree is this checkout itself (its own C extensions, built by make).
        results: dict[str, list[tuple[float, float]]] = {"interpreted": [], "compiled": []}
        for _ in range(args.runs):
            results["interpreted"].append(_batch_cost(ROOT, args.rounds))
            results["compiled"].append(_batch_cost(tree, args.rounds))
    print(
        f"benchmarks/batch_cost.py --rounds {args.rounds}, {args.runs} runs of each, interleaved; CPU µs per batch"
    )
    print("| tree | caller | Sender | total (median) |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        callers = [c for c, _s in runs]
        senders = [s for _c, s in runs]
        totals = [c + s for c, s in runs]
        print(f"| {name} | {min(callers):.1f}–{max(callers):.1f} | {min(senders):.1f}–{max(senders):.1f} "
              f"| {min(totals):.1f}–{max(totals):.1f} ({statistics.median(totals):.1f}) |")  # fmt: skip
    ratio = statistics.median(c + s for c, s in results["compiled"]) / statistics.median(
        c + s for c, s in results["interpreted"]
    )
    print(f"compiled / interpreted, median total: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
