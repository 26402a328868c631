"""Producer configuration: every key is declared once, in :data:`CONFIG_KEYS`.

Names, types, defaults and ranges follow the Java producer's ``ProducerConfig``
(Kafka 4.x), so a ``producer.properties`` file works unchanged: values may arrive
as strings ("5", "true", "all", comma lists) and are coerced here. Validation,
the snake_case aliases (``linger_ms`` for ``linger.ms``), the error messages and
``docs/configuration.md`` (``python -m kproducer.config --markdown``) are all
derived from that one table, so they cannot drift apart.

Parsed values are stored as plain instance attributes, so reading
``cfg.linger_ms`` on the hot path costs one attribute lookup.
"""

# The package's modules, in import order: config_def (the ConfigDef vocabulary: Type, Importance,
# Range, OneOf, ConfigKey, Password), keys (the table), parsing (name lookup with suggestions and
# value coercion), producer_config (ProducerConfig and its cross-key rules), reference (the
# generated docs/configuration.md; `python -m kproducer.config --markdown` runs __main__).

from __future__ import annotations

# Every name the single config module had stays importable from here; those imported "as"
# themselves are not in __all__ (the "as" marks them re-exported for mypy and ruff).
from kproducer.config.config_def import INT32_MAX as INT32_MAX
from kproducer.config.config_def import INT32_MIN as INT32_MIN
from kproducer.config.config_def import INT64_MAX as INT64_MAX
from kproducer.config.config_def import INT64_MIN as INT64_MIN
from kproducer.config.config_def import NO_DEFAULT as NO_DEFAULT
from kproducer.config.config_def import ConfigKey, Importance, OneOf, Password, Range, Type
from kproducer.config.keys import CIRCUIT_BREAKER_KEYS, CIRCUIT_BREAKER_PREFIX, CONFIG_KEYS
from kproducer.config.keys import SASL_MECHANISMS as SASL_MECHANISMS
from kproducer.config.keys import SECURITY_PROTOCOLS as SECURITY_PROTOCOLS
from kproducer.config.parsing import _coerce as _coerce
from kproducer.config.parsing import coerce, parse_bootstrap_servers, resolve_object
from kproducer.config.producer_config import MAX_IN_FLIGHT_FOR_IDEMPOTENCE as MAX_IN_FLIGHT_FOR_IDEMPOTENCE
from kproducer.config.producer_config import ProducerConfig
from kproducer.config.producer_config import logger as logger
from kproducer.config.reference import main as main
from kproducer.config.reference import render_markdown

__all__ = [
    "CONFIG_KEYS",
    "CIRCUIT_BREAKER_KEYS",
    "CIRCUIT_BREAKER_PREFIX",
    "ConfigKey",
    "Importance",
    "OneOf",
    "Password",
    "ProducerConfig",
    "Range",
    "Type",
    "coerce",
    "parse_bootstrap_servers",
    "render_markdown",
    "resolve_object",
]
