"""security.protocol=SSL against real TLS: Debian's stunnel4 in front of Tansu, certificates made per run.

Tansu advertises the stunnel port, so every connection the producer opens (bootstrap and leader)
goes through TLS. What kproducer wrote is read back by confluent-kafka through the same TLS path
and compared exactly. Each bad input ends the record's future with an error naming the cause.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kproducer import Producer
from kproducer.config import ProducerConfig
from kproducer.embedded_broker import EmbeddedBroker
from kproducer.errors import ConfigError, KafkaTimeoutError, SslAuthenticationError
from tests.support.mock_cluster import start_mock_cluster
from tests.support.readback import read_topic
from tests.support.secured import TlsBroker, assert_refusal_warned_once
from tests.support.tls import KEY_PASSWORD, STORE_PASSWORD, Certificates, Stunnel


@pytest.fixture(scope="module")
def tls_broker(certificates: Certificates) -> Iterator[TlsBroker]:
    with TlsBroker(certificates.server) as b:
        yield b


@pytest.fixture(scope="module")
def mtls_broker(certificates: Certificates) -> Iterator[TlsBroker]:
    with TlsBroker(certificates.server, client_ca=certificates.ca) as b:
        yield b


def _ssl(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "max.block.ms": 20000, **extra}


def assert_read_back(metas: list[Any], back: list[Any]) -> None:
    """What the independent consumer read is exactly what was sent, where kproducer said it went."""
    expected = sorted(
        (m.partition, m.offset, f"key-{i % 7}".encode(), f"value-{i}".encode(), [("h", str(i).encode())])
        for i, m in enumerate(metas)
    )
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in back] == expected


def _produce(config: dict[str, Any], topic: str, n: int) -> list[Any]:
    with Producer(config) as p:
        futures = [
            p.send(topic, f"value-{i}".encode(), key=f"key-{i % 7}".encode(), headers=[("h", str(i).encode())])
            for i in range(n)
        ]
        p.flush(30)
        return [f.result(30) for f in futures]


def test_tls_records_read_back_exactly(tls_broker: TlsBroker, certificates: Certificates, topic_name: str) -> None:
    metas = _produce(_ssl(tls_broker.bootstrap, **{"ssl.truststore.location": str(certificates.ca)}), topic_name, 300)
    back = read_topic(
        tls_broker.bootstrap,
        topic_name,
        300,
        security={"security.protocol": "SSL", "ssl.ca.location": str(certificates.ca)},
    )
    assert_read_back(metas, back)


@pytest.mark.parametrize("trust", ["pem", "librdkafka-alias", "inline", "pkcs12", "system-default"])
def test_each_way_of_giving_the_ca(
    trust: str, tls_broker: TlsBroker, certificates: Certificates, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if trust == "system-default":
        # Nothing set: the system's CAs, which OpenSSL reads from SSL_CERT_FILE when it is set.
        monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
    settings: dict[str, Any] = {
        "system-default": {},
        "pem": {"ssl.truststore.location": str(certificates.ca), "ssl.truststore.type": "PEM"},
        "librdkafka-alias": {"ssl.ca.location": str(certificates.ca)},
        "inline": {"ssl.truststore.certificates": certificates.ca_pem},
        "pkcs12": {
            "ssl.truststore.location": str(certificates.truststore_p12),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": STORE_PASSWORD,
        },
    }[trust]
    metas = _produce(_ssl(tls_broker.bootstrap, **settings), topic_name, 5)
    assert len({(m.partition, m.offset) for m in metas}) == 5


@pytest.mark.parametrize("identity", ["combined-pem", "librdkafka-cert-and-key", "encrypted-key", "pkcs12", "inline"])
def test_mutual_tls_with_each_kind_of_client_certificate(
    identity: str, mtls_broker: TlsBroker, certificates: Certificates, topic_name: str
) -> None:
    c = certificates
    settings: dict[str, Any] = {
        "combined-pem": {"ssl.keystore.location": str(c.client_combined)},
        "librdkafka-cert-and-key": {
            "ssl.certificate.location": str(c.client_cert),
            "ssl.key.location": str(c.client_key),
        },
        "encrypted-key": {
            "ssl.keystore.location": str(c.client_cert),
            "ssl.key.location": str(c.client_key_encrypted),
            "ssl.key.password": KEY_PASSWORD,
        },
        "pkcs12": {
            "ssl.keystore.location": str(c.client_p12),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": STORE_PASSWORD,
        },
        "inline": {"ssl.keystore.certificate.chain": c.client_cert_pem, "ssl.keystore.key": c.client_key_pem},
    }[identity]
    n = 40 if identity == "combined-pem" else 5
    metas = _produce(_ssl(mtls_broker.bootstrap, **{"ssl.ca.location": str(c.ca)}, **settings), topic_name, n)
    back = read_topic(
        mtls_broker.bootstrap,
        topic_name,
        n,
        security={
            "security.protocol": "SSL",
            "ssl.ca.location": str(c.ca),
            "ssl.certificate.location": str(c.client_cert),
            "ssl.key.location": str(c.client_key),
        },
    )
    assert_read_back(metas, back)


# ------------------------------------------------------------------ bad input: errors on the future


def _failure(config: dict[str, Any], caplog: pytest.LogCaptureFixture) -> BaseException:
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    with Producer(config) as p:
        future = p.send("never-written", b"v")
        err = future.exception(60)
    assert err is not None
    return err


@pytest.fixture(scope="module")
def bad_servers(tansu: EmbeddedBroker, certificates: Certificates) -> Iterator[dict[str, Stunnel]]:
    """stunnels with broken server certificates; the handshake fails before any metadata."""
    c = certificates
    out: dict[str, Stunnel] = {}
    try:
        for name, pem in (
            ("expired", c.server_expired),
            ("not-yet-valid", c.server_not_yet_valid),
            ("wrong-ca", c.server_wrong_ca),
        ):
            out[name] = Stunnel(tansu.port, pem)
        yield out
    finally:
        for s in out.values():
            s.stop()


@pytest.mark.parametrize(
    "case, words",
    [
        ("expired", "certificate verify failed: certificate has expired"),
        ("not-yet-valid", "certificate verify failed: certificate is not yet valid"),
        ("wrong-ca", "certificate verify failed: unable to get local issuer certificate"),
    ],
)
def test_bad_server_certificates_fail_the_record(
    case: str, words: str, bad_servers: dict[str, Stunnel], certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    server = bad_servers[case]
    err = _failure(_ssl(server.bootstrap, **{"ssl.truststore.location": str(certificates.ca)}), caplog)
    assert isinstance(err, SslAuthenticationError), repr(err)
    assert words in str(err) and f"127.0.0.1:{server.port}" in str(err)
    assert_refusal_warned_once(caplog.records, f"127.0.0.1:{server.port}", words)


def test_client_trusting_another_ca_is_refused(
    tls_broker: TlsBroker, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    err = _failure(_ssl(tls_broker.bootstrap, **{"ssl.truststore.location": str(certificates.wrong_ca)}), caplog)
    assert isinstance(err, SslAuthenticationError)
    assert "unable to get local issuer certificate" in str(err)
    assert "set ssl.truststore.location to the CA that signed it" in str(err)
    assert_refusal_warned_once(caplog.records, tls_broker.bootstrap, "unable to get local issuer certificate")


def test_verification_off_accepts_an_untrusted_certificate(
    tls_broker: TlsBroker, certificates: Certificates, topic_name: str
) -> None:
    conf = _ssl(
        tls_broker.bootstrap,
        **{"ssl.truststore.location": str(certificates.wrong_ca), "enable.ssl.certificate.verification": False},
    )
    assert len(_produce(conf, topic_name, 2)) == 2


def test_host_name_is_verified_unless_identification_is_off(
    certificates: Certificates, caplog: pytest.LogCaptureFixture, topic_name: str
) -> None:
    broker = TlsBroker(certificates.server_other_host)  # a valid certificate for kafka.example.com
    try:
        base = _ssl(broker.bootstrap, **{"ssl.truststore.location": str(certificates.ca)})
        err = _failure(base, caplog)
        assert isinstance(err, SslAuthenticationError)
        assert "IP address mismatch" in str(err) and "ssl.endpoint.identification.algorithm" in str(err)
        assert_refusal_warned_once(caplog.records, broker.bootstrap, "IP address mismatch")
        off = dict(base, **{"ssl.endpoint.identification.algorithm": ""})
        assert len(_produce(off, topic_name, 2)) == 2
    finally:
        broker.stop()


def test_mutual_tls_without_a_client_certificate_is_refused(
    mtls_broker: TlsBroker, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    err = _failure(_ssl(mtls_broker.bootstrap, **{"ssl.truststore.location": str(certificates.ca)}), caplog)
    assert isinstance(err, SslAuthenticationError)
    assert "CERTIFICATE_REQUIRED" in str(err) and "client certificate" in str(err)
    assert_refusal_warned_once(caplog.records, mtls_broker.bootstrap, "CERTIFICATE_REQUIRED")


_NO_TIMEOUT_CAN_END_IT = {
    "max.block.ms": 120_000,
    "socket.connection.setup.timeout.ms": 300_000,
    "socket.connection.setup.timeout.max.ms": 300_000,
}


def test_tls_client_against_a_plaintext_port(tansu: EmbeddedBroker, certificates: Certificates, caplog: pytest.LogCaptureFixture) -> None:
    """Tansu waits for the ~369 MB 'request' a ClientHello announces instead of closing; after a
    second without a TLS answer the client asks the port for ApiVersions in plaintext, gets an
    answer, and fails the record with that cause (the timeouts are far longer than the test)."""
    conf = _ssl(tansu.bootstrap, **{"ssl.truststore.location": str(certificates.ca), **_NO_TIMEOUT_CAN_END_IT})
    err = _failure(conf, caplog)
    assert isinstance(err, SslAuthenticationError), repr(err)
    words = "sent no answer to the TLS handshake, and that port answers a plaintext ApiVersions request"
    assert words in str(err) and "security.protocol is SSL; set security.protocol=PLAINTEXT" in str(err), str(err)
    assert_refusal_warned_once(caplog.records, f":{tansu.port}", words)


def test_tls_handshake_without_any_answer_ends_at_the_setup_timeout(
    certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    """A port that answers neither TLS nor Kafka (it reads and stays silent): the setup timeout ends
    the handshake, and the error still names the likely cause."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # never answered; closed at the end
            except OSError:
                continue

    port = server.getsockname()[1]
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        conf = _ssl(
            f"127.0.0.1:{port}",
            **{"ssl.truststore.location": str(certificates.ca), "socket.connection.setup.timeout.ms": 500},
        )
        err = _failure(conf, caplog)
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
    assert isinstance(err, SslAuthenticationError), repr(err)
    assert "did not finish within" in str(err) and "plaintext listener" in str(err)
    assert_refusal_warned_once(caplog.records, f":{port}", "is this a plaintext listener?")


