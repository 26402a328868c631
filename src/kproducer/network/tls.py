"""The TLS side of ``security.protocol=SSL`` / ``SASL_SSL``: one ``ssl.SSLContext`` per producer.

Built once from the ``ssl.*`` keys (Java's names, librdkafka's as aliases) and handed to the
selector, which wraps each socket with it and drives the handshake by readiness. Every file is read
here, at construction, so a missing file, a wrong key password or a JKS store fails at once with a
ConfigError naming the key, not later inside the I/O thread.

Python's ``ssl`` module loads PEM only; PKCS12 stores are converted in memory with
``cryptography`` (installed with the ``tls`` extra). A client key and certificate given inline or
from PKCS12 reach OpenSSL through a private temporary file that is removed right after loading,
since ``SSLContext.load_cert_chain`` accepts only paths.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from kproducer.common.loader import load_object
from kproducer.errors import ConfigError

__all__ = ["build_ssl_context", "describe_tls_error"]

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _jks_error(key: str, path: str | None) -> ConfigError:
    where = f" ({path})" if path else ""
    return ConfigError(
        f"{key}{where} is a JKS keystore, which Python's ssl module cannot read; convert it to PKCS12 "
        f"with: keytool -importkeystore -srckeystore FILE.jks -destkeystore FILE.p12 -deststoretype PKCS12, "
        f"then set the store type to PKCS12 (or export PEM with openssl pkcs12 -in FILE.p12 -out FILE.pem)"
    )


def _read(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise ConfigError(f"{key} {path!r} cannot be read: {e.strerror or e}") from e


def _secret(value: Any) -> str | None:
    return None if value is None else str(value.value if hasattr(value, "value") else value)


def _pkcs12(key: str, data: bytes, password: str | None, path: str) -> tuple[Any, Any, list[Any]]:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError as e:  # pragma: no cover - the tls extra installs it
        raise ConfigError(
            f"{key} is PKCS12, which needs the 'cryptography' package: pip install 'kproducer[tls]'"
        ) from e
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password is not None else None)
    except ValueError as e:
        raise ConfigError(
            f"{key} {path!r} cannot be opened as PKCS12 (wrong password, or not a PKCS12 file): {e}"
        ) from e


def _pem_certs(certs: list[Any]) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A 0600 file holding ``text`` (key material) for as long as OpenSSL needs to read it."""
    fd, path = tempfile.mkstemp(prefix="kproducer-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _load_trust(ctx: ssl.SSLContext, cfg: Any) -> None:
    location = cfg.ssl_truststore_location
    inline = _secret(cfg.ssl_truststore_certificates)
    store_type = cfg.ssl_truststore_type
    if location is None and inline is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    if inline is not None:
        try:
            ctx.load_verify_locations(cadata=inline)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"ssl.truststore.certificates is not valid PEM certificates: {e}") from e
    if location is None:
        return
    data = _read("ssl.truststore.location", location)
    if store_type == "JKS" or data.startswith(_JKS_MAGIC):
        raise _jks_error("ssl.truststore.location", location)
    if store_type == "PKCS12":
        _key, cert, extra = _pkcs12(
            "ssl.truststore.location", data, _secret(cfg.ssl_truststore_password), location
        )
        certs = ([cert] if cert is not None else []) + list(extra or [])
        if not certs:
            raise ConfigError(f"ssl.truststore.location {location!r} holds no certificate")
        ctx.load_verify_locations(cadata=_pem_certs(certs))
        return
    try:
        ctx.load_verify_locations(cadata=data.decode("ascii", errors="replace"))
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(
            f"ssl.truststore.location {location!r} holds no PEM certificate (for PKCS12 set "
            f"ssl.truststore.type=PKCS12): {e}"
        ) from e


def _load_identity(ctx: ssl.SSLContext, cfg: Any) -> None:
    location = cfg.ssl_keystore_location
    key_location = cfg.ssl_key_location
    chain = cfg.ssl_keystore_certificate_chain
    inline_key = _secret(cfg.ssl_keystore_key)
    key_password = _secret(cfg.ssl_key_password)
    if location is None and chain is None:
        if key_location is not None or inline_key is not None:
            raise ConfigError(
                "a client key is set (ssl.key.location or ssl.keystore.key) without its certificate "
                "(ssl.keystore.location / ssl.certificate.location, or ssl.keystore.certificate.chain)"
            )
        return
    if location is not None and chain is not None:
        raise ConfigError("set ssl.keystore.location or ssl.keystore.certificate.chain, not both")
    if chain is not None:
        if inline_key is None:
            raise ConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key (the private key, PEM)")
        with _private_file(chain + "\n" + inline_key) as path:
            _load_chain(ctx, "ssl.keystore.key", path, None, key_password)
        return
    assert location is not None
    data = _read("ssl.keystore.location", location)
    if cfg.ssl_keystore_type == "JKS" or data.startswith(_JKS_MAGIC):
        raise _jks_error("ssl.keystore.location", location)
    if cfg.ssl_keystore_type == "PKCS12":
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
        )

        key, cert, extra = _pkcs12(
            "ssl.keystore.location", data, _secret(cfg.ssl_keystore_password), location
        )
        if key is None or cert is None:
            raise ConfigError(f"ssl.keystore.location {location!r} holds no private key and certificate")
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
        with _private_file(_pem_certs([cert, *(extra or [])]) + pem) as path:
            _load_chain(ctx, "ssl.keystore.location", path, None, None)
        return
    if key_location is not None:
        _read("ssl.key.location", key_location)  # a clear error for a missing or unreadable key file
    _load_chain(ctx, "ssl.keystore.location", location, key_location, key_password)


