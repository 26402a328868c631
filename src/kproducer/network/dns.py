"""Name resolution for broker connections: bootstrap entries at start-up, node names at each attempt.

As Java's ClientUtils (``parseAndValidateAddresses``, ``resolve``) and the ``client.dns.lookup``
modes ``use_all_dns_ips`` and ``resolve_canonical_bootstrap_servers_only``. The entries
themselves are parsed by :func:`kproducer.config.parse_bootstrap_servers`, the same rules the
config applies to ``bootstrap.servers``.
"""

from __future__ import annotations

import logging
import socket

from kproducer.errors import ConfigError

__all__ = ["DNS_LOOKUP_MODES", "format_address", "lookup", "resolve_bootstrap", "resolve_node"]

# The NetworkClient's log lines keep its logger name, which operators filter on.
logger = logging.getLogger("kproducer.network.client")

DNS_LOOKUP_MODES = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")

# A resolved address: (socket family, (ip, port)).
Address = tuple[int, tuple[str, int]]


def format_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def lookup(host: str, port: int) -> list[Address]:
    """Every (family, (ip, port)) the name resolves to, in resolver order, without repeats."""
    out: list[Address] = []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as e:  # a label the IDNA codec refuses: as unresolvable as any other
        raise socket.gaierror(f"{host}: {e}") from e
    for family, _t, _p, _canon, sockaddr in infos:
        entry = (int(family), (str(sockaddr[0]), int(sockaddr[1])))
        if entry not in out:
            out.append(entry)
    if not out:
        raise socket.gaierror(f"{host} resolves to no address")
    return out


def _canonical_host_name(ip: str) -> str:
    """The name a reverse lookup gives for ``ip``, or the IP itself (Java's getCanonicalHostName)."""
    try:
        return socket.gethostbyaddr(ip)[0] or ip
    except OSError:
        return ip


def resolve_bootstrap(
    entries: list[tuple[str, int]], client_dns_lookup: str
) -> list[tuple[str, int, list[Address]]]:
    """Resolve bootstrap entries now, as Java's ClientUtils.parseAndValidateAddresses does.

    An entry that does not resolve is skipped with a warning; only when none resolves is it a
    ConfigError. With resolve_canonical_bootstrap_servers_only each address of an entry is
    replaced by its canonical host name (reverse lookup), and those names are used from then on.
    """
    out: list[tuple[str, int, list[Address]]] = []
    failed: list[str] = []
    for host, port in entries:
        entry = format_address(host, port)
        try:
            addresses = lookup(host, port)
        except OSError as e:
            logger.warning("bootstrap.servers entry %s cannot be resolved (%s); skipping it", entry, e)
            failed.append(f"{entry} ({e})")
            continue
        if client_dns_lookup == "use_all_dns_ips":
            out.append((host, port, addresses))
            continue
        for _family, (ip, _port) in addresses:
            name = _canonical_host_name(ip)
            if any((name, port) == (h, p) for h, p, _a in out):
                continue
            try:
                out.append((name, port, lookup(name, port)))
            except OSError as e:
                logger.warning(
                    "bootstrap.servers entry %s: its canonical host name %s cannot be resolved (%s)",
                    entry,
                    name,
                    e,
                )
                failed.append(f"{entry} as {name} ({e})")
    if not out:
        raise ConfigError(f"no resolvable bootstrap.servers entry: {', '.join(failed)}")
    return out


def resolve_node(host: str, port: int, address: str) -> list[Address]:
    """A node's addresses for a connection attempt; none (with a warning) when the name does not resolve."""
    try:
        return lookup(host, port)
    except OSError as e:
        logger.warning("cannot resolve %s: %s", address, e)
        return []
