"""SASL (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) over plaintext and TLS, against a real SASL server side.

The SASL front (tests/support/sasl_front.py) authenticates with an independent implementation
(scramp's server for SCRAM, a token table for OAUTHBEARER) and relays to Tansu; stunnel in front of
it gives SASL_SSL. The front is first checked with confluent-kafka and kafka-python as clients.
Records are read back by confluent-kafka through the same TLS/SASL path and compared exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kproducer import Producer
from kproducer.config import ProducerConfig
from kproducer.config.sasl import parse_jaas_config
from kproducer.errors import (
    AuthenticationError,
    ConfigError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from tests.support.readback import read_topic
from tests.support.secured import (
    MECHANISMS,
    PASSWORD,
    TOKEN,
    USER,
    SaslBroker,
    TokenEndpoint,
    assert_refusal_warned_once,
)
from tests.support.tls import Certificates


@pytest.fixture(scope="module")
def sasl_plaintext() -> Iterator[SaslBroker]:
    with SaslBroker() as b:
        yield b


@pytest.fixture(scope="module")
def sasl_ssl(certificates: Certificates) -> Iterator[SaslBroker]:
    with SaslBroker(certificates) as b:
        yield b


@pytest.fixture(params=["SASL_PLAINTEXT", "SASL_SSL"])
def sasl_broker(request: pytest.FixtureRequest) -> SaslBroker:
    return request.getfixturevalue("sasl_plaintext" if request.param == "SASL_PLAINTEXT" else "sasl_ssl")


def _produce(config: dict[str, Any], topic: str, n: int) -> list[Any]:
    with Producer(config) as p:
        futures = [
            p.send(topic, f"value-{i}".encode(), key=f"key-{i % 5}".encode(), headers=[("n", str(i).encode())])
            for i in range(n)
        ]
        p.flush(30)
        return [f.result(30) for f in futures]


def _assert_read_back(metas: list[Any], back: list[Any]) -> None:
    expected = sorted(
        (m.partition, m.offset, f"key-{i % 5}".encode(), f"value-{i}".encode(), [("n", str(i).encode())])
        for i, m in enumerate(metas)
    )
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in back] == expected


# ------------------------------------------------------------------ the front itself, with peers


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_front_accepts_confluent_kafka(mechanism: str, sasl_broker: SaslBroker, topic_name: str) -> None:
    from confluent_kafka import Producer as CProducer

    p = CProducer({"bootstrap.servers": sasl_broker.bootstrap, **sasl_broker.librdkafka(mechanism)})
    results: list[Any] = []
    p.produce(topic_name, b"from-librdkafka", on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    assert results == [None]
    assert (mechanism, USER) in sasl_broker.front.stats.authentications


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_front_accepts_kafka_python(mechanism: str, sasl_broker: SaslBroker, topic_name: str) -> None:
    from kafka import KafkaProducer

    tls: dict[str, Any] = {}
    if sasl_broker.certificates is not None:
        tls = {"ssl_cafile": str(sasl_broker.certificates.ca), "ssl_check_hostname": True}
    p = KafkaProducer(
        bootstrap_servers=sasl_broker.bootstrap,
        security_protocol=sasl_broker.protocol,
        sasl_mechanism=mechanism,
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        **tls,
    )
    try:
        assert p.send(topic_name, b"from-kafka-python").get(30).offset >= 0
    finally:
        p.close()
    assert (mechanism, USER) in sasl_broker.front.stats.authentications


def test_front_refuses_a_wrong_scram_password_from_confluent_kafka(sasl_plaintext: SaslBroker, topic_name: str) -> None:
    from confluent_kafka import Producer as CProducer

    before = len(sasl_plaintext.front.stats.failures)
    conf = dict(sasl_plaintext.librdkafka("SCRAM-SHA-256"), **{"sasl.password": "wrong"})
    p = CProducer({"bootstrap.servers": sasl_plaintext.bootstrap, "message.timeout.ms": 1500, **conf})
    results: list[Any] = []
    p.produce(topic_name, b"x", on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    assert results and results[0] is not None
    assert any("invalid-proof" in f for f in sasl_plaintext.front.stats.failures[before:])


# ------------------------------------------------------------------ kproducer: mechanism x protocol


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kproducer_mechanism_over_protocol_reads_back_exactly(
    mechanism: str, sasl_broker: SaslBroker, topic_name: str
) -> None:
    metas = _produce(sasl_broker.kproducer(mechanism), topic_name, 60)
    back = read_topic(sasl_broker.bootstrap, topic_name, 60, security=sasl_broker.librdkafka(mechanism))
    _assert_read_back(metas, back)
    assert (mechanism, USER) in sasl_broker.front.stats.authentications


@pytest.mark.parametrize(
    "mechanism, jaas",
    [
        ("PLAIN", f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{USER}" password="{PASSWORD}";'),
        (
            "SCRAM-SHA-512",
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";',
        ),
    ],
)
def test_credentials_from_jaas_config(mechanism: str, jaas: str, sasl_plaintext: SaslBroker, topic_name: str) -> None:
    conf = sasl_plaintext.kproducer(mechanism)
    del conf["sasl.username"], conf["sasl.password"]
    conf["sasl.jaas.config"] = jaas
    assert len(_produce(conf, topic_name, 3)) == 3


def test_oidc_client_credentials_flow(
    sasl_broker: SaslBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kproducer")
    endpoint = TokenEndpoint(sasl_broker.front, "kproducer-app", "app-secret")
    try:
        conf = sasl_broker.kproducer("OAUTHBEARER")
        del conf["sasl.oauthbearer.token.provider"]
        conf.update(
            {
                "sasl.oauthbearer.token.endpoint.url": endpoint.url,
                "sasl.oauthbearer.client.id": "kproducer-app",
                "sasl.oauthbearer.client.secret": "app-secret",
                "sasl.oauthbearer.scope": "kafka",
            }
        )
        metas = _produce(conf, topic_name, 30)
        back = read_topic(sasl_broker.bootstrap, topic_name, 30, security=sasl_broker.librdkafka("OAUTHBEARER"))
        _assert_read_back(metas, back)
        assert endpoint.requests and endpoint.requests[0] == {"grant_type": "client_credentials", "scope": "kafka"}
        # The same through Java's JAAS line, as Spark users write it.
        conf2 = sasl_broker.kproducer("OAUTHBEARER")
        del conf2["sasl.oauthbearer.token.provider"], conf2["sasl.mechanism"]
        conf2["sasl.oauthbearer.token.endpoint.url"] = endpoint.url
        conf2["sasl.jaas.config"] = (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'clientId="kproducer-app" clientSecret="app-secret" scope="kafka";'
        )
        jaas_topic = topic_name + "-jaas"
        metas = _produce(conf2, jaas_topic, 10)
        back = read_topic(sasl_broker.bootstrap, jaas_topic, 10, security=sasl_broker.librdkafka("OAUTHBEARER"))
        _assert_read_back(metas, back)
        # A refused client secret: the endpoint's answer is in the error, and in the first WARNING.
        conf3 = dict(conf, **{"sasl.oauthbearer.client.secret": "wrong-secret"})
        err = _failure(conf3)
        assert isinstance(err, AuthenticationError) and "HTTP 401" in str(err) and "invalid_client" in str(err)
        assert "wrong-secret" not in str(err)
        assert_refusal_warned_once(caplog.records, sasl_broker.bootstrap, "HTTP 401")
        assert all("app-secret" not in r.getMessage() and "wrong-secret" not in r.getMessage() for r in caplog.records)
    finally:
        endpoint.close()


# ------------------------------------------------------------------ bad input


def _failure(config: dict[str, Any]) -> BaseException:
    with Producer(config) as p:
        err = p.send("never-written", b"v").exception(60)
    assert err is not None
    return err


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_the_record(
    mechanism: str, sasl_broker: SaslBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kproducer")
    err = _failure(sasl_broker.kproducer(mechanism, **{"sasl.password": "not-the-password"}))
    assert isinstance(err, SaslAuthenticationFailedError), repr(err)
    assert f"SASL {mechanism} authentication failed" in str(err) and "SASL_AUTHENTICATION_FAILED" in str(err)
    assert ("Invalid username or password" if mechanism == "PLAIN" else "invalid-proof") in str(err)
    assert_refusal_warned_once(caplog.records, sasl_broker.bootstrap, "Invalid username or password" if mechanism == "PLAIN" else "invalid-proof")
    assert all("not-the-password" not in r.getMessage() for r in caplog.records)


def test_batched_records_end_with_the_refusal_when_a_broker_stops_accepting_the_client(
    topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Credentials revoked while records sit in batches for a leader whose metadata is known: the
    reconnect is refused, and those records end with SASL_AUTHENTICATION_FAILED, well before
    delivery.timeout.ms (two minutes here), instead of waiting for it."""
    from kproducer.errors import KafkaTimeoutError

    caplog.set_level(logging.WARNING, logger="kproducer")
    broker = SaslBroker(mechanisms=("PLAIN",))
    try:
        conf = broker.kproducer("PLAIN", **{"linger.ms": 50, "delivery.timeout.ms": 120_000, "request.timeout.ms": 30_000})
        with Producer(conf) as p:
            first = p.send(topic_name, b"before").result(30)
            broker.front.users.clear()  # the broker no longer knows this user
            broker.front.drop_connections()  # and the client must authenticate again
            futures = [p.send(topic_name, b"after-%d" % i) for i in range(20)]
            errors = [f.exception(60) for f in futures]
            assert all(isinstance(e, SaslAuthenticationFailedError) for e in errors), [repr(e) for e in errors]
            assert not any(isinstance(e, KafkaTimeoutError) for e in errors)
            p.close(0)
        assert_refusal_warned_once(caplog.records, broker.bootstrap, "Invalid username or password")
        assert first.offset >= 0
    finally:
        broker.stop()


