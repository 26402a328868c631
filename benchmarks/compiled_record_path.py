"""Does compiling the record path's Python modules, unchanged, make a batch cheaper?

The issue it answers: the per-batch work (append, batch lifecycle, drain, request
assembly, response handling, completion) is Python, and one way to make it faster would
be to compile the same source. This copies ``src/`` to a temporary directory, compiles
the record path's modules there and runs ``benchmarks/batch_cost.py`` against the
interpreted tree and the compiled one in turn, interleaved.

``--compiler cython`` (the default): Cython reads the ``.py`` files as they are, untyped
(no ``cython.cclass``, annotations not turned into C types); classes stay Python classes,
so the C send lane's view of them holds and both trees run with the C speedups.

``--compiler mypyc``: mypyc compiles the modules together, type-checked with the
project's mypy configuration, into native classes (C fields, direct method calls): typed
native classes from the one source. The C send lane appends through the C types the
batch, builder and future build on, and mypyc's native classes cannot build on those (the
compiled copy builds on their Python twins), so BOTH trees run with
``KPRODUCER_PURE_PYTHON=1`` (no C extension in either); a third row runs the interpreted tree as shipped (C extensions and lane on) in the
same loop. mypyc does not take every construct this code uses; ``_mypyc_patch`` makes the
edits listed above it to the temporary copy (never to ``src/``), each printed with its reason.

    .venv/bin/python benchmarks/compiled_record_path.py               # 4 interleaved runs each
    .venv/bin/python benchmarks/compiled_record_path.py --runs 6 --rounds 60
    .venv/bin/python benchmarks/compiled_record_path.py --compiler mypyc --runs 4
    .venv/bin/python benchmarks/compiled_record_path.py --compiler mypyc --keep /tmp/t --runs 0  # build only

Needs Cython (``pip install cython``) or mypyc (it comes with mypy) and a C compiler; the
build takes a few minutes.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
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

_CYTHON_BUILD = """
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

# The modules are compiled as one group (mypyc type-checks them together, with the project's
# mypy configuration, and emits one shared library plus a small extension per module); the
# other kproducer modules stay interpreted.
_MYPYC_BUILD = """
import sys
from setuptools import setup
from mypyc.build import mypycify

setup(
    name="kproducer-compiled-record-path",
    package_dir={"": "src"},
    ext_modules=mypycify(
        ["--config-file", "pyproject.toml", *[f"src/kproducer/{m}.py" for m in sys.argv.pop().split(",")]],
        opt_level="3",
    ),
)
"""

#: ``@mypyc_attr(...)`` given to classes: ``native_class=False`` (compiled methods in a Python
#: class) where a native class cannot inherit from the base; ``allow_interpreted_subclasses=True``
#: where a module left interpreted subclasses the class (else: TypeError "interpreted classes
#: cannot inherit from compiled" when the subclass is made).
_MYPYC_ATTRS = [
    ("accumulator/futures", "_StdlibWaiters", "native_class=False"),  # subclasses list
    ("accumulator/futures", "RecordFuture", "native_class=False"),  # subclasses concurrent.futures.Future
    # RecordFuture's fields base: a non-extension class may not inherit from a native one.
    ("accumulator/futures", "PyFutureRecordMetadata", "native_class=False"),
    ("accumulator/futures", "ProduceRequestResult", "allow_interpreted_subclasses=True"),  # parked_records
    ("network/protocol", "ProtocolError", "allow_interpreted_subclasses=True"),  # network.connection
    (
        "producer",
        "Producer",
        "allow_interpreted_subclasses=True",
    ),  # compat.confluent_kafka.SerializingProducer
]

_FUTURE_REPR = (
    '        return f"RecordFuture({self._batch_result.topic_partition}, '
    'relative_offset={self.relative_offset}, {state})"\n'
)

