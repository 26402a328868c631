"""Reading one user value of a declared key (Kafka's ``ConfigDef.parseType``).

Every spelling a user may pass (Java name, alias, snake_case) is looked up here, unknown names
get close-match suggestions, and each value is coerced to its key's type and checked against its
validator, with a ConfigError naming the key and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NoReturn

from kproducer.common.loader import load_object
from kproducer.config.config_def import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    ConfigKey,
    OneOf,
    Password,
    Range,
    Type,
)
from kproducer.config.keys import CONFIG_KEYS, SECURITY_PROTOCOLS
from kproducer.errors import ConfigError

# Every spelling a user may pass, mapped to the declared key.
_LOOKUP: dict[str, ConfigKey] = {}
for _key in CONFIG_KEYS:
    for _spelling in (_key.name, *_key.aliases):
        _LOOKUP[_spelling] = _key
        _LOOKUP[_spelling.replace(".", "_")] = _key
del _key, _spelling

_SUGGESTIONS: tuple[str, ...] = tuple(sorted(_LOOKUP))


# ---------------------------------------------------------------------------- errors


def _fail(key: ConfigKey, expected: str, value: Any) -> NoReturn:
    if key.type is Type.PASSWORD and value is not None:
        text = Password.HIDDEN
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    raise ConfigError(f"{key.name} must be {expected}, got {text}")


def _dotted(name: str) -> str:
    """A snake_case spelling turned back into a dotted name; dotted names are kept as given."""
    return name if "." in name else name.replace("_", ".")


def _declared_spelling(raw_name: str, key: ConfigKey) -> str:
    """Which declared spelling (the Java name or an alias) ``raw_name`` is, in dotted form."""
    for spelling in key.aliases:
        if raw_name in (spelling, spelling.replace(".", "_")):
            return spelling
    return key.name


def _unknown(name: str) -> NoReturn:
    dotted = name.replace("_", ".")
    import difflib  # only on this error path: it is slow to import

    close = difflib.get_close_matches(dotted, _SUGGESTIONS, n=3, cutoff=0.6)
    close += [c for c in difflib.get_close_matches(name, _SUGGESTIONS, n=3, cutoff=0.6) if c not in close]
    names: list[str] = []
    for c in close:
        java = _LOOKUP[c].name if c not in _LOOKUP[c].aliases else c
        if java not in names:
            names.append(java)
    names = names[:3]
    if not names:
        raise ConfigError(f"unknown config {name!r}")
    if len(names) == 1:
        raise ConfigError(f"unknown config {name!r}; did you mean {names[0]!r}?")
    raise ConfigError(f"unknown config {name!r}; did you mean one of {', '.join(repr(n) for n in names)}?")


def _expected(key: ConfigKey) -> str:
    kind = {
        Type.INT: "an integer",
        Type.LONG: "an integer",
        Type.DOUBLE: "a number",
        Type.BOOLEAN: "a boolean (true or false)",
        Type.STRING: "a string",
        Type.LIST: "a list (or a comma-separated string)",
        Type.CLASS: "an object, a class or a 'module:Name' path",
        Type.PASSWORD: "a string",
    }[key.type]
    if isinstance(key.validator, OneOf):
        return key.validator.describe()
    if isinstance(key.validator, Range):
        return f"{kind} {key.validator.describe()}"
    return kind


# ---------------------------------------------------------------------------- coercion


def resolve_object(path: str) -> Any:
    """Import ``'pkg.mod:Name'`` or ``'pkg.mod.Name'``; class-typed keys accept such paths as Java accepts class names."""
    return load_object(path)


def _coerce_int(key: ConfigKey, value: Any) -> int:
    if isinstance(value, bool):
        _fail(key, _expected(key), value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            _fail(key, _expected(key), value)
    else:
        _fail(key, _expected(key), value)
    lo, hi = (INT32_MIN, INT32_MAX) if key.type is Type.INT else (INT64_MIN, INT64_MAX)
    if not lo <= result <= hi:
        _fail(key, f"{_expected(key)} that fits a {key.type.value}", result)
    return result


def _coerce_double(key: ConfigKey, value: Any) -> float:
    if isinstance(value, bool):
        _fail(key, _expected(key), value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    _fail(key, _expected(key), value)


def _coerce_bool(key: ConfigKey, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    _fail(key, _expected(key), value)


def _coerce_class(key: ConfigKey, value: Any) -> Any:
    """Strings stay strings: each key's resolver knows its short names ("json", "round_robin",
    Java class names) as well as dotted paths, and raises a ConfigError naming the key."""
    if isinstance(value, str):
        path = value.strip()
        if not path:
            raise ConfigError(f"{key.name} must not be an empty string")
        return path
    return value


def _coerce_list(key: ConfigKey, value: Any) -> tuple[Any, ...]:
    if isinstance(value, str):
        text = value.strip()
        items: list[Any] = [] if not text else [p.strip() for p in text.split(",")]
    elif isinstance(value, list | tuple):
        items = [v.strip() if isinstance(v, str) else v for v in value]
    else:
        _fail(key, _expected(key), value)
    for item in items:
        if item == "" or item is None:
            raise ConfigError(f"{key.name} must not contain empty entries, got {value!r}")
        if key.element is Type.STRING and not isinstance(item, str):
            _fail(key, "a list of strings", value)
    strings = [i for i in items if isinstance(i, str)]
    dupes = sorted({s for s in strings if strings.count(s) > 1})
    if dupes:
        raise ConfigError(f"{key.name} must not list an entry twice, got duplicate {', '.join(dupes)}")
    if key.element is Type.CLASS:
        items = [_coerce_class(key, i) for i in items]
    return tuple(items)


def coerce(key: ConfigKey, value: Any) -> Any:
    """One value of a declared key as ProducerConfig parses it, for the keys read by other owners
    (CIRCUIT_BREAKER_KEYS); ConfigError names the key and what is allowed."""
    return _coerce(key, value)


def _coerce(key: ConfigKey, value: Any) -> Any:
    """Turn one user value into the key's Python value, or raise ConfigError saying what is allowed."""
    if value is None:
        if key.default is None:
            return None
        _fail(key, _expected(key), None)
    t = key.type
    result: Any
    if t is Type.INT or t is Type.LONG:
        result = _coerce_int(key, value)
    elif t is Type.DOUBLE:
        result = _coerce_double(key, value)
    elif t is Type.BOOLEAN:
        result = _coerce_bool(key, value)
    elif t is Type.STRING:
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(key.validator, OneOf):
            value = str(value)  # acks=1 given as a number
        if not isinstance(value, str):
            _fail(key, _expected(key), value)
        result = value.strip()
    elif t is Type.PASSWORD:
        if isinstance(value, Password):
            result = value
        elif isinstance(value, str):
            result = Password(value)
        else:
            _fail(key, _expected(key), value)
    elif t is Type.LIST:
        result = _coerce_list(key, value)
    else:
        result = _coerce_class(key, value)

    validator = key.validator
    if isinstance(validator, Range):
        if not validator.ok(result):
            _fail(key, _expected(key), result)
    elif isinstance(validator, OneOf):
        normalised = validator.normalise(result)
        if normalised is None:
            _fail(key, _expected(key), result)
        result = normalised
    if key.transform is not None:
        result = key.transform(result)
    return result


