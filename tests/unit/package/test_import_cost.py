"""``import kproducer`` stays cheap: the network layer, asyncio, ssl and importlib.metadata load when needed.

Checked by what is in ``sys.modules`` after the import in a fresh interpreter (not by a wall-clock
bound); the measured times are in docs/operability.md.
"""

from __future__ import annotations

import subprocess
import sys

DEFERRED = ("asyncio", "ssl", "importlib.metadata", "email", "json", "difflib", "argparse", "kio", "socket",
            "kproducer.network.client", "kproducer.network.protocol", "kproducer.sender", "kproducer.circuit_breaker", "crc32c")


def _modules_after(code: str) -> list[str]:
    probe = f"{code}; import sys; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return out.split()


def test_import_kproducer_defers_heavy_modules() -> None:
    loaded = set(_modules_after("import kproducer"))
    assert "kproducer.producer" in loaded
    assert sorted(m for m in DEFERRED if m in loaded) == []


def test_crc32c_extension_is_loaded_without_its_package_metadata() -> None:
    loaded = set(_modules_after("import kproducer.record.builder"))
    assert "crc32c._crc32c" in loaded
    assert "importlib.metadata" not in loaded
    # The extension computes the Castagnoli CRC (RFC 3720's test vector: 32 zero bytes).
    from kproducer.record.crc import crc32c

    assert crc32c(bytes(32)) == 0x8A9136AA


def test_a_later_import_of_the_crc32c_package_still_works() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import kproducer.record.builder, crc32c; print(crc32c.crc32c(b'123456789'))"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert int(out) == 0xE3069283  # the standard check value of CRC-32C