_FUTURES_MODULE_LEVEL = """

def _always(error: BaseException) -> ErrorFn:
    return lambda _index: error


def _firer(fut: RecordFuture, fn: Callable[[RecordFuture], Any]) -> Callable[[], None]:
    def fire() -> None:
        nxt = fut._forward()
        if nxt is not None:
            nxt.add_done_callback(lambda _f: fn(fut))
        else:
            fn(fut)

    return fire


def _notifier(waiters: _StdlibWaiters) -> Callable[[RecordFuture], None]:
    def notify(fut: RecordFuture) -> None:
        failed = fut.record_error() is not None
        with _STDLIB_CONDITION:
            waiters.notified = True
            for waiter in list(waiters):
                if failed:
                    waiter.add_exception(fut)
                else:
                    waiter.add_result(fut)
            _STDLIB_CONDITION.notify_all()

    return notify


def _condition(self: RecordFuture) -> threading.Condition:
    return _STDLIB_CONDITION


def _state(self: RecordFuture) -> str:
    return _FINISHED if self._stdlib_waiter_list().notified else _PENDING


def _waiters(self: RecordFuture) -> _StdlibWaiters:
    return self._stdlib_waiter_list()


setattr(RecordFuture, "_condition", property(_condition))
setattr(RecordFuture, "_state", property(_state))
setattr(RecordFuture, "_waiters", property(_waiters))
"""

