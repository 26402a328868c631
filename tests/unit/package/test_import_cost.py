"""Importing kproducer loads only what is used: checked by what is in ``sys.modules`` in a fresh interpreter.

``import kproducer`` loads the package and its version; the public names load their modules on first
use. ``from kproducer import Producer`` loads what every producer needs, and not the network layer
(loaded by the first Producer), asyncio, TLS, SASL, Spark, Arrow, the bulk calls' module
or the metrics exporters. No wall-clock bound here: the measured times are in
benchmarks/RESULTS.md ("Import cost").
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import kproducer

DEFERRED = (
    "asyncio", "ssl", "importlib.metadata", "email", "json", "difflib", "argparse", "kio", "socket",
    "kproducer.network.client", "kproducer.network.protocol", "kproducer.sender", "kproducer.circuit_breaker",
    "crc32c",
    # Loaded when used: TLS and SASL (by a producer configured for them), Spark, Arrow, the
    # bulk calls' module (on their first call), the metrics exporters.
    "kproducer.network.tls", "kproducer.network.sasl", "scramp", "cryptography",
    "kproducer.spark", "pyspark", "pyarrow", "pandas", "numpy",
    "kproducer.coordinator", "kproducer.coordinator_requests", "kproducer.bulk", "kproducer.aio",
    "kproducer.metrics.reporters", "prometheus_client", "opentelemetry",
)


def _modules_after(code: str) -> list[str]:
    probe = f"{code}; import sys; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return out.split()


def test_import_kproducer_loads_the_package_only() -> None:
    loaded = set(_modules_after("import kproducer"))
    assert sorted(m for m in loaded if m.startswith("kproducer")) == ["kproducer", "kproducer._lazy", "kproducer._version"]
    assert "typing" not in loaded


def test_from_kproducer_import_producer_defers_what_it_does_not_need() -> None:
    loaded = set(_modules_after("from kproducer import Producer"))
    assert "kproducer.producer" in loaded
    assert sorted(m for m in DEFERRED if m in loaded) == []


def test_a_producer_without_sasl_or_avro_does_not_load_the_http_client() -> None:
    """The first Producer checks every C extension (the Avro encoder's too) and validates its
    security settings; neither loads the Schema Registry client or the SASL module, whose
    urllib.request brings http.client and email (a larger heap for every full collection)."""
    code = "from kproducer import Producer; p = Producer({'bootstrap.servers': '127.0.0.1:1'}); p.close(0)"
    loaded = set(_modules_after(code))
    assert "kproducer.avro.encoder" in loaded  # the check ran
    unwanted = ("urllib.request", "http.client", "email", "kproducer.avro.registry", "kproducer.network.sasl")
    assert sorted(m for m in unwanted if m in loaded) == []


def test_the_avro_package_loads_its_names_on_first_use() -> None:
    code = "import kproducer.avro as a; import sys; print(a.SchemaRegistryClient.__module__, 'json' in dir(a))"
    loaded = _modules_after("import kproducer.avro")
    assert "kproducer.avro.registry" not in loaded
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["kproducer.avro.registry", "False"]
    with pytest.raises(AttributeError, match="module 'kproducer.avro' has no attribute 'Nope'"):
        import kproducer.avro

        kproducer.avro.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_a_submodule_does_not_load_the_producer() -> None:
    loaded = set(_modules_after("import kproducer.errors, kproducer.structs"))
    assert "kproducer.producer" not in loaded


@pytest.mark.parametrize("name", kproducer.__all__)
def test_every_public_name_resolves_and_is_listed(name: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", f"import kproducer; print(kproducer.{name}.__module__, '{name}' in dir(kproducer))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert out[0].startswith("kproducer.") and out[1] == "True"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'kproducer' has no attribute 'Consumer'"):
        kproducer.Consumer  # type: ignore[attr-defined]  # noqa: B018


def test_the_bulk_calls_are_producer_methods_that_load_their_module_on_first_use() -> None:
    code = (
        "from kproducer import Producer; import sys; "
        "doc = Producer.send_batch.__doc__; "
        "print(Producer.send_batch.__qualname__, Producer.init_transactions.__qualname__, "
        "'kproducer.bulk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["Producer.send_batch", "Producer.init_transactions", "False"]


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