def _load_chain(
    ctx: ssl.SSLContext, key: str, certfile: str, keyfile: str | None, password: str | None
) -> None:
    def no_password() -> str:
        raise ConfigError(
            f"the private key for {key} is encrypted: set ssl.key.password"
        )

    try:
        ctx.load_cert_chain(certfile, keyfile, password if password is not None else no_password)
    except ConfigError:
        raise
    except ssl.SSLError as e:
        text = str(e)
        encrypted = False
        with contextlib.suppress(OSError), open(keyfile or certfile, "rb") as fh:
            encrypted = b"ENCRYPTED" in fh.read()
        if encrypted or "bad decrypt" in text or "BAD_DECRYPT" in text:
            raise ConfigError(
                f"ssl.key.password is wrong for the private key of {key}"
                + (f" ({keyfile})" if keyfile else "")
            ) from e
        if "KEY_VALUES_MISMATCH" in text or "key values mismatch" in text:
            raise ConfigError(f"the private key does not belong to the certificate in {key}") from e
        raise ConfigError(
            f"{key} ({'inline PEM' if key == 'ssl.keystore.key' else certfile}) has no usable certificate "
            f"and private key: {e.reason or e}"
        ) from e
    except OSError as e:
        raise ConfigError(f"{key} cannot be read: {e}") from e


def build_ssl_context(cfg: Any) -> ssl.SSLContext:
    """The client SSLContext for a ProducerConfig (or anything with the same ``ssl_*`` attributes).

    Raises ConfigError naming the key whose file, password or value is at fault.
    """
    given = getattr(cfg, "ssl_context", None)
    if given is not None:
        return _given_context(cfg, given)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    enabled = cfg.ssl_enabled_protocols
    if enabled:
        versions = sorted(_VERSIONS[p] for p in enabled)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cfg.ssl_cipher_suites:
        try:
            ctx.set_ciphers(":".join(cfg.ssl_cipher_suites))
        except ssl.SSLError as e:
            raise ConfigError(
                f"ssl.cipher.suites {', '.join(cfg.ssl_cipher_suites)} names no cipher OpenSSL knows "
                "(use OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256)"
            ) from e
    verify = bool(cfg.enable_ssl_certificate_verification)
    ctx.check_hostname = verify and cfg.ssl_endpoint_identification_algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    if verify:
        _load_trust(ctx, cfg)
    _load_identity(ctx, cfg)
    return ctx


# What a ready ssl.context already decides: set beside it, these would be silently without effect.
_DECIDED_BY_CONTEXT = (
    "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification", "ssl.truststore.location", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.key.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
)


def _given_context(cfg: Any, given: Any) -> ssl.SSLContext:
    """``ssl.context``: the application's own SSLContext, used as it is."""
    if isinstance(given, str):
        given = load_object(given, "ssl.context", "ssl.context must be an ssl.SSLContext or a 'module:Name' path to one")
    if not isinstance(given, ssl.SSLContext):
        raise ConfigError(f"ssl.context must be an ssl.SSLContext, got {type(given).__name__}")
    explicitly_set = getattr(cfg, "explicitly_set", None)
    clash = [k for k in _DECIDED_BY_CONTEXT if explicitly_set is not None and explicitly_set(k)]
    if clash:
        raise ConfigError(
            f"ssl.context is a complete TLS context, so {', '.join(clash)} would have no effect: "
            "leave them unset, or drop ssl.context"
        )
    return given


def describe_tls_error(err: BaseException, address: str) -> str:
    """A handshake failure in words a user can act on, naming the broker."""
    if isinstance(err, ssl.SSLCertVerificationError):
        reason = err.verify_message or str(err)
        hint = ""
        if "hostname mismatch" in reason.lower() or "ip address mismatch" in reason.lower():
            hint = (
                " (the certificate does not name this host; fix advertised.listeners or the "
                "certificate, or set ssl.endpoint.identification.algorithm to an empty string)"
            )
        elif "expired" in reason.lower():
            hint = " (the broker's certificate has expired)"
        elif "not yet valid" in reason.lower():
            hint = " (the broker's certificate is not yet valid: check both clocks)"
        elif "unable to get local issuer" in reason.lower() or "self-signed" in reason.lower():
            hint = " (its CA is not in the truststore: set ssl.truststore.location to the CA that signed it)"
        return f"TLS handshake with {address} failed: certificate verify failed: {reason}{hint}"
    if isinstance(err, ssl.SSLEOFError | ConnectionResetError | BrokenPipeError):
        return (
            f"TLS handshake with {address} failed: the broker closed the connection during the "
            "handshake (is this a plaintext listener? Or did it refuse the client certificate?)"
        )
    if isinstance(err, ssl.SSLError):
        reason = err.reason or str(err)
        hint = ""
        if reason in ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE"):
            hint = " (the broker did not answer with TLS: is this a plaintext listener?)"
        elif "CERTIFICATE_REQUIRED" in reason or "CERTIFICATE" in reason and "ALERT" in reason:
            hint = " (the broker refused the client certificate: check ssl.keystore.location)"
        elif "UNSUPPORTED_PROTOCOL" in reason or "PROTOCOL_VERSION" in reason:
            hint = " (no TLS version in common: check ssl.enabled.protocols / ssl.protocol)"
        return f"TLS handshake with {address} failed: {reason}{hint}"
    return f"TLS handshake with {address} failed: {err}"
