"""The bounds walk that guards kio's native reader (kproducer.network.bounds).

Valid responses of every schema pass and are walked to their exact end; frames
that declare a length beyond their bytes are refused with ProtocolError instead
of reaching kio's reader, which sizes arrays from the declared count and aborts
the process when asked for gigabytes.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from kproducer.network.bounds import FrameBoundsError, check_response_bounds
from kproducer.network.protocol import CLIENT_VERSIONS, ApiKey, response_class


def _decoded_response_classes() -> list[type]:
    """Every response class this client decodes through kio: each API it speaks, each version it may use."""
    out = []
    for api_key, (low, high) in CLIENT_VERSIONS.items():
        if api_key == ApiKey.PRODUCE:
            continue  # parsed by hand, not by kio's reader
        out.extend(response_class(api_key, v) for v in range(low, high + 1))
    return out


def _register_kio_strategies() -> None:
    """Give hypothesis kio's strategies for its primitive types.

    kio registers them from each phantom type's ``__hypothesis_hook__`` when the type
    is defined, but only if hypothesis was importable then; kproducer imports kio with
    hypothesis hidden (see ``network/protocol.py``), so the hooks are run here.
    """
    from kio.static._phantom import Phantom

    pending = [Phantom]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not Phantom:
            cls.__hypothesis_hook__()


_RESPONSES = _decoded_response_classes()
_register_kio_strategies()  # after the schemas are imported: their phantom types exist now


@pytest.mark.parametrize("cls", _RESPONSES, ids=lambda c: c.__module__.removeprefix("kio.schema."))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_valid_response_is_walked_to_its_exact_end(cls: type, data: st.DataObject) -> None:
    value = data.draw(st.from_type(cls))
    out = io.BytesIO()
    entity_writer(cls)(out, value)
    body = b"\x07" + out.getvalue()  # one leading byte: the walk starts at an offset, as after a header
    check_response_bounds(cls, memoryview(body), 1)
    if len(body) > 1:
        with pytest.raises(FrameBoundsError):
            check_response_bounds(cls, memoryview(body[:-1]), 1)


def test_response_schemas_found() -> None:
    apis = {c.__api_key__ for c in _RESPONSES}
    assert {ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.INIT_PRODUCER_ID} <= apis, apis
    assert len(_RESPONSES) > 30


@pytest.mark.parametrize(
    ("version", "body_hex", "pattern"),
    [
        # Metadata v9 (flexible): throttle, then a compact brokers array declaring 2**32 - 2 elements.
        (9, "00000000" "ffffffff0f", r"array count of 4294967294"),
        # Metadata v1 (legacy): a brokers array declaring 2**31 - 1 elements.
        (1, "7fffffff", r"array count of 2147483647"),
        # Metadata v9: one broker whose host string claims 1000 bytes.
        (9, "00000000" "02" "00000001" "e907", r"string of 1000"),
    ],
)
def test_runaway_lengths_are_a_protocol_error_not_an_abort(version: int, body_hex: str, pattern: str) -> None:
    # In a child process: should the guard ever regress, kio's abort kills the child, not the test run.
    code = textwrap.dedent(
        f"""
        from kproducer.network.protocol import ProtocolError
        from kproducer.network.protocol import ApiKey, decode_response
        try:
            decode_response(ApiKey.METADATA, {version}, memoryview(bytes.fromhex({body_hex!r})), 0)
        except ProtocolError as e:
            print("ProtocolError:", e)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the decoder died (exit {done.returncode}): {done.stderr[-2000:]}"
    assert "ProtocolError: cannot decode METADATA" in done.stdout, done.stdout
    assert __import__("re").search(pattern, done.stdout), done.stdout