def test_tls_client_against_a_kafka_plaintext_port_fails_on_the_first_attempt(
    certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    """A Kafka broker reads a ClientHello as a request of about 369 MB and closes the connection
    (librdkafka's mock cluster does the same): the handshake fails on its first attempt, long
    before the setup timeout, which is set far beyond max.block.ms so that only this can end it."""
    cluster = start_mock_cluster(brokers=1)
    try:
        conf = _ssl(cluster.bootstrap, **{"ssl.truststore.location": str(certificates.ca), **_NO_TIMEOUT_CAN_END_IT})
        err = _failure(conf, caplog)
    finally:
        cluster.stop()
    assert isinstance(err, SslAuthenticationError), repr(err)
    assert "closed the connection during the handshake (is this a plaintext listener?" in str(err), str(err)
    assert_refusal_warned_once(caplog.records, ":" + cluster.bootstrap.split(",")[0].rsplit(":", 1)[1], "is this a plaintext listener?")


@pytest.mark.parametrize("listener", ["tls", "mutual-tls", "mutual-tls-1.2"])
def test_plaintext_client_against_a_tls_port(
    listener: str,
    tls_broker: TlsBroker,
    mtls_broker: TlsBroker,
    tansu: EmbeddedBroker,
    certificates: Certificates,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """stunnel resets a plaintext connection without a TLS alert; the client then finds the port
    answers a ClientHello and the record fails with that cause at once. max.block.ms is long, so
    a timeout could not end the send before the assertion on the error's type would fail.
    A listener that requires a client certificate completes the probe's TLS 1.3 handshake (it
    refuses the certificate afterwards) and answers TLS 1.2 with an alert: both are TLS answers."""
    tls12: Stunnel | None = None
    if listener == "tls":
        bootstrap = tls_broker.bootstrap
    elif listener == "mutual-tls":
        bootstrap = mtls_broker.bootstrap
    else:
        tls12 = Stunnel(tansu.port, certificates.server, client_ca=certificates.ca, max_version="TLSv1.2")
        bootstrap = tls12.bootstrap
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    try:
        with Producer({"bootstrap.servers": bootstrap, "max.block.ms": 120_000}) as p:
            err = p.send("never-written", b"v").exception(180)
    finally:
        if tls12 is not None:
            tls12.stop()
    assert isinstance(err, SslAuthenticationError), repr(err)
    words = "closed the connection during the first request (ApiVersions) and that port answers a TLS handshake"
    assert words in str(err) and "set security.protocol=SSL " in str(err), str(err)
    assert "security.protocol is PLAINTEXT" in str(err) and bootstrap in str(err)
    if listener == "mutual-tls-1.2":
        assert "ALERT" in str(err), str(err)
    assert_refusal_warned_once(caplog.records, bootstrap, words)


def test_a_port_that_closes_without_tls_is_not_taken_for_a_tls_listener(caplog: pytest.LogCaptureFixture) -> None:
    """A broker that drops the first request but does not speak TLS (restarting, a proxy in
    trouble) is not blamed on security.protocol: the send waits for metadata until max.block.ms."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()
    seen: list[bytes] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    seen.append(conn.recv(4096))  # the request, or a ClientHello, then close
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        bootstrap = f"127.0.0.1:{server.getsockname()[1]}"
        with Producer({"bootstrap.servers": bootstrap, "max.block.ms": 1500}) as p:
            err = p.send("never-written", b"v").exception(60)
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert isinstance(err, KafkaTimeoutError), repr(err)
    assert "if this is a TLS listener, set security.protocol to SSL or SASL_SSL" in str(err), str(err)
    assert any(b[:2] == b"\x16\x03" for b in seen), "the client should have probed the port with a ClientHello"


# ------------------------------------------------------------------ bad input: config errors, at once


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"ssl.keystore.location": "/nonexistent/client.pem"}, "ssl.keystore.location '/nonexistent/client.pem' cannot be read: No such file"),
        ({"ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl.truststore.location '/nonexistent/ca.pem' cannot be read"),
        ({"ssl.keystore.location": "/"}, "ssl.keystore.location '/' cannot be read: Is a directory"),
        ({"ssl.keystore.location": "{cert}", "ssl.key.location": "/nonexistent/key.pem"}, "ssl.key.location '/nonexistent/key.pem' cannot be read"),
        ({"ssl.keystore.location": "{cert}", "ssl.key.location": "{enc}", "ssl.key.password": "pw-wrong-123"}, "ssl.key.password is wrong"),
        ({"ssl.keystore.location": "{cert}", "ssl.key.location": "{enc}"}, "is encrypted: set ssl.key.password"),
        ({"ssl.truststore.location": "{jks}"}, "is a JKS keystore"),
        ({"ssl.truststore.location": "{jks}"}, "keytool -importkeystore"),
        ({"ssl.keystore.location": "{jks}", "ssl.keystore.type": "JKS"}, "keytool -importkeystore"),
        (
            {"ssl.keystore.location": "{p12}", "ssl.keystore.type": "PKCS12", "ssl.keystore.password": "pw-wrong-123"},
            "cannot be opened as PKCS12 (wrong password",
        ),
        ({"ssl.truststore.location": "{key}"}, "holds no PEM certificate"),
        ({"ssl.ca.location": "{ca}", "ssl.truststore.location": "{ca}"}, "ssl.truststore.location given twice, as 'ssl.ca.location' and 'ssl.truststore.location'"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols must list TLSv1.2 and/or TLSv1.3"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "ssl.cipher.suites NOT-A-CIPHER names no cipher"),
    ],
)
def test_bad_tls_settings_fail_at_construction(settings: dict[str, str], words: str, certificates: Certificates) -> None:
    c = certificates
    paths = {"cert": c.client_cert, "enc": c.client_key_encrypted, "jks": c.jks, "p12": c.client_p12, "key": c.client_key, "ca": c.ca}
    resolved = {k: v.format(**{n: str(p) for n, p in paths.items()}) for k, v in settings.items()}
    with pytest.raises(ConfigError) as info:
        Producer(_ssl("127.0.0.1:9", **resolved))
    assert words in str(info.value)
    assert "pw-wrong-123" not in str(info.value)


def test_tls_secrets_never_show(certificates: Certificates) -> None:
    cfg = ProducerConfig(
        _ssl(
            "127.0.0.1:9",
            **{
                "ssl.keystore.certificate.chain": certificates.client_cert_pem,
                "ssl.keystore.key": certificates.client_key_pem,
                "ssl.key.password": "pw-one",
                "ssl.keystore.password": "pw-two",
                "ssl.truststore.password": "pw-three",
            },
        )
    )
    text = repr(cfg) + str(cfg.as_dict()) + repr(cfg.originals)
    for secret in ("pw-one", "pw-two", "pw-three", "PRIVATE KEY"):
        assert secret not in text
