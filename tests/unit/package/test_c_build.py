"""The C extensions build warning-free on this interpreter, and a failed build is loud but not fatal.

`make test` runs the unit suite on every Python the machine has (3.11, 3.12, 3.13), so these
builds are checked on each: -Werror with -Werror=implicit-function-declaration (GCC 14's default)
catches a private CPython function a newer Python moved out of its public headers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from kproducer.record.c_extension import EXTENSIONS  # noqa: E402  (every extension setup.py builds)


def _build(
    tmp_path: Path, cflags: str | None = None, require_native: bool = False, werror: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KPRODUCER_REQUIRE_NATIVE", "KPRODUCER_WERROR", "CFLAGS")}
    if cflags is not None:
        env["CFLAGS"] = cflags
    if require_native:
        env["KPRODUCER_REQUIRE_NATIVE"] = "1"
    if werror:
        env["KPRODUCER_WERROR"] = "1"
    return subprocess.run(
        [sys.executable, "setup.py", *([] if werror else ["-q"]), "build_ext", "-b", str(tmp_path / "lib"), "-t", str(tmp_path / "tmp")],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )


def _built(tmp_path: Path) -> list[str]:
    lib = tmp_path / "lib"
    return sorted(".".join(p.relative_to(lib).with_suffix("").with_suffix("").parts) for p in lib.rglob("*.so"))


def test_every_extension_builds_with_werror(tmp_path: Path) -> None:
    r = _build(tmp_path, require_native=True, werror=True)
    assert r.returncode == 0, r.stderr
    assert "-Werror=implicit-function-declaration" in r.stdout + r.stderr  # the flags were used
    assert _built(tmp_path) == sorted(EXTENSIONS), r.stderr
    assert "NOT built" not in r.stderr


def test_a_failed_compile_names_the_extension_and_the_error_and_still_installs(tmp_path: Path) -> None:
    r = _build(tmp_path, "-include /nonexistent/kproducer-test.h")
    assert r.returncode == 0, r.stderr
    assert _built(tmp_path) == []
    for name in EXTENSIONS:
        assert f"WARNING: kproducer's C extension {name} was NOT built" in r.stderr
    # The compiler's own error line, quoted in the banner (indented), not only the failed command.
    assert any(line.startswith("    ") and "kproducer-test.h" in line for line in r.stderr.splitlines()), r.stderr
    assert "kproducer.native_available() tells which implementation runs." in r.stderr


def test_require_native_turns_a_failed_compile_into_a_failed_build(tmp_path: Path) -> None:
    r = _build(tmp_path, "-include /nonexistent/kproducer-test.h", require_native=True)
    assert r.returncode != 0
    assert "/nonexistent/kproducer-test.h" in r.stderr
