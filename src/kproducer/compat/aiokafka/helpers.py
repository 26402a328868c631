"""aiokafka's ``create_ssl_context`` helper, so that a TLS program's ``from aiokafka.helpers import ...`` switches too."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

__all__ = ["create_ssl_context"]


def create_ssl_context(
    *,
    cafile: Any = None,
    capath: Any = None,
    cadata: Any = None,
    certfile: Any = None,
    keyfile: Any = None,
    password: Callable[[], str | bytes | bytearray] | str | bytes | bytearray | None = None,
) -> ssl.SSLContext:
    """A client SSLContext that verifies the brokers (host name included) against the given CAs, or the
    system's when none is given, and presents ``certfile``/``keyfile`` when given: the standard library's
    ``create_default_context`` and ``load_cert_chain``, as aiokafka's helper builds it."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile, capath=capath, cadata=cadata)
    if certfile is not None:
        context.load_cert_chain(certfile=certfile, keyfile=keyfile, password=password)
    return context