#: (module, old text, new text, why): the edits to the temporary copy that mypyc needs. An edit
#: to a module that is not compiled is made when the module in _MYPYC_EDIT_FOR is.
_MYPYC_EDITS = [
    (
        "accumulator/accumulator",
        """        self._routing: CircuitBreakRoutingLike | None = (
            circuit_break_manager if isinstance(circuit_break_manager, CircuitBreakRoutingLike) else None
        )
""",
        """        routing: Any = circuit_break_manager
        self._routing: CircuitBreakRoutingLike | None = (
            routing if isinstance(routing, CircuitBreakRoutingLike) else None
        )
""",
        "RecordAccumulator narrows its breaker to CircuitBreakRoutingLike (a runtime-checkable Protocol) from "
        "Any: mypyc typed the value narrowed from CircuitBreakManagerLike as None and raised TypeError "
        '"None object expected; got CircuitBreakManager" for every producer with a circuit breaker',
    ),
    (
        "producer",
        "live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()\n",
        "live_producers: set[Producer] = set()\n",
        "live_producers holds producers strongly (a native class cannot be weakly referenced, and "
        "making Producer non-native hits the closure bug below): a producer never closed stays in it",
    ),
    (
        "metrics/reporters",
        "self._sources: dict[int, tuple[str, weakref.ref[Metrics]]] = {}",
        "self._sources: dict[int, tuple[str, Any]] = {}",
        "the reporters' registry of Metrics holds them strongly (the same reason)",
    ),
    (
        "metrics/reporters",
        "self._sources[token] = (client_id, weakref.ref(metrics))",
        "self._sources[token] = (client_id, lambda: metrics)",
        "the same",
    ),
    (
        "partitioner",
        "@runtime_checkable\nclass Partitioner(Protocol):\n",
        "class Partitioner(Protocol):\n",
        "Partitioner no longer @runtime_checkable (mypyc compiles a Protocol into a class typing refuses "
        "to make runtime-checkable: TypeError at import; nothing in src/ tests isinstance against it)",
    ),
    (
        "accumulator/futures",
        "    get = result\n",
        "    def get(self, timeout: float | None = None) -> RecordMetadata:\n        return self.result(timeout)\n",
        "RecordFuture.get made a method (a class-body alias of a method in a non-native class fails at import "
        "with KeyError: 'result')",
    ),
    (
        "accumulator/futures",
        "import concurrent.futures\n",
        "import concurrent.futures\nimport concurrent.futures._base\n",
        "concurrent.futures._base imported by name (mypyc's C for the subclass of concurrent.futures.Future "
        "refers to that module without declaring it: a C compile error otherwise)",
    ),
    (
        "accumulator/futures",
        "result.set(NO_OFFSET, NO_TIMESTAMP, lambda _index: error)",
        "result.set(NO_OFFSET, NO_TIMESTAMP, _always(error))",
        "RecordFuture.failed's lambda moved to a module function (a closure in a method of a non-native "
        "class is an internal mypyc error)",
    ),
    (
        "accumulator/futures",
        """        def fire() -> None:
            nxt = self._forward()
            if nxt is not None:
                # The record moved to a split batch: wait for that one instead.
                nxt.add_done_callback(lambda _f: fn(self))
            else:
                fn(self)
""",
        "        fire = _firer(self, fn)\n",
        "RecordFuture.add_done_callback's closure moved to a module function (the same)",
    ),
    (
        "accumulator/futures",
        """        def notify(fut: RecordFuture) -> None:
            failed = fut.record_error() is not None
            with _STDLIB_CONDITION:
                waiters.notified = True
                for waiter in list(waiters):
                    if failed:
                        waiter.add_exception(fut)
                    else:
                        waiter.add_result(fut)
                _STDLIB_CONDITION.notify_all()
""",
        "        notify = _notifier(waiters)\n",
        "RecordFuture._stdlib_waiter_list's closure moved to a module function (the same)",
    ),
    (
        "accumulator/futures",
        """    if not TYPE_CHECKING:  # the base declares these as plain attributes; here they are computed

        @property
        def _condition(self) -> threading.Condition:
            return _STDLIB_CONDITION

        @property
        def _state(self) -> str:
            # FINISHED only once the waiters were told (see _StdlibWaiters); callers hold _condition.
            return _FINISHED if self._stdlib_waiter_list().notified else _PENDING

        @property
        def _waiters(self) -> _StdlibWaiters:
            return self._stdlib_waiter_list()
""",
        "",
        "RecordFuture's `if not TYPE_CHECKING:` properties set on the class after it is made (an if "
        "statement in a class body is unsupported, and mypyc would drop the branch mypy sees as unreachable)",
    ),
    (
        "accumulator/futures",
        _FUTURE_REPR,
        _FUTURE_REPR + _FUTURES_MODULE_LEVEL,
        "the module functions the edits above use",
    ),
    (
        "record/builder",
        """        self = cls.__new__(cls)
        ratio = 1.0 if ratio_estimator is None else _initial_ratio(ratio_estimator, topic, compression)
        self._set_state(
            buffer, 2, compression, compression_level, write_limit, RECORD_BATCH_OVERHEAD, topic, ratio_estimator, ratio
        )
        return self
""",
        """        ratio = 1.0 if ratio_estimator is None else _initial_ratio(ratio_estimator, topic, compression)
        return cls(
            buffer, compression=compression, compression_level=compression_level, write_limit=write_limit,
            estimated_compression_ratio=ratio, topic=topic, ratio_estimator=ratio_estimator,
        )
""",
        "MemoryRecordsBuilder.for_batch calls the checked constructor (cls.__new__(cls) is unsupported on a "
        "native class; the checks it adds per batch count against the compiled tree)",
    ),
    (
        "producer",
        "            count = cluster.partition_count(topic)\n",
        "            count: int | None = cluster.partition_count(topic)\n",
        "Producer._wait_on_metadata's `count` annotated (mypyc infers it as None from the narrowing after "
        "`if count is not None: return`)",
    ),
]

_MYPYC_EDIT_FOR = {"metrics/reporters": "metrics/registry"}

#: ``--c-helpers``: the send lane off (the Python send() runs) while the other C extensions
#: (record encoding, CRC32C, sockets) stay on, in the compiled tree and in an interpreted copy.
_NO_LANE = (
    "        from kproducer.record import native\n\n        # librdkafka's hashing policies",
    "        return None  # compiled_record_path.py --c-helpers\n"
    "        from kproducer.record import native\n\n        # librdkafka's hashing policies",
)


