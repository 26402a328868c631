"""The ``kproducer`` command line.

Subcommands register themselves in ``SUBCOMMANDS``: a name maps to a function
that adds its arguments to a subparser and returns the handler to run. Adding
``produce`` or ``perf-test`` means writing one such function.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from kproducer.errors import KafkaError
from kproducer.metadata import Cluster

__all__ = ["main", "SUBCOMMANDS", "format_metadata"]

logger = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]
SUBCOMMANDS: dict[str, Callable[[argparse.ArgumentParser], Handler]] = {}


def subcommand(
    name: str,
) -> Callable[[Callable[[argparse.ArgumentParser], Handler]], Callable[[argparse.ArgumentParser], Handler]]:
    def register(
        fn: Callable[[argparse.ArgumentParser], Handler],
    ) -> Callable[[argparse.ArgumentParser], Handler]:
        SUBCOMMANDS[name] = fn
        return fn

    return register


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]


def format_metadata(cluster: Cluster, topics: Sequence[str] | None = None) -> str:
    """Brokers, then one row per partition with its leader, replicas and ISR, aligned."""
    lines = [f"Cluster id: {cluster.cluster_id}  controller: {cluster.controller_id}", "", "Brokers:"]
    brokers = [
        (n.id, n.host, n.port, n.rack or "") for n in sorted(cluster.nodes.values(), key=lambda n: n.id)
    ]
    lines += ["  " + line for line in _table(("ID", "HOST", "PORT", "RACK"), brokers)]
    names = sorted(set(topics) if topics else cluster.topics | set(cluster.topic_errors))
    rows: list[tuple[object, ...]] = []
    for t in names:
        err = cluster.topic_errors.get(t)
        parts = cluster.partitions_for_topic(t)
        if not parts:
            rows.append((t, "-", "-", "-", "-", f"error {err}" if err else "not found"))
        for p in parts:
            rows.append(
                (
                    t,
                    p.partition,
                    p.leader,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                    f"error {err}" if err else "",
                )
            )
    lines += ["", f"Topics ({len(names)}):"]
    lines += [
        "  " + line for line in _table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "ERROR"), rows)
    ]
    return "\n".join(lines)


@subcommand("produce")
def _produce_command(parser: argparse.ArgumentParser) -> Handler:
    """Lines from stdin or a file into a topic, with a delivered/failed summary."""
    from kproducer import console_produce

    console_produce.add_arguments(parser)
    return console_produce.main


@subcommand("perf-test")
def _perf_test_command(parser: argparse.ArgumentParser) -> Handler:
    """Throughput and latency, like kafka-producer-perf-test."""
    from kproducer import perf

    perf.add_arguments(parser)
    return perf.main


@subcommand("metadata")
def _metadata_command(parser: argparse.ArgumentParser) -> Handler:
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    parser.add_argument("--topic", action="append", default=None, help="only these topics (repeatable)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for metadata")

    def run(args: argparse.Namespace) -> int:
        from kproducer.network.client import NetworkClient

        client = NetworkClient(
            bootstrap_servers=args.bootstrap_servers,
            client_id="kproducer-cli",
            request_timeout_ms=int(args.timeout * 1000),
        )
        try:
            client.metadata.allow_auto_topic_creation = False
            client.fetch_metadata(args.topic, int(args.timeout * 1000))
            print(format_metadata(client.metadata.cluster, args.topic))
        finally:
            client.close()
        return 0

    return run


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    parser = argparse.ArgumentParser(prog="kproducer", description="kproducer command line tools")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict[str, Handler] = {}
    for name, setup in SUBCOMMANDS.items():
        handlers[name] = setup(sub.add_parser(name))
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    try:
        return handlers[args.command](args)
    except KafkaError as e:
        print(f"kproducer {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