def test_mechanism_the_broker_does_not_enable(topic_name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    broker = SaslBroker(mechanisms=("PLAIN", "OAUTHBEARER"))
    try:
        err = _failure(broker.kproducer("SCRAM-SHA-512"))
        assert isinstance(err, UnsupportedSaslMechanismError)
        assert "rejected SASL mechanism SCRAM-SHA-512; the broker enables PLAIN, OAUTHBEARER" in str(err)
        assert "UNSUPPORTED_SASL_MECHANISM" in str(err), str(err)
        assert_refusal_warned_once(caplog.records, broker.bootstrap, "the broker enables PLAIN, OAUTHBEARER")
    finally:
        broker.stop()


def test_sasl_plaintext_client_against_a_sasl_ssl_port(sasl_ssl: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    """The listener is TLS (stunnel in front of the SASL front): the record fails at once with an
    error that says to use SASL_SSL, not at max.block.ms (set long, so only that could end it)."""
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    conf = sasl_ssl.kproducer("SCRAM-SHA-256", **{"security.protocol": "SASL_PLAINTEXT", "max.block.ms": 120_000})
    del conf["ssl.truststore.location"]
    with Producer(conf) as p:
        err = p.send("never-written", b"v").exception(180)
    assert isinstance(err, SslAuthenticationError), repr(err)
    assert "security.protocol is SASL_PLAINTEXT; set security.protocol=SASL_SSL" in str(err), str(err)
    assert_refusal_warned_once(caplog.records, sasl_ssl.bootstrap, "set security.protocol=SASL_SSL")


def test_sasl_ssl_client_against_a_sasl_plaintext_port(
    sasl_plaintext: SaslBroker, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    """The converse: the SASL front, like a Kafka broker, closes on the ClientHello's ~369 MB 'size',
    so the first attempt fails naming the likely cause (the timeouts are far longer than the test)."""
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    conf = sasl_plaintext.kproducer(
        "SCRAM-SHA-256",
        **{
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": str(certificates.ca),
            "max.block.ms": 120_000,
            "socket.connection.setup.timeout.ms": 300_000,
            "socket.connection.setup.timeout.max.ms": 300_000,
        },
    )
    with Producer(conf) as p:
        err = p.send("never-written", b"v").exception(180)
    assert isinstance(err, SslAuthenticationError), repr(err)
    assert "closed the connection during the handshake (is this a plaintext listener?" in str(err), str(err)
    assert_refusal_warned_once(caplog.records, sasl_plaintext.bootstrap, "is this a plaintext listener?")


def test_token_provider_that_raises(sasl_plaintext: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    def provider() -> Any:
        raise RuntimeError("identity service unreachable")

    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    err = _failure(sasl_plaintext.kproducer("OAUTHBEARER", **{"sasl.oauthbearer.token.provider": provider}))
    assert isinstance(err, AuthenticationError)
    assert "token provider raised RuntimeError: identity service unreachable" in str(err)
    assert_refusal_warned_once(caplog.records, sasl_plaintext.bootstrap, "identity service unreachable")


def test_token_the_broker_refuses(sasl_plaintext: SaslBroker, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kproducer.network.client")
    conf = sasl_plaintext.kproducer(
        "OAUTHBEARER", **{"sasl.oauthbearer.token.provider": lambda: ("forged-token", time.time() + 600)}
    )
    err = _failure(conf)
    assert isinstance(err, SaslAuthenticationFailedError)
    assert "invalid token" in str(err) and '"status":"invalid_token"' in str(err)
    assert_refusal_warned_once(caplog.records, sasl_plaintext.bootstrap, "invalid token")
    assert "forged-token" not in str(err)


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256"}, "needs sasl.username and sasl.password"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "needs sasl.oauthbearer.token.provider"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": "https://idp/token"},
            "needs sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\" password=\"b\";"},
            "does not match sasl.mechanism PLAIN (set sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512)",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "com.example.Kerberos required;"},
            "sasl.jaas.config names login module 'com.example.Kerberos'",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="hunter2"'},
            "must end with ';'",
        ),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism must be one of PLAIN, SCRAM-SHA-256"),
    ],
)
def test_bad_sasl_settings_fail_at_construction(settings: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({"bootstrap.servers": "127.0.0.1:9", **settings})
    assert words in str(info.value)
    assert "hunter2" not in str(info.value)


def test_jaas_parser() -> None:
    j = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="$ConnectionString" '
        'password="Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a\\"b=";'
    )
    assert j.kind == "PLAIN"
    assert j.options == {
        "username": "$ConnectionString",
        "password": 'Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a"b=',
    }
    assert "SharedAccessKey" not in repr(j)


