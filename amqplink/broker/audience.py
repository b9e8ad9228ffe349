"""The names a namespace answers to: a token's audience must name this broker, not another.

A SAS token is "valid for everything under its URI" (PROTOCOL.md); a token signed with
this namespace's key for ``sb://other-namespace.servicebus.windows.net/`` is not a token
for this namespace, so its host must be one of the namespace's own names:

* the host names it was given (``--host-name``, ``Broker(host_names=...)``), each with an
  optional port (``localhost:5673`` for a port published by a container);
* the address it listens on, and the local address a connection actually reached (for a
  broker listening on every address, ``0.0.0.0``), and the machine's host name then;
* on loopback (or every address), the loopback names the official SDK uses with the
  emulator: ``localhost``, ``127.0.0.1``, ``::1`` (``UseDevelopmentEmulator=true``
  connection strings name ``localhost``).

A port, when the audience has one (the SDK writes ``sb://127.0.0.1:PORT/queue`` for an
endpoint with an explicit port), must be one the broker listens on (AMQP or HTTPS), the
one the connection reached, or the one a given host name carries. The scheme may be
``sb``, ``amqp``, ``amqps``, ``http`` or ``https`` (or absent); user information
(``user@host``) is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_NAMES", "WILDCARD_HOSTS", "NamespaceNames", "split_audience"]

LOOPBACK_NAMES = frozenset(("localhost", "127.0.0.1", "::1"))
"""What a client on the same machine calls a broker on loopback (the SDK's emulator mode uses ``localhost``)."""
WILDCARD_HOSTS = frozenset(("", "0.0.0.0", "::"))
"""Listen addresses meaning every address of the machine."""
_SCHEMES = frozenset(("sb", "amqp", "amqps", "http", "https"))


def _host(text: str) -> str:
    """A host name as compared: lower case, no brackets, no trailing dot."""
    return text.strip().strip("[]").rstrip(".").lower()


def split_audience(audience: str) -> tuple[str, int | None, str] | None:
    """``(host, port, path)`` of an audience URI (``sb://Host:5671/q/`` -> ``("host", 5671, "q")``),
    or None when it is not a plain URI of a host (user information, a bad port, another scheme)."""
    text = audience.strip()
    scheme, sep, _ = text.partition("://")
    if not sep:
        text = "//" + text
    elif scheme.lower() not in _SCHEMES:
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    netloc = parts.netloc
    if "@" in netloc or parts.query or parts.fragment or not parts.hostname:
        return None
    return _host(parts.hostname), port, parts.path.strip("/").lower()


def _named(entry: str) -> tuple[str, int | None]:
    """``host`` or ``host:port`` (``[::1]:5672`` for IPv6) of a given host name."""
    split = split_audience(entry)
    if split is None or split[2]:
        raise ValueError(f"{entry!r} is not a host name (or host:port) for the namespace")
    return split[0], split[1]


@dataclass
class NamespaceNames:
    """The host names, and ports, an audience may name for this namespace (see the module)."""

    hosts: set[str] = field(default_factory=set)
    """Host names valid with any of :attr:`ports` (or none)."""
    host_ports: set[tuple[str, int]] = field(default_factory=set)
    """Given ``host:port`` pairs, valid as they are."""
    ports: set[int] = field(default_factory=set)
    """The ports the broker listens on."""

    @classmethod
    def of(cls, given: Iterable[str] = ()) -> NamespaceNames:
        """The names given (``host`` or ``host:port``); ``ValueError`` for one that is not."""
        names = cls()
        for entry in given:
            host, port = _named(entry)
            if port is None:
                names.hosts.add(host)
            else:
                names.host_ports.add((host, port))
        return names

    def listen(self, host: str, port: int) -> None:
        """Add the address the broker listens on (its loopback names too, or the machine's
        name for every address)."""
        self.ports.add(port)
        name = _host(host)
        if name in WILDCARD_HOSTS:
            self.hosts |= LOOPBACK_NAMES
            self.hosts.add(_host(socket.gethostname()))
            return
        self.hosts.add(name)
        try:
            loopback = ipaddress.ip_address(name).is_loopback
        except ValueError:
            loopback = name == "localhost"
        if loopback:
            self.hosts |= LOOPBACK_NAMES

    def allows(self, audience: str, local: object = None) -> bool:
        """Whether ``audience``'s host (and port) name this namespace; ``local`` is the socket
        address a connection reached (``(host, port, ...)``), itself one of its names."""
        split = split_audience(audience)
        if split is None:
            return False
        host, port, _ = split
        local_host, local_port = None, None
        if isinstance(local, tuple) and len(local) >= 2:
            local_host, local_port = _host(str(local[0])), local[1]
        if port is not None and (host, port) in self.host_ports:
            return True
        if host not in self.hosts and host != local_host:
            return False
        return port is None or port in self.ports or port == local_port

    def describe(self) -> str:
        """The names, for an error message."""
        names = sorted(self.hosts) + sorted(f"{h}:{p}" for h, p in self.host_ports)
        return ", ".join(names) or "(none yet)"
