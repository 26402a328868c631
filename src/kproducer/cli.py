"""The ``kproducer`` command line.

Subcommands register themselves in ``SUBCOMMANDS``: a name maps to a function
that adds its arguments to a subparser and returns the handler to run; the
function's docstring is the subcommand's help. Adding ``produce`` or
``perf-test`` means writing one such function.

Exit codes: 0 success, 1 when records failed or a requested thing is missing,
2 for a usage mistake (bad option, missing file, invalid config). Mistakes print
one line naming what is wrong, never a traceback (``-v`` adds debug logging).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
from collections.abc import Callable, Sequence

from kproducer.errors import ConfigError, KafkaError, error_class_for_code
from kproducer.metadata import Cluster
from kproducer.properties import UsageError

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


def describe_error_code(code: int) -> str:
    """``UNKNOWN_TOPIC_OR_PARTITION (3)``: the Kafka error name with its code."""
    cls = error_class_for_code(code)
    return f"{cls.name} ({code})" if cls.code == code else f"error {code}"


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
            rows.append((t, "-", "-", "-", "-", describe_error_code(err) if err else "not found"))
        for p in parts:
            rows.append(
                (
                    t,
                    p.partition,
                    p.leader,
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr)),
                    describe_error_code(err) if err else "",
                )
            )
    lines += ["", f"Topics ({len(names)}):"]
    lines += [
        "  " + line for line in _table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "ERROR"), rows)
    ]
    return "\n".join(lines)


@subcommand("produce")
def _produce_command(parser: argparse.ArgumentParser) -> Handler:
    """Send lines from stdin or a file to a topic, one record per line, like kafka-console-producer.

    Prints "N delivered, M failed" and each distinct error; exits 1 if any record failed.
    """
    from kproducer import console_produce

    console_produce.add_arguments(parser)
    return console_produce.main


@subcommand("perf-test")
def _perf_test_command(parser: argparse.ArgumentParser) -> Handler:
    """Measure throughput and latency, like kafka-producer-perf-test.

    Latency is from send() to the delivery callback, for delivered records only;
    failures are counted and their distinct errors listed. Exits 1 if any record failed.
    """
    from kproducer import perf

    perf.add_arguments(parser)
    return perf.main


def missing_topics(cluster: Cluster, topics: Sequence[str] | None) -> list[str]:
    """The requested topics the cluster has no partitions for."""
    return [t for t in topics or () if not cluster.partitions_for_topic(t)]


@subcommand("metadata")
def _metadata_command(parser: argparse.ArgumentParser) -> Handler:
    """Brokers, and each topic's partitions with leader, replicas, ISR and errors.

    Exits 1 when a topic asked for with --topic does not exist (its error is shown).
    """
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help="brokers to ask for metadata (or bootstrap.servers in --command-config)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=None,
        metavar="TOPIC",
        help="show only this topic (repeatable); without it, every topic; never creates a topic",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="how long to wait for the brokers (default 10)"
    )

    def run(args: argparse.Namespace) -> int:
        from kproducer.config import ProducerConfig
        from kproducer.network.client import NetworkClient, security_options
        from kproducer.properties import client_properties

        props = client_properties(args)
        if args.bootstrap_servers:
            props["bootstrap.servers"] = args.bootstrap_servers
        cfg = ProducerConfig(props)  # the same keys, checks and security settings as a producer
        client = NetworkClient(
            bootstrap_servers=cfg.bootstrap_servers,
            client_id="kproducer-cli",
            request_timeout_ms=int(args.timeout * 1000),
            **security_options(cfg),
        )
        try:
            client.metadata.allow_auto_topic_creation = False
            client.fetch_metadata(args.topic, int(args.timeout * 1000))
            cluster = client.metadata.cluster
            print(format_metadata(cluster, args.topic))
        finally:
            client.close()
        missing = missing_topics(cluster, args.topic)
        for t in missing:
            err = cluster.topic_errors.get(t)
            print(
                f"kproducer metadata: topic {t!r} not found"
                + (f": {describe_error_code(err)}" if err else ""),
                file=sys.stderr,
            )
        return 1 if missing else 0

    return run


def version_line() -> str:
    """``kproducer 0.1.0 (Python 3.12.1, C extensions)``, or pure Python with the cause."""
    from kproducer import __version__
    from kproducer.record.c_extension import native_available

    status = native_available()
    runs = status.implementation if status else f"{status.implementation}: {status.reason}"
    return f"kproducer {__version__} (Python {sys.version.split()[0]}, {runs})"


class _VersionAction(argparse.Action):
    """``--version``: the line is worked out only when asked for (it loads every extension)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(version_line())
        parser.exit()


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    parser = argparse.ArgumentParser(
        prog="kproducer",
        description="kproducer command line tools: produce records, measure a cluster, read its metadata.",
        epilog="Run 'kproducer COMMAND --help' for a command's options.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the version and which implementation runs (C or pure Python), and exit"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging to stderr (warnings are always shown)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="the command to run")
    handlers: dict[str, Handler] = {}
    from kproducer.properties import add_client_arguments

    for name, setup in SUBCOMMANDS.items():
        doc = inspect.cleandoc(setup.__doc__ or "")
        summary = doc.splitlines()[0] if doc else None
        sub_parser = sub.add_parser(
            name, help=summary, description=doc or None, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        handlers[name] = setup(sub_parser)
        add_client_arguments(sub_parser)  # --command-config and --producer-property, on every subcommand
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s" if args.verbose else "%(levelname)s: %(message)s",
    )
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        print(f"kproducer {args.command}: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ConfigError) as e:
        print(f"kproducer {args.command}: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"kproducer {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a file that cannot be read, a closed pipe
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"kproducer {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # Run the imported module's main, not this __main__ copy: subcommands raise kproducer.properties.UsageError.
    from kproducer.cli import main as _main

    sys.exit(_main())