def test_sasl_secrets_never_show(caplog: pytest.LogCaptureFixture) -> None:
    cfg = ProducerConfig(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="pw-jaas";',
            "sasl.oauthbearer.client.secret": "pw-client",
        }
    )
    text = repr(cfg) + str(cfg.as_dict()) + repr(cfg.originals)
    assert "pw-jaas" not in text and "pw-client" not in text


def test_secrets_stay_out_of_the_producer_its_metrics_and_its_logs(
    sasl_ssl: SaslBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A working producer, not just its config: repr, metric names and values, and every log line
    at DEBUG hold neither the SCRAM password nor the OAUTHBEARER token."""
    caplog.set_level(logging.DEBUG, logger="kproducer")
    seen: list[str] = []
    for mechanism in ("SCRAM-SHA-512", "OAUTHBEARER"):
        with Producer(sasl_ssl.kproducer(mechanism)) as p:
            p.send(topic_name, b"v").result(30)
            seen += [repr(p), str(p), repr(p.metrics())]
    seen += [r.getMessage() for r in caplog.records]
    assert len(caplog.records) > 0, "the DEBUG log must have been captured"
    for secret in (PASSWORD, TOKEN):
        assert not [t for t in seen if secret in t], f"{secret!r} appeared"


class TokenSource:
    """A provider object with a token() method, the shape an MSK IAM signer or an Entra helper takes."""

    def __init__(self) -> None:
        self.calls = 0

    def token(self) -> tuple[str, float]:
        self.calls += 1
        return TOKEN, time.time() + 3600


@pytest.mark.parametrize("form", ["object", "import-path"])
def test_token_provider_object_or_import_path(form: str, sasl_broker: SaslBroker, topic_name: str) -> None:
    source = TokenSource()
    provider: Any = source if form == "object" else f"{__name__}:TokenSource"
    metas = _produce(sasl_broker.kproducer("OAUTHBEARER", **{"sasl.oauthbearer.token.provider": provider}), topic_name, 10)
    back = read_topic(sasl_broker.bootstrap, topic_name, 10, security=sasl_broker.librdkafka("OAUTHBEARER"))
    _assert_read_back(metas, back)
    if form == "object":
        assert source.calls >= 1


# ------------------------------------------------------------------ KIP-368 re-authentication


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_reauthentication_keeps_every_batch_in_order(protocol: str, topic_name: str, certificates: Certificates) -> None:
    """Sessions of 1.2 s while records flow for ~4 s: the connection re-authenticates before each
    session ends (the front closes a connection used after its session), nothing is lost,
    duplicated or reordered, and the token provider is asked again before its token expires.
    Over TLS (SCRAM-SHA-512 only, to keep the test short) the exchange shares the TLS stream with
    produce requests in flight."""
    broker = SaslBroker(certificates if protocol == "SASL_SSL" else None, session_lifetime_ms=1200)
    calls: list[float] = []

    def provider() -> tuple[str, float]:
        calls.append(time.time())
        token = f"short-token-{len(calls)}"
        broker.front.issue_token(token, USER, 2)
        return token, time.time() + 2

    try:
        cases: tuple[tuple[str, dict[str, Any]], ...] = (
            (("SCRAM-SHA-256", {}), ("OAUTHBEARER", {"sasl.oauthbearer.token.provider": provider}))
            if protocol == "SASL_PLAINTEXT"
            else (("SCRAM-SHA-512", {}),)
        )
        for mechanism, extra in cases:
            topic = f"{topic_name}-{mechanism}"
            conf = broker.kproducer(mechanism, **{"linger.ms": 5, "max.in.flight.requests.per.connection": 5}, **extra)
            before = broker.front.stats.reauthentications
            metas = []
            with Producer(conf) as p:
                futures = []
                for i in range(80):  # ~4 s at 50 ms a step
                    futures += [
                        p.send(topic, f"value-{j}".encode(), key=f"key-{j % 5}".encode(), headers=[("n", str(j).encode())])
                        for j in range(i * 10, i * 10 + 10)
                    ]
                    time.sleep(0.05)
                p.flush(30)
                metas = [f.result(30) for f in futures]
            renewed = broker.front.stats.reauthentications - before
            assert renewed >= 2, broker.front.stats
            # The client starts re-authenticating at 85-95% of the session (KIP-368, as Java's
            # SaslClientAuthenticator picks the time), i.e. 60-180 ms before a 1.2 s session ends. On
            # a loaded machine the Sender can be scheduled later than that; the front then closes the
            # connection, as a broker does, and the requests are retried (nothing lost or reordered,
            # checked below). A client that did not renew sessions would meet an expired session
            # about as often as sessions end, so expired requests must stay fewer than renewals.
            assert broker.front.stats.expired_requests < renewed, broker.front.stats
            back = read_topic(broker.bootstrap, topic, 800, security=broker.librdkafka("PLAIN"))
            _assert_read_back(metas, back)
            by_partition: dict[int, list[int]] = {}
            for m, i in zip(metas, range(800), strict=True):
                by_partition.setdefault(m.partition, []).append(i)
            for p_, order in by_partition.items():
                offsets = [metas[i].offset for i in order]
                assert offsets == sorted(offsets), f"partition {p_} reordered"
        if protocol == "SASL_PLAINTEXT":
            assert len(calls) >= 2, "the token provider must be called again before its token expires"
    finally:
        broker.stop()


def test_bulk_sends_end_with_the_authentication_error(sasl_plaintext: SaslBroker) -> None:
    """send_batch and send_arrow take the same metadata wait: every record of the call ends with the error."""
    import pyarrow as pa

    with Producer(sasl_plaintext.kproducer("SCRAM-SHA-512", **{"sasl.password": "nope"})) as p:
        batch = p.send_batch("never-written", [b"a", b"b", b"c"])
        arrow = p.send_arrow(pa.table({"value": pa.array([b"x", b"y"], type=pa.binary())}), "never-written")
        for fut, n in ((batch, 3), (arrow, 2)):
            errors = fut.exceptions(60)
            assert len(errors) == n
            assert all(isinstance(e, SaslAuthenticationFailedError) for e in errors), errors