_HOST_PORT = re.compile(
    r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.\-_]*)://)?(?:\[(?P<v6>[0-9A-Fa-f:.%A-Za-z]+)\]|(?P<host>[^:\[\]/\s]+)):(?P<port>\d+)$"
)


def parse_bootstrap_servers(value: str | Iterable[str]) -> list[tuple[str, int]]:
    """Parse ``host:port`` entries (``[v6]:port``, an optional ``scheme://``) as Java's ClientUtils does.

    Shared with the network layer, so that the config and the connection code agree on what an
    address is. Raises ConfigError naming the first entry that does not parse.
    """
    entries = (
        [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(v).strip() for v in value]
    )
    result: list[tuple[str, int]] = []
    for entry in entries:
        m = _HOST_PORT.match(entry)
        port = int(m.group("port")) if m else -1
        if m is None or not 0 < port <= 65535:
            raise ConfigError(
                f"bootstrap.servers entry {entry!r} is not host:port (IPv6 as [addr]:port, port 1-65535)"
            )
        result.append((m.group("v6") or m.group("host"), port))
    if not result:
        raise ConfigError("bootstrap.servers must list at least one host:port")
    return result


def check_bootstrap_schemes(value: str | Iterable[str], security_protocol: str, protocol_explicit: bool) -> None:
    """A ``scheme://`` on a bootstrap.servers entry must be the security.protocol in use.

    The Java client drops such a prefix without a word (ClientUtils keeps only host and port), so
    ``SSL://broker:9093`` with the default PLAINTEXT connects in plaintext; librdkafka refuses a
    listener name that disagrees with security.protocol. kproducer refuses it too, naming both:
    the protocol comes from security.protocol alone (docs/security.md).
    """
    entries = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(v).strip() for v in value]
    for entry in entries:
        m = _HOST_PORT.match(entry)
        scheme = m.group("scheme") if m else None
        if scheme is None or scheme.upper() == security_protocol:
            continue
        known = scheme.upper() in SECURITY_PROTOCOLS
        said = "" if protocol_explicit else " (the default)"
        if not known:
            raise ConfigError(
                f"bootstrap.servers entry {entry!r} starts with {scheme + '://'!r}, which is not a Kafka "
                f"security protocol ({', '.join(SECURITY_PROTOCOLS)}); give host:port, and the protocol "
                f"in security.protocol"
            )
        raise ConfigError(
            f"bootstrap.servers entry {entry!r} names {scheme.upper()}, but security.protocol is "
            f"{security_protocol}{said}: set security.protocol={scheme.upper()} (the protocol is "
            f"taken from security.protocol, never from the address), or drop the {scheme + '://'!r} prefix"
        )