def _lane_off(tree: Path) -> None:
    path = tree / "src" / "kproducer" / "producer.py"
    text = path.read_text()
    if text.count(_NO_LANE[0]) != 1:
        raise SystemExit("--c-helpers: Producer._make_send_lane is not as expected")
    path.write_text(text.replace(*_NO_LANE))


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _loop_exits(block: ast.With) -> list[ast.Break | ast.Continue]:
    """The break/continue statements in ``block`` that leave it for a loop around it."""
    found: list[ast.Break | ast.Continue] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.Break, ast.Continue)):
            found.append(node)
        elif isinstance(node, _LOOPS):
            for stmt in node.orelse:  # a loop's else clause is outside that loop
                walk(stmt)
        elif not isinstance(node, _SCOPES):
            for child in ast.iter_child_nodes(node):
                walk(child)

    for stmt in block.body:
        walk(stmt)
    return found


def _hoist_loop_exits(source: str) -> tuple[str, int]:
    """``source`` with no break/continue leaving a ``with`` block, and how many blocks were rewritten.

    mypyc rejects "continue/break inside try/finally block", and a ``with`` block is one. Each such
    block's body is wrapped in a one-pass ``while True:`` loop; a break/continue that left the
    block sets a flag and leaves that loop instead, and the flag is acted on after the block (so
    the lock is released first, as before). Innermost blocks first.
    """
    rewritten = 0
    while True:
        offending = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.With) and _loop_exits(n)]
        if not offending:
            return source, rewritten
        block = max(offending, key=lambda n: n.lineno)
        rewritten += 1
        flag = f"_mypyc_exit_{rewritten}"
        lines = source.splitlines(keepends=True)
        for stmt in sorted(_loop_exits(block), key=lambda s: (s.lineno, s.col_offset), reverse=True):
            raw = lines[stmt.lineno - 1].encode()
            code = 1 if isinstance(stmt, ast.Continue) else 2
            raw = raw[: stmt.col_offset] + f"{flag} = {code}; break".encode() + raw[stmt.end_col_offset :]
            lines[stmt.lineno - 1] = raw.decode()
        indent = lines[block.lineno - 1][: block.col_offset]
        first, last = block.body[0].lineno - 1, block.end_lineno or block.lineno
        lines[block.lineno - 1 : last] = [
            f"{indent}{flag} = 0\n",
            *lines[block.lineno - 1 : first],
            f"{indent}    while True:\n",
            *["    " + line if line.strip() else line for line in lines[first:last]],
            f"{indent}        break\n",
            f"{indent}if {flag} == 1:\n{indent}    continue\n",
            f"{indent}if {flag} == 2:\n{indent}    break\n",
        ]
        source = "".join(lines)


def _mypyc_patch(tree: Path, modules: list[str]) -> list[str]:
    """Edit the temporary copy for mypyc (the lists above); returns what was done."""
    done = []
    for module, cls, attrs in _MYPYC_ATTRS:
        if module not in modules:
            continue
        path = tree / "src" / "kproducer" / f"{module}.py"
        text, n = re.subn(
            rf"^class {cls}\b", f"@_mypyc_attr({attrs})\nclass {cls}", path.read_text(), flags=re.M
        )
        if n != 1:
            raise SystemExit(f"mypyc patch: no class {cls} in {module}")
        if "import mypyc_attr as _mypyc_attr" not in text:
            text = text.replace(
                "from __future__ import annotations\n",
                "from __future__ import annotations\n\nfrom mypy_extensions import mypyc_attr as _mypyc_attr\n",
                1,
            )
        path.write_text(text)
        done.append(f"{module}.{cls}: @mypyc_attr({attrs})")
    for module, old, new, why in _MYPYC_EDITS:
        if _MYPYC_EDIT_FOR.get(module, module) not in modules:
            continue
        path = tree / "src" / "kproducer" / f"{module}.py"
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(
                f"mypyc patch: the text to replace is not in {module} exactly once: {old[:70]!r}"
            )
        path.write_text(text.replace(old, new))
        done.append(f"{module}: {why}")
    for module in modules:
        path = tree / "src" / "kproducer" / f"{module}.py"
        text, n = _hoist_loop_exits(path.read_text())
        if n:
            path.write_text(text)
            done.append(
                f"{module}: {n} with-block(s) left by break/continue rewritten (unimplemented in mypyc)"
            )
        text, n = _TWIN_CHOICE.subn(lambda m: textwrap.dedent(m.group(1)), path.read_text())
        if n:
            path.write_text(text)
            done.append(
                f"{module}: the Python twins of the send lane's C types chosen outright (mypyc compiles only "
                "the TYPE_CHECKING branch and raises in the other; a native class cannot build on a C type)"
            )
    return done


