"""The ConfigDef vocabulary every key of the table is written in (Kafka's ``ConfigDef``).

``Type`` and ``Importance`` are ConfigDef's enums, ``Range`` and ``OneOf`` its ``Range`` and
``ValidString`` validators, ``ConfigKey`` one declared key and ``Password`` its secret value type.
They hold no producer knowledge: the producer's keys are in :mod:`kproducer.config.keys`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

#: The bounds of ConfigDef's INT and LONG types (a Java int and long).
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Type(StrEnum):
    """The Java ConfigDef types; they decide how a value (often a string) is coerced."""

    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


class Importance(StrEnum):
    """How likely a user needs to touch the key; orders the generated reference."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password:
    """A secret config value: its repr and str never reveal it, so logs and errors stay clean."""

    __slots__ = ("_value",)

    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        """The secret itself, for the code that must send it (SASL)."""
        return self._value

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Password, self._value))

    def __reduce__(self) -> tuple[object, ...]:
        return (Password, (self._value,))


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric bounds (inclusive); ``extra`` lists single values allowed outside them (gzip's -1)."""

    min: float | None = None
    max: float | None = None
    extra: tuple[float, ...] = ()

    def ok(self, value: float) -> bool:
        if value in self.extra:
            return True
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            core = f"between {_num(self.min)} and {_num(self.max)}"
        elif self.min is not None:
            core = f">= {_num(self.min)}"
        elif self.max is not None:
            core = f"<= {_num(self.max)}"
        else:
            core = ""
        if self.extra:
            alts = " or ".join(_num(v) for v in self.extra)
            return f"{alts} or {core}" if core else alts
        return core


@dataclass(frozen=True, slots=True)
class OneOf:
    """An enumeration of allowed strings; ``case_insensitive`` values are normalised to the listed spelling."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def normalise(self, value: str) -> str | None:
        if value in self.values:
            return value
        if self.case_insensitive:
            for allowed in self.values:
                if allowed.lower() == value.lower():
                    return allowed
        return None

    def describe(self) -> str:
        return "one of " + ", ".join(self.values)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


class _NoDefault:
    """Marks a key the user must set (bootstrap.servers)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One row of the table: everything the producer knows about a key."""

    name: str
    type: Type
    default: Any
    importance: Importance
    doc: str
    validator: Range | OneOf | None = None
    aliases: tuple[str, ...] = ()
    #: For LIST keys: the type of each element (STRING or CLASS).
    element: Type = Type.STRING
    #: Maps the validated value to what the attribute holds (acks "all" -> -1).
    transform: Callable[[Any], Any] | None = None
    #: Extra sentence for the reference (what None or -1 means).
    note: str = ""

    @property
    def attr(self) -> str:
        """The snake_case attribute and keyword name."""
        return self.name.replace(".", "_")

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT
