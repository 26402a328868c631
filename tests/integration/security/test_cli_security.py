"""--command-config and --producer-property on every subcommand: the CLI reaches a secured cluster."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kproducer import cli
from kproducer.errors import ConfigError
from kproducer.properties import parse_properties, read_properties
from tests.support.readback import read_topic
from tests.support.secured import PASSWORD, USER, SaslBroker
from tests.support.tls import Certificates


def test_properties_format() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "security.protocol=SASL_SSL\n"
        "  sasl.mechanism : SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="p=w:d";\n'
        "ssl.truststore.location /etc/ca.pem\n"
        "key\\=with\\:colon=v\\u00e9\\tx\n"
        "empty=\n"
        "security.protocol=SSL\n"
    )
    assert parse_properties(text) == {
        "security.protocol": "SSL",  # a later line wins, as in Java
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p=w:d";',
        "ssl.truststore.location": "/etc/ca.pem",
        "key=with:colon": "vé\tx",
        "empty": "",
    }


def test_missing_command_config_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--command-config '.*nope.properties' cannot be read"):
        read_properties(tmp_path / "nope.properties")


@pytest.fixture(scope="module")
def sasl_ssl_cluster(certificates: Certificates) -> Iterator[SaslBroker]:
    with SaslBroker(certificates) as b:
        yield b


def _command_config(path: Path, certificates: Certificates) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'  username="{USER}" password="{PASSWORD}";\n'
        f"ssl.truststore.location={certificates.ca}\n"
    )
    return path


def test_every_subcommand_has_the_client_options() -> None:
    parser, _handlers = cli.build_parser()
    for name in cli.SUBCOMMANDS:
        sub = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices[name]  # type: ignore[union-attr]
        assert "--command-config" in sub._option_string_actions, name
        assert "--producer-property" in sub._option_string_actions, name


def test_metadata_produce_and_perf_test_reach_a_sasl_ssl_cluster(
    sasl_ssl_cluster: SaslBroker,
    certificates: Certificates,
    tmp_path: Path,
    topic_name: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    props = _command_config(tmp_path / "client.properties", certificates)
    lines = b"".join(f"k{i}:line-{i}\n".encode() for i in range(5))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(lines)))
    rc = cli.main(
        [
            "produce",
            "--bootstrap-servers",
            sasl_ssl_cluster.bootstrap,
            "--topic",
            topic_name,
            "--key-separator",
            ":",
            "--command-config",
            str(props),
            "--producer-property",
            "linger.ms=1",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    back = read_topic(sasl_ssl_cluster.bootstrap, topic_name, 5, security=sasl_ssl_cluster.librdkafka("SCRAM-SHA-256"))
    assert sorted((r.key, r.value) for r in back) == [(f"k{i}".encode(), f"line-{i}".encode()) for i in range(5)]

    capsys.readouterr()
    rc = cli.main(
        [
            "perf-test",
            "--bootstrap-servers",
            sasl_ssl_cluster.bootstrap,
            "--topic",
            topic_name,
            "--num-records",
            "200",
            "--record-size",
            "10",
            "--json",
            "--no-progress",
            "--command-config",
            str(props),
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert json.loads(out.out.strip().splitlines()[-1])["delivered"] == 200
    assert len(read_topic(sasl_ssl_cluster.bootstrap, topic_name, 205, security=sasl_ssl_cluster.librdkafka("SCRAM-SHA-256"))) == 205

    rc = cli.main(
        ["metadata", "--bootstrap-servers", sasl_ssl_cluster.bootstrap, "--topic", topic_name, "--command-config", str(props)]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert topic_name in out.out and "Brokers:" in out.out

    # Without the settings the CLI says what failed instead of hanging; a wrong password is named.
    rc = cli.main(
        [
            "metadata",
            "--bootstrap-servers",
            sasl_ssl_cluster.bootstrap,
            "--timeout",
            "3",
            "--command-config",
            str(props),
            "--producer-property",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{USER}" password="wrong-pw";',
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert "SASL SCRAM-SHA-256 authentication failed" in err and "wrong-pw" not in err