#: ``if TYPE_CHECKING: X = PyX ... else: X = c.X if c is not None else PyX``: the choice between a
#: C type and its Python twin that the Python classes build on.
_TWIN_CHOICE = re.compile(r"^if TYPE_CHECKING:\n((?:    \w+ = Py\w+\n)+)else:\n(?:    .*\n)+", re.M)


def _batch_cost(tree: Path, rounds: int, extra: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(caller, Sender) CPU µs per batch of one batch_cost.py run on ``tree``."""
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / "batch_cost.py"), "--rounds", str(rounds), *extra],
        capture_output=True, text=True, check=True, cwd=tree, env=env,
    ).stdout  # fmt: skip
    m = re.search(r"caller ([\d.]+) \+ Sender ([\d.]+)", out)
    if m is None:
        raise SystemExit(f"batch_cost.py printed no figures:\n{out}")
    return float(m.group(1)), float(m.group(2))


def _copy(tree: Path, lane_off: bool, env: dict[str, str]) -> None:
    """This checkout's sources, tests and benchmarks copied to ``tree``, its C extensions built there."""
    for part in ("src", "benchmarks", "tests"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "setup.py", tree / "setup.py")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    if lane_off:
        _lane_off(tree)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tree, env=env, check=True,
                   capture_output=True)  # fmt: skip


