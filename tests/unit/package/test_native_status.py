"""Which implementation runs, and why: kproducer.native_available(), `kproducer --version`, the start WARNING.

The missing-extension cases run in a child interpreter on a copy of the package whose compiled
modules were removed (or renamed to another Python's tag), as an install without a compiler leaves it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import kproducer
from kproducer.record import c_extension

SRC = Path(kproducer.__file__).parent
from kproducer.record.c_extension import EXTENSIONS  # noqa: E402  (every extension setup.py builds)

# Two producers started in one process, offline (nothing listens on port 1), closed at once.
TWO_PRODUCERS = """
import logging, kproducer
records = []
class Keep(logging.Handler):
    def emit(self, record): records.append(record)
logging.getLogger("kproducer").addHandler(Keep())
logging.getLogger("kproducer").setLevel(logging.INFO)
for _ in range(2):
    kproducer.Producer({"bootstrap.servers": "127.0.0.1:1"}).close(0)
for r in records:
    if "implementation" in r.getMessage():
        print(r.levelname, r.getMessage())
"""


def _env(pure: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KPRODUCER_PURE_PYTHON"}
    if pure:
        env["KPRODUCER_PURE_PYTHON"] = "1"
    return env


def _copy_without_extensions(tmp_path: Path, keep_as: str | None = None) -> Path:
    """The package copied under tmp_path without its compiled modules (renamed to tag ``keep_as`` if given)."""
    root = tmp_path / "site"
    shutil.copytree(SRC, root / "kproducer", ignore=shutil.ignore_patterns("__pycache__"))
    for so in (root / "kproducer").rglob("*.so"):
        if keep_as is None:
            so.unlink()
        else:
            leaf = so.name.split(".")[0]
            so.rename(so.with_name(f"{leaf}.{keep_as}.so"))
    return root


def _run(root: Path, code: str, pure: bool = False) -> subprocess.CompletedProcess[str]:
    env = _env(pure)
    env["PYTHONPATH"] = str(root)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)


def test_native_available_in_this_process() -> None:
    status = kproducer.native_available()
    if c_extension.pure_python_forced():
        assert not status and status.forced
        assert status.reason == "KPRODUCER_PURE_PYTHON=1 asks for the pure-Python implementation"
        assert status.implementation == "pure Python"
    else:  # make test builds the extensions: all of them must load
        assert status, status.reason
        assert status.reason is None and status.implementation == "C extensions"
        assert status.extensions == dict.fromkeys(EXTENSIONS)


def test_missing_extensions_are_named_with_the_real_cause(tmp_path: Path) -> None:
    root = _copy_without_extensions(tmp_path)
    out = _run(root, "import kproducer; s = kproducer.native_available(); print(bool(s)); print(s.reason)").stdout
    available, reason = out.splitlines()
    assert available == "False"
    assert reason.startswith(", ".join(EXTENSIONS) + " are not built: the C compile failed or was skipped")
    assert "circular import" not in reason

    version = _run(root, "import sys; from kproducer.cli import main; sys.argv[0] = 'kproducer'; main(['--version'])")
    assert version.stdout.startswith(f"kproducer {kproducer.__version__} (Python ")
    assert "pure Python: kproducer._speedups, kproducer.network._sockio" in version.stdout
    assert "are not built" in version.stdout


def test_extensions_built_for_another_python_say_so(tmp_path: Path) -> None:
    root = _copy_without_extensions(tmp_path, keep_as="cpython-399-x86_64-linux-gnu")
    reason = _run(root, "import kproducer; print(kproducer.native_available().reason)").stdout.strip()
    assert reason.startswith(", ".join(EXTENSIONS) + " are built for another Python (cpython-399-x86_64-linux-gnu;")
    assert f"this is {sys.implementation.cache_tag}" in reason


def test_a_producer_without_extensions_warns_once_per_process(tmp_path: Path) -> None:
    root = _copy_without_extensions(tmp_path)
    lines = _run(root, TWO_PRODUCERS).stdout.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("WARNING kproducer runs its pure-Python implementation")
    assert "are not built" in lines[0]


def test_a_producer_asked_for_pure_python_says_so_at_info() -> None:
    lines = _run(SRC.parent, TWO_PRODUCERS, pure=True).stdout.splitlines()
    assert lines == [
        "INFO kproducer runs its pure-Python implementation: "
        "KPRODUCER_PURE_PYTHON=1 asks for the pure-Python implementation"
    ]


def test_a_producer_with_its_extensions_says_nothing() -> None:
    assert _run(SRC.parent, TWO_PRODUCERS).stdout == ""


def test_version_line_names_the_implementation() -> None:
    from kproducer.cli import version_line

    line = version_line()
    assert line.startswith(f"kproducer {kproducer.__version__} (Python {sys.version.split()[0]}, ")
    expected = "pure Python: KPRODUCER_PURE_PYTHON=1" if c_extension.pure_python_forced() else "C extensions)"
    assert expected in line
