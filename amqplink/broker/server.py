"""The embedded broker: :class:`Broker`, the facade that listens, accepts connections and
hands each to the broker it serves: a Service Bus namespace (:mod:`.sbserver`) or plain
in-memory queues (:mod:`.plainserver`, whose module says what a peer's links do there).

Everything a client can make grow is bounded, each by a named default that the
constructor can change: the time to open and the number of connections
(:class:`~amqplink.aio.server.ServerLimits`), silence (``idle_timeout``, advertised
to the peer as half of it, 2.4.5), a message (``max_message_size``, refused with
``amqp:link:message-size-exceeded``) and a queue (``max_queue_bytes``: a message
that does not fit is rejected with ``amqp:resource-limit-exceeded``; from half of it
producers get no credit).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import ssl
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from amqplink import MissingExtraError
from amqplink.aio.server import DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Acceptor, ServerLimits, serve
from amqplink.aio.transport import EngineProtocol
from amqplink.broker.config import DEFAULT_IDLE_TIMEOUT, BrokerConfig, ConfigError, NamespaceConfig, load_config
from amqplink.broker.durable import Persistence
from amqplink.broker.entities import DEFAULT_MAX_QUEUE_BYTES, PlainQueue
from amqplink.broker.faults import Faults
from amqplink.broker.namespace import Namespace
from amqplink.broker.plainserver import DEFAULT_MAX_MESSAGE_SIZE, PlainHost
from amqplink.broker.rights import AccessRule
from amqplink.broker.sbserver import ServiceBusHost
from amqplink.codec.types import Symbol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.events import Event
from amqplink.protocol.definitions import Error
from amqplink.sbwire.conditions import NOT_FOUND

if TYPE_CHECKING:  # aiohttp (the ``broker`` extra) is imported only when the management API is served
    from amqplink.broker.http import Certificate, ManagementApi

__all__ = ["DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_MESSAGE_SIZE", "Broker"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _servicebus_host(
    config: BrokerConfig | str | os.PathLike[str] | None,
    keys: Mapping[str, str] | None,
    require_auth: bool | None,
    credit_window: int,
    data_dir: str | os.PathLike[str] | None,
    rules: Iterable[AccessRule] = (),
    host_names: Iterable[str] = (),
) -> ServiceBusHost:
    """The host of the configuration's first namespace (the default one), holding the hosts
    of the others (:attr:`ServiceBusHost.others`): each namespace its own entities, keys
    (``rules``/``keys`` given to the broker hold for every one) and store (the first in
    ``data_dir``, another in ``data_dir/namespaces/<name>``)."""
    if config is not None and not isinstance(config, BrokerConfig):
        config = load_config(config)
    configs: tuple[NamespaceConfig | None, ...] = (None,) if config is None else config.namespaces
    seen: set[str] = set()
    hosts: list[ServiceBusHost] = []
    given = list(rules)
    for index, ns_config in enumerate(configs):
        namespace = Namespace(ns_config)
        if namespace.name.lower() in seen:
            raise ConfigError(f"UserConfig.Namespaces[{index}].Name: {namespace.name!r} is defined twice")
        seen.add(namespace.name.lower())
        persistence = None
        if data_dir is not None:
            directory = Path(data_dir) if index == 0 else Path(data_dir) / "namespaces" / namespace.name.lower()
            persistence = Persistence(directory)
            persistence.commits.wait_for_bind()  # bound when served (ServiceBusHost.start)
            persistence.attach(namespace)
        # the namespace keeps its queues' and topics' own rules (Namespace.access_rules)
        configured = () if ns_config is None else [r for r in ns_config.authorization_rules if not r.entity]
        hosts.append(
            ServiceBusHost(
                namespace,
                keys=keys,
                rules=[*configured, *given],
                host_names=host_names if index == 0 else (),
                require_auth=require_auth,
                credit_window=credit_window,
                persistence=persistence,
            )
        )
    primary = hosts[0]
    primary.others = hosts[1:]
    return primary


log = logging.getLogger(__name__)


class Broker:
    """An in-memory AMQP 1.0 queue broker on the amqplink engine (server role).

    ``credit_window``: credit granted to each producer link. ``max_message_size``
    (bytes): larger messages detach the link with ``amqp:link:message-size-exceeded``.
    ``max_queue_bytes``: a queue's size limit (stored, held unsettled, dead-lettered).
    ``idle_timeout`` (seconds, ``None``: none): silent connections are closed with
    ``amqp:resource-limit-exceeded``. ``handshake_timeout`` (seconds): time from TCP
    connect to open. ``max_connections``: beyond it, new connections are closed with
    ``amqp:resource-limit-exceeded``. ``data_dir``: keep the Service Bus namespace in
    this directory (an append-only journal, read back on start); a transfer is settled only
    once what it caused is written there. ``http_port`` (Service Bus namespaces only): also
    serve the management REST API over HTTPS on that port (0: any free one), with
    ``http_cert=(cert.pem, key.pem)`` or a self-signed certificate made at start
    (:attr:`http_ca` is its file), and AMQP over WebSockets at ``/$servicebus/websocket``
    there (the AMQP port's connection cap, handshake and idle time-outs apply to those
    connections too); needs aiohttp (the ``broker`` extra; :meth:`start` raises
    :class:`~amqplink.MissingExtraError` without it). ``keys`` (name ->
    key: namespace Manage rules) and ``rules`` (:class:`~amqplink.broker.rights.AccessRule`,
    with rights and scope; a configuration's ``AuthorizationRules`` come too) authorize
    clients; ``host_names`` (``host`` or ``host:port``) are names a token's audience may
    give besides the listen address (:mod:`amqplink.broker.audience`).
    """

    def __init__(
        self,
        config: BrokerConfig | str | os.PathLike[str] | None = None,
        *,
        servicebus: bool | None = None,
        keys: Mapping[str, str] | None = None,
        require_auth: bool | None = None,
        credit_window: int = 1000,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        data_dir: str | os.PathLike[str] | None = None,
        http_port: int | None = None,
        http_cert: tuple[str, str] | None = None,
        rules: Iterable[AccessRule] = (),
        host_names: Iterable[str] = (),
    ) -> None:
        if credit_window < 1:
            raise ValueError(f"credit_window must be at least 1, not {credit_window}")
        if max_message_size < 1 or max_queue_bytes < 1:
            raise ValueError("max_message_size and max_queue_bytes must be positive")
        self.credit_window = credit_window
        self.idle_timeout = idle_timeout
        # Validated here, so that a bad value fails before start().
        self.limits = ServerLimits(handshake_timeout=handshake_timeout, max_connections=max_connections)
        ConnectionConfig(idle_timeout=idle_timeout)
        self.plain = PlainHost(
            credit_window=credit_window, max_message_size=max_message_size, max_queue_bytes=max_queue_bytes
        )
        """The plain queue broker this broker serves when it serves no Service Bus namespace."""
        self.servicebus: ServiceBusHost | None = None
        """The Service Bus namespace this broker serves, when given a config or ``servicebus=True``."""
        if servicebus or (servicebus is None and (config is not None or data_dir is not None)):
            self.servicebus = _servicebus_host(config, keys, require_auth, credit_window, data_dir, rules, host_names)
        elif data_dir is not None:
            raise ValueError("data_dir keeps a Service Bus namespace: it cannot be used with servicebus=False")
        self.http_port_wanted = http_port
        """Port of the management REST API (``None``: not served; 0: any free port); see :mod:`.http`."""
        self.http_cert = http_cert
        """``(cert.pem, key.pem)`` for the management API; ``None``: a self-signed one made at start."""
        self.management: ManagementApi | None = None
        self.http_certificate: Certificate | None = None
        if http_port is not None and self.servicebus is None:
            raise ValueError("http_port needs a Service Bus namespace: give a config or servicebus=True")
        self._server: asyncio.Server | None = None
        self._host = "127.0.0.1"
        self._tls = False
        self._protocols: set[EngineProtocol] = set()
        self._acceptor: Acceptor | None = None

    @property
    def port(self) -> int:
        """The TCP port it listens on (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the broker is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """``amqp://127.0.0.1:PORT`` for clients (``amqps://`` when started with TLS)."""
        return f"{'amqps' if self._tls else 'amqp'}://127.0.0.1:{self.port}"

    @property
    def max_message_size(self) -> int:
        """The largest message a plain queue takes, in bytes (for links attached from now on)."""
        return self.plain.max_message_size

    @max_message_size.setter
    def max_message_size(self, size: int) -> None:
        self.plain.max_message_size = size

    @property
    def max_queue_bytes(self) -> int:
        """A plain queue's size limit, in bytes (for queues made from now on)."""
        return self.plain.max_queue_bytes

    @max_queue_bytes.setter
    def max_queue_bytes(self, size: int) -> None:
        self.plain.max_queue_bytes = size

    @property
    def queues(self) -> dict[str, PlainQueue]:
        """The plain queues, by name."""
        return self.plain.queues

    def queue(self, name: str) -> PlainQueue:
        """The plain queue called ``name``, created on first use."""
        return self.plain.queue(name)

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, ssl_context: ssl.SSLContext | None = None
    ) -> Broker:
        """Listen on ``host:port`` (0: any free port); TLS first when ``ssl_context`` is given."""
        self._acceptor = Acceptor(self._accept, config=self._config, limits=self.limits)
        self._server = await serve(self._acceptor, host, port, ssl_context=ssl_context)
        self._tls = ssl_context is not None
        log.info("amqplink broker listening on %s", self.url)
        if self.servicebus is not None:
            self._host = host
            for served in self.servicebus.hosts:
                served.secure_for(is_loopback(host))
                served.names.listen(host, self.port)
                served.start()
            broker_names = set(self.servicebus.names.hosts)
            for served in self.servicebus.hosts:
                # its own names: "<name>" and "<name>.<a name of the broker>" (ns2.localhost);
                # the first namespace keeps the broker's too (any name that names no other)
                name = served.namespace.name.lower()
                own = {name} | {f"{name}.{h}" for h in broker_names}
                served.names.hosts = own | broker_names if served is self.servicebus else own
            for other in self.servicebus.others:
                log.info(
                    "Service Bus namespace %r on %s (host name %s.*)",
                    other.namespace.name,
                    self.url,
                    other.namespace.name.lower(),
                )
            log.info("Service Bus namespace %r on %s", self.servicebus.namespace.name, self.url)
            if self.http_port_wanted is not None:
                await self._start_management(host, self.http_port_wanted, self.servicebus)
        return self

    async def _start_management(self, host: str, port: int, servicebus: ServiceBusHost) -> None:
        try:
            from amqplink.broker.http import Certificate, ManagementApi, NamespaceApi, self_signed, server_context
        except ImportError as exc:
            raise MissingExtraError(
                f"the management API (--http-port) needs {exc.name or 'aiohttp'}, in the broker extra:"
                " python3 -m pip install 'amqplink[broker]'"
            ) from None
        if self.http_cert is not None:
            self.http_certificate = Certificate(*self.http_cert)
        else:
            self.http_certificate = self_signed(
                names=[f"{h.namespace.name.lower()}.localhost" for h in servicebus.hosts]
            )
        gone = Error(Symbol(NOT_FOUND), "the entity was deleted through the management API")

        def api(served: ServiceBusHost) -> NamespaceApi:
            return NamespaceApi(
                served.namespace,
                lambda: served.rules,
                names=served.names,
                on_deleted=lambda nodes: served.detach_links(nodes, gone),
            )

        # every namespace, each under its own host name, as on the AMQP port (ServiceBusHost.route)
        self.management = ManagementApi(
            [api(served) for served in servicebus.hosts],
            route=lambda name: servicebus.route(name).namespace,
            amqp=self._acceptor,
        )
        await self.management.start(
            host, port, server_context(self.http_certificate), limits=self.limits, idle_timeout=self.idle_timeout
        )
        for served in servicebus.hosts:
            served.names.ports.add(self.management.port)
        log.info("management API on https://%s:%d", host, self.management.port)

    @property
    def http_port(self) -> int:
        """The port of the management REST API (after :meth:`start` with ``http_port``)."""
        if self.management is None:
            raise RuntimeError("the management API is not served: start the broker with http_port")
        return self.management.port

    @property
    def http_ca(self) -> str:
        """The PEM file of the management API's certificate (a CA bundle for a client such as the SDK)."""
        if self.http_certificate is None:
            raise RuntimeError("the management API is not served: start the broker with http_port")
        return self.http_certificate.cert_path

    @property
    def namespace(self) -> Namespace:
        """The Service Bus namespace served (``RuntimeError`` for a plain queue broker)."""
        if self.servicebus is None:
            raise RuntimeError("this broker serves plain AMQP queues: give it a config or servicebus=True")
        return self.servicebus.namespace

    @property
    def namespaces(self) -> dict[str, Namespace]:
        """Every Service Bus namespace served, by name (the first: :attr:`namespace`, the one a
        connection gets unless its host name names another: ``<name>`` or ``<name>.<...>``)."""
        if self.servicebus is None:
            raise RuntimeError("this broker serves plain AMQP queues: give it a config or servicebus=True")
        return {host.namespace.name: host.namespace for host in self.servicebus.hosts}

    @property
    def faults(self) -> Faults:
        """Fault injection on the namespace served (:mod:`amqplink.broker.faults`)."""
        if self.servicebus is None:
            raise RuntimeError("faults are injected into a Service Bus namespace: give it a config or servicebus=True")
        return self.servicebus.faults

    @property
    def connection_string(self) -> str:
        """``Endpoint=sb://HOST:PORT;SharedAccessKeyName=...;SharedAccessKey=...;UseDevelopmentEmulator=true``
        (HOST 127.0.0.1 when listening on every address): the first namespace's."""
        return self.connection_string_for()

    def connection_string_for(self, namespace: str | None = None) -> str:
        """:attr:`connection_string` of the namespace called ``namespace`` (None: the first),
        with its own key; another than the first is named ``<name>.localhost`` (a name every
        ``*.localhost`` resolver maps to loopback, RFC 6761), off loopback ``<name>.HOST``
        (or ``<name>`` when HOST is an address: give it a hosts entry).
        ``KeyError`` for a namespace the broker does not serve."""
        if self.servicebus is None:
            raise RuntimeError("this broker serves plain AMQP queues: give it a config or servicebus=True")
        served = self.servicebus
        if namespace is not None:
            found = [h for h in self.servicebus.hosts if h.namespace.name.lower() == namespace.lower()]
            if not found:
                names = ", ".join(h.namespace.name for h in self.servicebus.hosts)
                raise KeyError(f"this broker serves no namespace {namespace!r} (it serves {names})")
            served = found[0]
        root = served.rules.root
        if root is None:
            raise RuntimeError(
                f"namespace {served.namespace.name!r} has no namespace-level authorization rule to connect with"
            )
        name, key = root.name, root.keys[0]
        host = "127.0.0.1" if self._host in ("", "0.0.0.0", "::") else self._host
        if served is not self.servicebus:
            own = served.namespace.name.lower()
            if is_loopback(host):
                host = f"{own}.localhost"
            else:
                try:
                    ipaddress.ip_address(host)
                    host = own  # an address has no sub-names: the namespace's own name (a hosts entry)
                except ValueError:
                    host = f"{own}.{host}"
        return (
            f"Endpoint=sb://{host}:{self.port};SharedAccessKeyName={name};SharedAccessKey={key};"
            "UseDevelopmentEmulator=true"
        )

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self.management is not None:
            await self.management.stop()
            self.management = None
        if self.http_certificate is not None:
            self.http_certificate.remove()
            self.http_certificate = None
        served = [] if self.servicebus is None else self.servicebus.hosts
        for host in served:
            await host.stop()
        if self._server is not None:
            self._server.close()
        for protocol in list(self._protocols):
            protocol.abort()
        for host in served:
            if host.persistence is not None:
                await host.persistence.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- per connection ---------------------------------------------------------------
    def _config(self) -> ConnectionConfig:
        # Excess transfers reach the broker, which refuses them itself (in _on_message):
        # a transfer pipelined behind an attach is then refused after the attach is
        # answered, never by a detach written before it (2.6.3).
        return ConnectionConfig(idle_timeout=self.idle_timeout, on_excess_transfer="deliver")

    def _accept(self, engine: EngineConnection, protocol: EngineProtocol) -> Callable[[list[Event]], None]:
        self._protocols.add(protocol)
        served: ServiceBusHost | PlainHost = self.plain if self.servicebus is None else self.servicebus
        return served.accept(engine, protocol, on_closed=lambda: self._protocols.discard(protocol))
