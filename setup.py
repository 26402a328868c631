"""Builds kproducer's C extensions (``kproducer._speedups``, ``kproducer.network._sockio``,
``kproducer.record._compression_worker``, ``kproducer.avro._avro_encoder``) with the machine's compiler.

Everything else lives in pyproject.toml. A failed compile does not fail the install: the
package installs with its pure-Python implementation (the same results, more CPU per record),
and the build output carries a banner naming each extension that failed and the compiler's
error. At run time ``kproducer.native_available()`` and ``kproducer --version`` say which
implementation runs and why, and a producer that starts without its extensions logs a WARNING
with the cause. Set ``KPRODUCER_REQUIRE_NATIVE=1`` to make a failed compile fail the build
(wheel builds do: a wheel must carry its extensions), and ``KPRODUCER_WERROR=1`` to compile
with -Werror.
"""

from __future__ import annotations

import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


REQUIRE_NATIVE = _flag("KPRODUCER_REQUIRE_NATIVE")
# KPRODUCER_WERROR=1: every warning is an error (the tests and the wheel builds check the C code
# stays warning-free on each supported Python; GCC 14 already refuses implicit declarations).
# Added to each extension's own flags, so the interpreter's (-DNDEBUG, -O3...) are kept.
WERROR = ["-Werror", "-Werror=implicit-function-declaration"] if _flag("KPRODUCER_WERROR") else []
_ERROR_LINES = 12  # of the compiler's output, in the banner (the full output is printed above it)


def _banner(ext_name: str, error: str, compiler_output: str) -> None:
    lines = [line for line in compiler_output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()] or lines
    rule = "!" * 78
    text = [
        rule,
        f"WARNING: kproducer's C extension {ext_name} was NOT built: {error}",
        *(f"    {line}" for line in errors[:_ERROR_LINES]),
        "kproducer installs without it and runs its pure-Python implementation (same results, slower).",
        "Install a C compiler and the Python headers (e.g. gcc and python3-dev) and reinstall to build it;",
        "kproducer.native_available() tells which implementation runs.",
        rule,
    ]
    print("\n".join(text), file=sys.stderr, flush=True)


class OptionalBuildExt(build_ext):
    """Build each extension; on failure, say so loudly and install the pure-Python package."""

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as e:  # no compiler at all
            if REQUIRE_NATIVE:
                raise
            for ext in self.extensions:
                _banner(ext.name, str(e), "")

    def build_extension(self, ext: Extension) -> None:
        # The compiler's messages are kept for the banner by pointing file descriptors 1 and 2 at a
        # temporary file while this extension builds (whatever API setuptools spawns the compiler
        # with), then passed on unchanged.
        with tempfile.TemporaryFile(mode="w+b") as out:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = os.dup(1), os.dup(2)
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            failure: BaseException | None = None
            try:
                super().build_extension(ext)
            except (CCompilerError, ExecError, PlatformError, OSError) as e:
                failure = e
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
            out.seek(0)
            compiler_output = out.read().decode(errors="replace")
        if compiler_output:
            print(compiler_output, end="", file=sys.stderr, flush=True)
        if failure is not None:
            if REQUIRE_NATIVE:
                raise failure
            _banner(ext.name, str(failure), compiler_output)


setup(
    ext_modules=[
        Extension(
            "kproducer._speedups",
            sources=["src/kproducer/_speedups.c"],
            extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wno-unused-parameter", *WERROR],
            # zlib's crc32: librdkafka's consistent partitioners in the send lane (CPython links zlib too).
            libraries=["z"],
        ),
        Extension(
            "kproducer.network._sockio",
            sources=["src/kproducer/network/_sockio.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter", *WERROR],
        ),
        Extension(
            # Opens the system's liblz4/libzstd at run time (dlopen), so no headers are needed here.
            "kproducer.record._compression_worker",
            sources=["src/kproducer/record/_compression_worker.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter", *WERROR],
            libraries=["dl", "pthread"],
        ),
        Extension(
            # Arrow columns to Avro bodies; kproducer.avro.encoder.ReferenceEncoder is its Python twin.
            "kproducer.avro._avro_encoder",
            sources=["src/kproducer/avro/_avro_encoder.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter", *WERROR],
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
