"""Exception classes named as another client names them, each one also kproducer's own class.

A program ported from aiokafka or kafka-python catches that client's exception
names (``except MessageSizeTooLargeError``); kproducer raises its own classes
(:mod:`kproducer.errors`, named after the Java client). :func:`build_errors`
makes, for each name of the other client, a class that derives both from that
client's hierarchy (rebuilt here with the same names, so ``except KafkaError``
and ``except BrokerResponseError`` keep their reach) and from the kproducer
class of the same condition, so ``except kproducer.errors.RecordTooLargeError``
keeps working too. :class:`ErrorTranslator` turns an exception kproducer raised
into the adapter's class at the adapter's boundary: the message, topic,
partition and the original (as ``__cause__``) are kept.

The broker errors are matched by their Kafka protocol code (the protocol
guide's error table, which both clients copy); the client-side ones by meaning,
listed by each adapter.
"""

from __future__ import annotations

import builtins
import importlib
from collections.abc import MutableMapping
from typing import Any, cast

from kproducer import errors as kerrors

__all__ = ["ErrorTranslator", "build_errors"]


class ErrorTranslator:
    """Maps kproducer exceptions to an adapter's classes (built by :func:`build_errors`)."""

    __slots__ = ("_by_kproducer", "_root")

    def __init__(self, by_kproducer: dict[type[BaseException], type[BaseException]], root: type[BaseException]) -> None:
        self._by_kproducer = by_kproducer
        self._root = root

    def target(self, cls: type[BaseException]) -> type[BaseException] | None:
        """The adapter's class for a kproducer class (its nearest mapped ancestor's), or None."""
        for base in cls.__mro__:
            found = self._by_kproducer.get(base)
            if found is not None:
                return found
        return None

    def __call__(self, error: BaseException) -> BaseException:
        """``error`` as the adapter's class; anything not from kproducer (TypeError...) is returned as is."""
        if not isinstance(error, kerrors.KafkaError) or isinstance(error, self._root):
            return error
        cls = self.target(type(error))
        if cls is None:
            return error
        # Every class a kproducer error maps to derives from kproducer's KafkaError (its __init__).
        make: Any = cls
        out = make(error.message, topic=error.topic, partition=error.partition)
        vars(out).update(vars(error))  # the whole instance state: message, topic, partition, transaction flags
        out.__cause__ = error
        return cast(BaseException, out)


def build_errors(module: str, namespace: MutableMapping[str, Any], table: str, peer: str | None = None) -> ErrorTranslator:
    """Create the classes described by ``table`` in ``namespace`` (a module's globals); return their translator.

    One line per class, in dependency order: ``Name(Parent, ...) = target`` where
    the parents are earlier names (or a builtin exception), and the optional
    target is ``#code`` (a Kafka protocol error code: kproducer's class for that
    code) or the name of a class of :mod:`kproducer.errors`. ``Alias = Name``
    adds a second name; ``KproducerClass -> Name`` translates one more
    kproducer class to an existing name. Each class derives from its parents, then from its
    kproducer class (so kproducer's ``code``, ``name``, ``retriable`` and
    ``__str__`` apply); one with a code also gets ``errno``, the attribute
    aiokafka and kafka-python programs read. A kproducer class is translated to
    the last line naming it; a code kproducer has no class for gives a class
    that derives from BrokerResponseError and is never raised.

    ``peer``: the other client's errors module. When it is installed, each class
    also derives from the peer's class of the same name, so that a program that
    still imports its exceptions from the peer (it consumes with the peer's
    consumer, say) catches the producer's errors too.
    """
    peer_module = _import_peer(peer)
    by_kproducer: dict[type[BaseException], type[BaseException]] = {}
    root: type[BaseException] | None = None
    for raw in table.strip().splitlines():
        line = raw.strip()
        if not line:
            continue
        if "->" in line:  # one more kproducer class translated to an existing name
            source, _, name = (part.strip() for part in line.partition("->"))
            by_kproducer[getattr(kerrors, source)] = namespace[name]
            continue
        head, _, target = (part.strip() for part in line.partition("="))
        if "(" not in head:
            namespace[head] = namespace[target]  # an alias
            continue
        name, _, rest = head.partition("(")
        parents: list[type[BaseException]] = [
            namespace[p] if p in namespace else getattr(builtins, p) for p in (x.strip() for x in rest[:-1].split(",")) if p
        ]
        code: int | None = None
        kclass: type[kerrors.KafkaError] | None = None
        mapped = True
        if target.startswith("#"):
            code = int(target[1:])
            kclass = kerrors.error_class_for_code(code)
            if kclass is kerrors.UnknownServerError and code != -1:
                kclass, mapped = kerrors.BrokerResponseError, False
        elif target:
            kclass = getattr(kerrors, target)
        if kclass is not None and not any(issubclass(p, kclass) for p in parents):
            parents.insert(0 if parents and parents[0] in (RuntimeError, Exception) else len(parents), kclass)
        peer_cls = getattr(peer_module, name, None)
        if (
            isinstance(peer_cls, type) and issubclass(peer_cls, BaseException)
            and not any(issubclass(p, peer_cls) for p in parents)
        ):
            # Before any builtin base (RuntimeError, Exception), which the peer's class derives from too.
            builtin_at = [i for i, p in enumerate(parents) if p.__module__ == "builtins"]
            parents.insert(builtin_at[0] if builtin_at else len(parents), peer_cls)
        attrs: dict[str, Any] = {"__module__": module, "__qualname__": name, "__doc__": _doc(name, kclass, mapped)}
        if code is not None:
            attrs["errno"] = code
        cls = type(name, tuple(parents) or (Exception,), attrs)
        namespace[name] = cls
        if root is None:
            root = cls
        if kclass is not None and mapped:
            by_kproducer[kclass] = cls
    assert root is not None
    return ErrorTranslator(by_kproducer, root)


def _import_peer(peer: str | None) -> Any:
    """The peer's errors module if it is installed (it is optional: nothing here needs it)."""
    if peer is None:
        return None
    try:
        return importlib.import_module(peer)
    except ImportError:
        return None


def _doc(name: str, kclass: type[BaseException] | None, mapped: bool) -> str:
    if kclass is None or not mapped:
        return f"``{name}``: kproducer raises no such error; the name is here so that ``except {name}`` still runs."
    return f"``{name}``, also kproducer's :class:`~{kclass.__module__}.{kclass.__qualname__}`."