def _build(
    tree: Path, compiler: str, modules: list[str], env: dict[str, str], lane_off: bool = False
) -> list[str]:
    """Copy this checkout to ``tree`` and compile ``modules`` there; returns the patch steps taken."""
    _copy(tree, lane_off, env)
    if compiler == "cython":
        import Cython

        version, script, patched = f"Cython {Cython.__version__}", _CYTHON_BUILD, []
    else:
        from mypy.version import __version__ as mypy_version

        version, script, patched = f"mypyc (mypy {mypy_version})", _MYPYC_BUILD, _mypyc_patch(tree, modules)
    print(f"compiling {len(modules)} modules with {version} ...", flush=True)
    (tree / "compile_record_path.py").write_text(script)
    built = subprocess.run(
        [sys.executable, "compile_record_path.py", "build_ext", "--inplace", "-q", ",".join(modules)],
        cwd=tree, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if built.returncode != 0:
        raise SystemExit(f"the {compiler} build failed:\n{built.stdout[-8000:]}\n{built.stderr[-4000:]}")
    compiled = [m for m in modules if list((tree / "src" / "kproducer").glob(f"{m}.*.so"))]
    if compiled != modules:
        raise SystemExit(f"only {compiled} were compiled")
    return patched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compiler", choices=("cython", "mypyc"), default="cython")
    ap.add_argument("--modules", default=",".join(MODULES), help="the modules to compile, comma-separated")
    ap.add_argument("--runs", type=int, default=4, help="runs of each tree, interleaved")
    ap.add_argument("--rounds", type=int, default=60, help="batch_cost.py --rounds")
    ap.add_argument("--records-per-batch", type=int, default=None, help="batch_cost.py --records-per-batch")
    ap.add_argument(
        "--keep", type=Path, default=None, metavar="DIR", help="build the compiled tree in DIR, keep it"
    )
    ap.add_argument(
        "--c-helpers",
        action="store_true",
        help="mypyc: the send lane off but the other C extensions on, in the compiled tree and an interpreted copy",
    )
    args = ap.parse_args()
    if args.c_helpers and args.compiler != "mypyc":
        ap.error("--c-helpers is for --compiler mypyc (the Cython build keeps the lane in both trees)")
    modules = args.modules.split(",")
    try:
        if args.compiler == "cython":
            import Cython  # noqa: F401
        else:
            import mypyc  # noqa: F401
    except ImportError:
        raise SystemExit(f"{args.compiler} is needed: .venv/bin/pip install "
                         f"{'cython' if args.compiler == 'cython' else 'mypy'}") from None  # fmt: skip
    # mypyc's native classes have no slots at the offsets the C send lane writes: no C extension
    # in either tree (or, with --c-helpers, no lane in either), so that the two differ only in
    # the compiled modules.
    lane_off = args.compiler == "mypyc"
    pure = lane_off and not args.c_helpers
    run_env = {**os.environ, **({"KPRODUCER_PURE_PYTHON": "1"} if pure else {})}
    extra = [] if args.records_per_batch is None else ["--records-per-batch", str(args.records_per_batch)]
    compiled_name = f"compiled ({args.compiler})"
    results: dict[str, list[tuple[float, float]]] = {"interpreted": [], compiled_name: []}
    if lane_off:
        # Where the product stands today: the interpreted tree with its C extensions and send lane.
        results["interpreted, C speedups and send lane on"] = []
    with tempfile.TemporaryDirectory(prefix="kproducer-compiled-") as tmp:
        tree = Path(tmp) if args.keep is None else args.keep
        tree.mkdir(parents=True, exist_ok=True)
        patched = _build(
            tree, args.compiler, modules, {**os.environ, "PYTHONPATH": str(tree / "src")}, args.c_helpers
        )
        for step in patched:
            print(f"  patched in the copy: {step}")
        # The interpreted tree is this checkout itself (its own C extensions, built by make), or
        # with --c-helpers an interpreted copy with the same lane edit.
        interpreted = ROOT
        if args.c_helpers:
            interpreted = Path(tmp) / "interpreted"
            _copy(interpreted, True, {**os.environ, "PYTHONPATH": str(interpreted / "src")})
        for _ in range(args.runs):
            results["interpreted"].append(_batch_cost(interpreted, args.rounds, extra, run_env))
            results[compiled_name].append(_batch_cost(tree, args.rounds, extra, run_env))
            if lane_off:
                results["interpreted, C speedups and send lane on"].append(
                    _batch_cost(ROOT, args.rounds, extra, dict(os.environ))
                )
    if not args.runs:
        return 0
    if pure:
        mode = "KPRODUCER_PURE_PYTHON=1 in both trees (no C send lane) unless said"
    elif lane_off:
        mode = "send lane off, the other C extensions on, in both trees unless said"
    else:
        mode = "C speedups on in both"
    print(f"benchmarks/batch_cost.py --rounds {args.rounds} {' '.join(extra)}, {args.runs} runs of each, "
          f"interleaved; CPU µs per batch; {mode}")  # fmt: skip
    print(f"compiled modules: {', '.join(modules)}")
    print("| tree | caller (median) | Sender (median) | total (median) |")
    print("|---|---:|---:|---:|")
    for name, runs in results.items():
        cells = []
        for figures in ([c for c, _s in runs], [s for _c, s in runs], [c + s for c, s in runs]):
            cells.append(f"{min(figures):.1f}–{max(figures):.1f} ({statistics.median(figures):.1f})")
        print(f"| {name} | {' | '.join(cells)} |")
    totals = {name: statistics.median(c + s for c, s in runs) for name, runs in results.items()}
    print(f"compiled / interpreted, median total: {totals[compiled_name] / totals['interpreted']:.2f}")
    if lane_off:
        lane = totals["interpreted, C speedups and send lane on"]
        print(f"compiled / interpreted with C speedups and lane, median total: {totals[compiled_name] / lane:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
