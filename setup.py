"""Builds kproducer's optional C hot path (``kproducer._speedups``, ``kproducer.network._sockio``,
``kproducer.record._compression_worker``, ``kproducer.avro._avro_encoder``) with the machine's compiler.

Everything else lives in pyproject.toml. A failed compile is not fatal: the
pure-Python implementation is the fallback (``kproducer.record.native.AVAILABLE``
tells which one runs).
"""

from __future__ import annotations

import logging

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

log = logging.getLogger(__name__)


class OptionalBuildExt(build_ext):
    """Build the extension, but install the pure-Python package when no compiler works."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any compiler failure means: fall back to pure Python
            log.warning("kproducer: C speedups not built (%s); using the pure-Python path", e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            log.warning("kproducer: C speedups not built (%s); using the pure-Python path", e)


setup(
    ext_modules=[
        Extension(
            "kproducer._speedups",
            sources=["src/kproducer/_speedups.c"],
            extra_compile_args=["-O3", "-std=c99", "-Wall", "-Wno-unused-parameter"],
        ),
        Extension(
            "kproducer.network._sockio",
            sources=["src/kproducer/network/_sockio.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter"],
        ),
        Extension(
            # Opens the system's liblz4/libzstd at run time (dlopen), so no headers are needed here.
            "kproducer.record._compression_worker",
            sources=["src/kproducer/record/_compression_worker.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter"],
            libraries=["dl", "pthread"],
        ),
        Extension(
            # Arrow columns to Avro bodies; kproducer.avro.encoder.ReferenceEncoder is its Python twin.
            "kproducer.avro._avro_encoder",
            sources=["src/kproducer/avro/_avro_encoder.c"],
            extra_compile_args=["-O3", "-std=gnu99", "-Wall", "-Wno-unused-parameter"],
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
