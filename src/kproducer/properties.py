"""Java-style ``.properties`` files and the client options every CLI subcommand shares.

Kafka's own tools take ``--command-config client.properties`` (security settings and the like) and
``--producer-property key=value``; ``kproducer`` accepts both on every subcommand, so
``kproducer metadata`` reaches a secured cluster with the file a Java tool already uses.
The file format is ``java.util.Properties``: ``key=value`` or ``key: value`` or ``key value``,
``#``/``!`` comments, a trailing backslash continues a line, and ``\\t \\n`` and ``\\u00e9``-style escapes.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from kproducer.errors import ConfigError

__all__ = ["UsageError", "add_client_arguments", "client_properties", "parse_properties", "read_properties"]


class UsageError(Exception):
    """A user mistake a CLI subcommand reports in one line with exit code 2 (``kproducer.cli``)."""

_SEPARATOR = re.compile(r"(?<!\\)(?:\s*[=:]\s*|\s+)")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a properties text, in order (a later key wins, as in Java)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        stripped = line.rstrip("\\")
        if (len(line) - len(stripped)) % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    out: dict[str, str] = {}
    for line in logical:
        m = _SEPARATOR.search(line)
        if m is None:
            key, value = line, ""
        else:
            key, value = line[: m.start()], line[m.end() :]
        out[_unescape(key)] = _unescape(value)
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--command-config {str(path)!r} cannot be read: {e.strerror or e}") from e
    return parse_properties(text)


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """``--command-config`` and ``--producer-property`` (unless the subcommand has its own)."""
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client settings from a Java-style properties file (security.protocol, ssl.*, sasl.*, ...)",
    )
    if "--producer-property" not in parser._option_string_actions:
        parser.add_argument(
            "--producer-property",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a client setting; repeatable, and wins over --command-config",
        )


def client_properties(args: argparse.Namespace, *extra: list[str]) -> dict[str, Any]:
    """The settings from ``--command-config``, then ``--producer-property`` and ``extra`` KEY=VALUE lists."""
    props: dict[str, Any] = {}
    path = getattr(args, "command_config", None)
    if path:
        props.update(read_properties(path))
    for items in (getattr(args, "producer_property", None) or [], *extra):
        for item in items:
            if "=" not in item:
                raise ConfigError(f"--producer-property entries must be key=value, got {item!r}")
            key, value = item.split("=", 1)
            props[key.strip()] = value
    return props
