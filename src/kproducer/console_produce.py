"""``kproducer produce``: lines from stdin or a file into a topic, like kafka-console-producer."""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["add_arguments", "main", "parse_key_values"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]", help="brokers to connect to")
    p.add_argument("--topic", required=True, help="the topic to send to")
    p.add_argument("--file", metavar="PATH", help="read lines from this file instead of stdin")
    p.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at the first occurrence of this string into key and value (lines without it have no key)",
    )
    p.add_argument(
        "--partition", type=int, default=None, metavar="N", help="send every record to this partition (default: partitioner)"
    )
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE", help="a header added to every record (repeatable)")
    p.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer setting by its Java name, e.g. linger.ms=5 (repeatable)",
    )


def parse_key_values(items: Sequence[str], option: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` option values; a malformed one is a usage error naming the option."""
    from kproducer.properties import UsageError

    out = []
    for item in items:
        if "=" not in item:
            raise UsageError(f"{option} entries must be KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out.append((k.strip(), v))
    return out


def main(args: argparse.Namespace) -> int:
    from kproducer.producer import Producer
    from kproducer.properties import client_properties

    props: dict[str, Any] = {**client_properties(args), "bootstrap.servers": args.bootstrap_servers}
    headers = [(k, v.encode()) for k, v in parse_key_values(args.header, "--header")]

    delivered = 0
    failed = 0
    errors: dict[str, int] = {}
    lock = threading.Lock()

    def on_delivery(md: Any, exc: BaseException | None) -> None:
        nonlocal delivered, failed
        with lock:
            if exc is None:
                delivered += 1
            else:
                failed += 1
                errors[str(exc)] = errors.get(str(exc), 0) + 1

    sep = args.key_separator.encode() if args.key_separator else None
    with contextlib.ExitStack() as stack:
        # The file first: a wrong path is reported before any connection is made.
        source = stack.enter_context(open(args.file, "rb")) if args.file else sys.stdin.buffer
        producer = stack.enter_context(Producer(props))
        for raw in source:
            line = raw.rstrip(b"\r\n")
            key = None
            if sep is not None and sep in line:
                key, line = line.split(sep, 1)
            producer.send(
                args.topic, line, key, partition=args.partition, headers=list(headers) or None, callback=on_delivery
            )
        producer.flush()
    print(f"{delivered} delivered, {failed} failed", file=sys.stderr)
    for msg, n in errors.items():
        print(f"  {n} x {msg}", file=sys.stderr)
    return 0 if failed == 0 else 1
