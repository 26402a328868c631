"""``producer.circuit.breaker.class``: from a name, path, class or instance to a configured breaker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kproducer.circuit_breaker.failure_rate import FailureRateCircuitBreaker
from kproducer.circuit_breaker.policy import CLASS_CONFIG, PartitionCircuitBreaker
from kproducer.common.loader import load_object, split_path
from kproducer.errors import ConfigError

_ALIASES: Final[dict[str, type[FailureRateCircuitBreaker]]] = {
    "failure_rate": FailureRateCircuitBreaker,
    "failure-rate": FailureRateCircuitBreaker,
    "FailureRateCircuitBreaker": FailureRateCircuitBreaker,
}
_OFF: Final = frozenset({"", "none", "off"})
_ALLOWED: Final = (
    "None/'none' (off), 'failure_rate' or 'FailureRateCircuitBreaker', a dotted path 'pkg.mod:Class' "
    "or 'pkg.mod.Class', a class, or an instance implementing PartitionCircuitBreaker"
)


def resolve_circuit_breaker(
    spec: object, configs: Mapping[str, Any] | None = None
) -> PartitionCircuitBreaker | None:
    """Build and configure the breaker named by ``producer.circuit.breaker.class``.

    Returns None when the breaker is off. A class is instantiated without arguments;
    an instance is used as is. Either way ``configure(configs)`` is called.
    """
    if spec is None:
        return None
    target: object = spec
    if isinstance(spec, str):
        name = spec.strip()
        if name.lower() in _OFF:
            return None
        target = _ALIASES.get(name) or _import(name)
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise ConfigError(f"{CLASS_CONFIG}: cannot instantiate {spec!r} without arguments: {exc}")
    if not isinstance(target, PartitionCircuitBreaker):
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {spec!r}")
    target.configure(configs or {})
    return target


def _import(name: str) -> object:
    if ":" not in name and "." not in name:
        import difflib

        close = difflib.get_close_matches(name, list(_ALIASES), n=2, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {name!r}{hint}")
    module_name, attr_path = split_path(name)
    if not module_name or not attr_path:
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {name!r}")
    try:
        return load_object(name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{CLASS_CONFIG}: cannot import {name!r} ({exc}); expected {_ALLOWED}")
