"""TLS in front of the test broker: per-run certificates (trustme) and Debian's stunnel4.

``make_certificates`` writes a CA, server certificates for 127.0.0.1/localhost (valid, expired, not
yet valid, for another host name, signed by another CA), a client certificate for mutual TLS, its key
encrypted, and PKCS12 stores, into one directory. ``Stunnel`` terminates TLS on a loopback port and
forwards plaintext to a broker (Tansu, or the SASL front); the broker must advertise the stunnel port
so that every connection the client opens goes through TLS.
"""

from __future__ import annotations

import datetime
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kproducer.embedded_broker import free_port, stop_process

__all__ = ["Certificates", "Stunnel", "make_certificates", "stunnel_binary"]

KEY_PASSWORD = "k3y-pa55"
STORE_PASSWORD = "st0re-pa55"


@dataclass(frozen=True)
class Certificates:
    dir: Path
    ca: Path  # the CA that signs the server and client certificates (PEM)
    ca_pem: str
    wrong_ca: Path  # an unrelated CA
    server: Path  # cert chain + key for 127.0.0.1 and localhost
    server_expired: Path
    server_not_yet_valid: Path
    server_other_host: Path  # valid, but for kafka.example.com only
    server_wrong_ca: Path  # for 127.0.0.1, signed by wrong_ca
    client_cert: Path  # chain only
    client_key: Path  # unencrypted PEM key
    client_key_encrypted: Path  # PEM key under KEY_PASSWORD
    client_combined: Path  # key + chain in one PEM file
    client_cert_pem: str
    client_key_pem: str
    client_p12: Path  # PKCS12 under STORE_PASSWORD
    truststore_p12: Path  # the CA as a PKCS12 truststore under STORE_PASSWORD
    jks: Path  # a file that starts like a JKS keystore


def make_certificates(directory: Path | None = None) -> Certificates:
    import trustme
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        load_pem_private_key,
        pkcs12,
    )

    d = Path(directory or tempfile.mkdtemp(prefix="kproducer-certs-"))
    now = datetime.datetime.now(datetime.UTC)
    ca, wrong_ca = trustme.CA(), trustme.CA()

    def leaf(name: str, issuer: trustme.CA, *ids: str, **kw: datetime.datetime) -> Path:
        cert = issuer.issue_cert(*ids, **kw)
        path = d / f"{name}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        return path

    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    wrong_ca.cert_pem.write_to_path(str(d / "wrong-ca.pem"))
    server = leaf("server", ca, "127.0.0.1", "localhost")
    expired = leaf(
        "server-expired",
        ca,
        "127.0.0.1",
        "localhost",
        not_before=now - datetime.timedelta(days=30),
        not_after=now - datetime.timedelta(days=1),
    )
    future = leaf(
        "server-future",
        ca,
        "127.0.0.1",
        "localhost",
        not_before=now + datetime.timedelta(days=1),
        not_after=now + datetime.timedelta(days=30),
    )
    other_host = leaf("server-other-host", ca, "kafka.example.com")
    wrong = leaf("server-wrong-ca", wrong_ca, "127.0.0.1", "localhost")

    client = ca.issue_cert("kproducer-client.test", common_name="kproducer-client")
    key_pem = client.private_key_pem.bytes()
    chain_pem = b"".join(p.bytes() for p in client.cert_chain_pems)
    (d / "client-cert.pem").write_bytes(chain_pem)
    (d / "client-key.pem").write_bytes(key_pem)
    (d / "client.pem").write_bytes(key_pem + chain_pem)
    key = load_pem_private_key(key_pem, None)
    (d / "client-key-encrypted.pem").write_bytes(
        key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(KEY_PASSWORD.encode()))
    )
    certs = [x509.load_pem_x509_certificate(p.bytes()) for p in client.cert_chain_pems]
    (d / "client.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, certs[0], certs[1:] or None, BestAvailableEncryption(STORE_PASSWORD.encode())
        )
    )
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    (d / "truststore.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [ca_cert], BestAvailableEncryption(STORE_PASSWORD.encode())
        )
    )
    (d / "keystore.jks").write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + b"\x00" * 64)
    return Certificates(
        dir=d,
        ca=d / "ca.pem",
        ca_pem=ca.cert_pem.bytes().decode(),
        wrong_ca=d / "wrong-ca.pem",
        server=server,
        server_expired=expired,
        server_not_yet_valid=future,
        server_other_host=other_host,
        server_wrong_ca=wrong,
        client_cert=d / "client-cert.pem",
        client_key=d / "client-key.pem",
        client_key_encrypted=d / "client-key-encrypted.pem",
        client_combined=d / "client.pem",
        client_cert_pem=chain_pem.decode(),
        client_key_pem=key_pem.decode(),
        client_p12=d / "client.p12",
        truststore_p12=d / "truststore.p12",
        jks=d / "keystore.jks",
    )


def stunnel_binary() -> str:
    """Debian's stunnel4 (``make test`` installs it); a clear failure when it is missing."""
    for name in ("stunnel4", "stunnel"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError(
        "stunnel4 is not installed: the TLS tests need it in front of the test broker. "
        "Run `make test` (it installs Debian's stunnel4) or `apt-get install stunnel4`."
    )


class Stunnel:
    """stunnel terminating TLS on ``port`` and forwarding to 127.0.0.1:``upstream_port``.

    ``client_ca`` set: mutual TLS, a client certificate signed by that CA is required.
    ``max_version`` (e.g. ``TLSv1.2``) caps the TLS version the server accepts.
    """

    def __init__(
        self,
        upstream_port: int,
        server_pem: Path,
        *,
        port: int | None = None,
        client_ca: Path | None = None,
        max_version: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.port = port or free_port()
        self.upstream_port = upstream_port
        self._dir = Path(tempfile.mkdtemp(prefix="kproducer-stunnel-"))
        self.log_path = self._dir / "stunnel.log"
        lines = [
            "foreground = yes",
            "pid =",
            f"output = {self.log_path}",
            "debug = 4",
            "[kafka]",
            f"accept = 127.0.0.1:{self.port}",
            f"connect = 127.0.0.1:{upstream_port}",
            f"cert = {server_pem}",
            f"key = {server_pem}",
            "sslVersionMin = TLSv1.2",
            "TIMEOUTclose = 0",
        ]
        if client_ca is not None:
            lines += [f"CAfile = {client_ca}", "verifyChain = yes", "requireCert = yes"]
        if max_version is not None:
            lines.append(f"sslVersionMax = {max_version}")
        conf = self._dir / "stunnel.conf"
        conf.write_text("\n".join(lines) + "\n")
        self.process = subprocess.Popen(
            [stunnel_binary(), str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"stunnel exited with {self.process.returncode}: {self.log()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"stunnel did not listen on 127.0.0.1:{self.port} within {timeout}s: {self.log()[-2000:]}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Stunnel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
