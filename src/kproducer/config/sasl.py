"""SASL settings from the producer config: the JAAS entry parsed, the mechanism and credentials checked.

What the user wrote (``sasl.mechanism``, ``sasl.jaas.config``, ``sasl.username``/``sasl.password``,
the ``sasl.oauthbearer.*`` keys) becomes one :class:`kproducer.network.sasl.SaslSettings`, or a
ConfigError naming the key that is missing or conflicts, when the config is parsed: a producer
with a bad SASL setting fails at construction, not at its first connection. The network layer
(``kproducer.network.sasl``) holds the authenticators that use them. The JAAS syntax and the
login-module names are Java's (``org.apache.kafka.common.security.JaasConfig``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kproducer.config.config_def import Password
from kproducer.config.parsing import resolve_object
from kproducer.errors import ConfigError
from kproducer.network.sasl import ClientCredentialsTokenProvider, SaslSettings, TokenCache

__all__ = ["JaasConfig", "parse_jaas_config", "resolve_sasl_settings"]

_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
    # Shaded copies (Confluent Cloud's examples for Spark and ksqlDB use these names).
    "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "kafkashaded.org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
    "kafkashaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "OAUTHBEARER",
}

_JAAS_HEAD = re.compile(r"\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)\b")
_JAAS_OPTION = re.compile(r'\s*(?P<key>[A-Za-z_][\w.\-]*)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')



@dataclass(frozen=True, slots=True)
class JaasConfig:
    module: str
    kind: str  # PLAIN, SCRAM or OAUTHBEARER
    options: dict[str, str]

    def __repr__(self) -> str:  # options hold secrets
        return f"JaasConfig({self.module}, options={sorted(self.options)})"


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse one JAAS entry: ``Module required key="value" key2=value2;``.

    Errors name ``sasl.jaas.config`` and what is wrong, never the values (they hold passwords).
    """
    m = _JAAS_HEAD.match(text)
    if m is None:
        raise ConfigError(
            "sasl.jaas.config must look like '<LoginModule class> required key=\"value\" ...;' "
            "(the value is not shown: it may hold a password)"
        )
    module = m.group("module")
    kind = _LOGIN_MODULES.get(module)
    if kind is None:
        known = ", ".join(k for k in _LOGIN_MODULES if not k.startswith("kafkashaded"))
        raise ConfigError(f"sasl.jaas.config names login module {module!r}; kproducer understands {known}")
    pos = m.end()
    options: dict[str, str] = {}
    while True:
        om = _JAAS_OPTION.match(text, pos)
        if om is None:
            break
        quoted = om.group("quoted")
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else om.group("bare")
        options[om.group("key")] = value
        pos = om.end()
    rest = text[pos:].strip()
    if rest not in (";", ""):
        raise ConfigError(
            f"sasl.jaas.config: cannot parse the options of {module} after character {pos} "
            "(expected key=\"value\" pairs and a final ';'; the value is not shown)"
        )
    if rest == "":
        raise ConfigError("sasl.jaas.config must end with ';' (as Java requires)")
    return JaasConfig(module, kind, options)


def _resolve_provider(obj: Any) -> Any:
    if isinstance(obj, str):
        try:
            obj = resolve_object(obj)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"sasl.oauthbearer.token.provider {obj!r} cannot be imported: {e}") from e
        if isinstance(obj, type):
            obj = obj()
    if not callable(obj) and not callable(getattr(obj, "token", None)):
        raise ConfigError(
            f"sasl.oauthbearer.token.provider must be a callable or have a token() method, got {type(obj).__name__}"
        )
    return obj


def resolve_sasl_settings(values: Mapping[str, Any], *, mechanism_explicit: bool = True) -> SaslSettings:
    """The mechanism and credentials from the parsed config (Java names), or a ConfigError naming
    the key that is missing or conflicts. Builds no connection and calls no token provider."""
    mechanism = values["sasl.mechanism"]
    jaas_text = values.get("sasl.jaas.config")
    jaas = parse_jaas_config(jaas_text.value) if jaas_text is not None else None
    if jaas is not None:
        if jaas.kind == "OAUTHBEARER" and not mechanism_explicit:
            mechanism = "OAUTHBEARER"
        wanted = "SCRAM" if mechanism.startswith("SCRAM-") else mechanism
        if jaas.kind != wanted:
            raise ConfigError(
                f"sasl.jaas.config uses {jaas.module.rsplit('.', 1)[-1]}, which does not match "
                f"sasl.mechanism {mechanism}"
                + (" (set sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512)" if jaas.kind == "SCRAM" else "")
            )
    username = values.get("sasl.username")
    password = values.get("sasl.password")
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if jaas is not None:
            j_user, j_pass = jaas.options.get("username"), jaas.options.get("password")
            if username is not None and j_user is not None and username != j_user:
                raise ConfigError("sasl.username and the username in sasl.jaas.config differ; set one")
            if password is not None and j_pass is not None and password.value != j_pass:
                raise ConfigError("sasl.password and the password in sasl.jaas.config differ; set one")
            username = username if username is not None else j_user
            if password is None and j_pass is not None:
                password = Password(j_pass)
        missing = [
            k for k, v in (("sasl.username", username), ("sasl.password", password)) if not v
        ]
        if missing:
            raise ConfigError(
                f"security.protocol {values['security.protocol']} with sasl.mechanism {mechanism} needs "
                f"{' and '.join(missing)} (or username/password in sasl.jaas.config)"
            )
        return SaslSettings(mechanism, username, password)
    # OAUTHBEARER
    buffer_s = float(values.get("sasl.login.refresh.buffer.seconds", 300))
    provider = values.get("sasl.oauthbearer.token.provider")
    url = values.get("sasl.oauthbearer.token.endpoint.url")
    client_id = values.get("sasl.oauthbearer.client.id")
    secret = values.get("sasl.oauthbearer.client.secret")
    scope = values.get("sasl.oauthbearer.scope")
    if jaas is not None:
        client_id = client_id or jaas.options.get("clientId")
        if secret is None and jaas.options.get("clientSecret") is not None:
            secret = Password(jaas.options["clientSecret"])
        scope = scope or jaas.options.get("scope")
    if provider is not None:
        if url is not None:
            raise ConfigError(
                "sasl.oauthbearer.token.provider and sasl.oauthbearer.token.endpoint.url are both set; set one"
            )
        return SaslSettings(mechanism, tokens=TokenCache(_resolve_provider(provider), buffer_s))
    if url is None:
        raise ConfigError(
            "sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.token.provider (a callable returning the "
            "token and its expiry) or sasl.oauthbearer.token.endpoint.url with a client id and secret"
        )
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"sasl.oauthbearer.token.endpoint.url must be an http(s) URL, got {url!r}")
    missing = [k for k, v in (("sasl.oauthbearer.client.id", client_id), ("sasl.oauthbearer.client.secret", secret)) if not v]
    if missing or client_id is None or secret is None:
        raise ConfigError(
            f"sasl.oauthbearer.token.endpoint.url needs {' and '.join(missing)} "
            "(or clientId/clientSecret in sasl.jaas.config)"
        )
    return SaslSettings(
        mechanism, tokens=TokenCache(ClientCredentialsTokenProvider(url, client_id, secret.value, scope), buffer_s)
    )
