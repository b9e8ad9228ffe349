"""Accept AMQP connections with asyncio and drive a server-role engine for each.

The application supplies a factory that, given the engine connection and its
:class:`~amqplink.aio.transport.EngineProtocol`, returns the callback that
handles that connection's events (attach requests, deliveries, ...). The embedded
broker and the interop tests' servers are built on this.

The server bounds what a client can hold (:class:`ServerLimits`): a connection that
has not opened within ``handshake_timeout`` is dropped; beyond ``max_connections``
a new connection is answered with a close carrying ``amqp:resource-limit-exceeded``;
and once the engine has ended a connection (a close sent or answered, a SASL
failure after its outcome, a protocol-header mismatch) the socket is closed:

    "the server MUST send a protocol header with the version it supports and close
    the socket" (2.2)
"""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from amqplink.aio.transport import EngineProtocol
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.errors import RESOURCE_LIMIT_EXCEEDED
from amqplink.engine.events import ConnectionClosed, ConnectionOpened, Event
from amqplink.engine.sasl import SaslServer
from amqplink.protocol.definitions import Error

__all__ = [
    "DEFAULT_CLOSE_LINGER",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "SERVER_GC_THRESHOLD",
    "EventHandler",
    "Acceptor",
    "HandlerFactory",
    "ServerLimits",
    "ServerProtocol",
    "raise_gc_threshold",
    "serve",
]

log = logging.getLogger(__name__)

EventHandler = Callable[[list[Event]], None]
HandlerFactory = Callable[[EngineConnection, EngineProtocol], EventHandler]

DEFAULT_HANDSHAKE_TIMEOUT = 20.0
"""Seconds a client has from its TCP connect to its open frame."""
DEFAULT_MAX_CONNECTIONS = 1000
"""Connections served at once; more are answered with ``amqp:resource-limit-exceeded``."""
DEFAULT_CLOSE_LINGER = 2.0
"""Seconds the socket stays half-open after the engine ended the connection, for the
peer to read the last frames and close its side."""
SERVER_GC_THRESHOLD = 10_000
"""The cyclic garbage collector's first-generation threshold in a serving process (Python's
default is 700). A server keeps many objects alive for long (queued messages, unsettled
deliveries): at 700 the collector runs every few hundred messages and rescans them,
about a fifth of a broker's CPU per message; at this value it runs a tenth as often.
A process-wide setting, so opt-in: :func:`serve` and :class:`amqplink.broker.Broker` leave
it alone; a process that is a server calls ``raise_gc_threshold(SERVER_GC_THRESHOLD)``
(the ``amqplink broker`` command does)."""
# File descriptors kept free of connections (listening sockets, logs, refusals).
_FD_RESERVE = 64
# A refused client has this long (at most) to open and read why it was refused.
_REFUSAL_DEADLINE = 2.0


@dataclass(slots=True, frozen=True)
class ServerLimits:
    """What one client may hold of the server: time to open, and a connection slot."""

    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    close_linger: float = DEFAULT_CLOSE_LINGER

    def __post_init__(self) -> None:
        if self.handshake_timeout <= 0:
            raise ValueError(f"handshake_timeout must be positive, not {self.handshake_timeout}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {self.max_connections}")
        if self.close_linger < 0:
            raise ValueError(f"close_linger must not be negative, not {self.close_linger}")


def connection_capacity(wanted: int) -> int:
    """``wanted``, lowered so that every connection can have a file descriptor.

    Lowering the default is logged at INFO: Linux's usual ``ulimit -n`` of 1024 is below
    it, and the caller asked for no number. Lowering any other number is a WARNING."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft - _FD_RESERVE >= wanted:
        return wanted
    capacity = max(1, soft - _FD_RESERVE)
    log.log(
        logging.INFO if wanted == DEFAULT_MAX_CONNECTIONS else logging.WARNING,
        "max_connections %d lowered to %d: the process may open %d files (raise `ulimit -n` to serve more)",
        wanted,
        capacity,
        soft,
    )
    return capacity


class ServerProtocol(EngineProtocol):
    """An :class:`EngineProtocol` in the server role: handshake deadline and socket close.

    ``refuse`` (a connection beyond the limit) answers the client's open with a close
    carrying ``amqp:resource-limit-exceeded`` and that description.
    """

    def __init__(
        self,
        engine: EngineConnection,
        limits: ServerLimits,
        on_lost: Callable[[ServerProtocol], None],
        refuse: str | None = None,
    ) -> None:
        super().__init__(engine, self._server_events)
        self.handler: EventHandler | None = None
        self._limits = limits
        self._on_lost = on_lost
        self._refuse = refuse
        self._deadline: asyncio.TimerHandle | None = None
        self._shutting_down = False
        self.on_writable: Callable[[], None] | None = None
        """Called when the socket's write buffer has drained below its mark."""

    def data_received(self, data: bytes) -> None:
        # What the handlers write for a read's events leaves with the read's own flush: on
        # the server no task wakes in between to write more (a client's woken task joins the
        # deferred flush instead), and a flush scheduled meanwhile would only turn the loop
        # once more, finding nothing to write.
        pending, self._flush_pending = self._flush_pending, True
        try:
            super().data_received(data)
        finally:
            self._flush_pending = pending

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        timeout = self._limits.handshake_timeout
        if self._refuse is not None:
            timeout = min(timeout, _REFUSAL_DEADLINE)
        self._deadline = self._loop.call_later(timeout, self._handshake_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        try:
            super().connection_lost(exc)
        finally:
            self._on_lost(self)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.on_writable is not None:
            self.on_writable()

    def write_now(self) -> None:
        """Write the engine's pending bytes now (no events delivered: safe inside a
        handler); a socket that cannot keep up pauses writing as soon as it is full."""
        data = self.engine.data_to_send()
        transport = self.transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)

    def _server_events(self, events: list[Event]) -> None:
        if self.handler is not None:
            self.handler(events)
        for event in events:
            kind = type(event)
            if kind is ConnectionOpened:
                self._cancel_deadline()
                # The peer's idle-time-out may ask for heartbeats sooner than our own check.
                self._loop.call_soon(self.reschedule_tick)
                if self._refuse is not None:
                    self.engine.close(Error(condition=RESOURCE_LIMIT_EXCEEDED, description=self._refuse))
                    self._schedule_shutdown()
            elif kind is ConnectionClosed:
                self._cancel_deadline()
                self._schedule_shutdown()

    def _schedule_shutdown(self) -> None:
        if not self._shutting_down:
            self._shutting_down = True
            # After this turn's flush has written the close (or sasl-outcome, or header).
            self._loop.call_soon(self._shutdown)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _handshake_expired(self) -> None:
        self._deadline = None
        if self.engine.remote_open is not None or self.transport is None:
            return
        log.info(
            "dropping the connection from %s: no open frame within the handshake timeout of %s s",
            self.peername,
            self._limits.handshake_timeout,
        )
        self.close()

    def _shutdown(self) -> None:
        """The engine has ended the connection: send what is left, then close the socket.

        The write side closes at once (the peer reads our last frames, then EOF); the
        socket closes when the peer closes its side or after ``close_linger`` seconds.
        """
        transport = self.transport
        if transport is None:
            return
        self.flush()
        if transport.is_closing():
            return
        if transport.can_write_eof() and self._limits.close_linger > 0:
            try:
                transport.write_eof()
            except OSError:  # the peer is gone already
                transport.abort()
                return
            self._loop.call_later(self._limits.close_linger, self.close)
        else:
            transport.close()


def raise_gc_threshold(threshold0: int) -> None:
    """Raise the process's collector first-generation threshold to ``threshold0`` (never
    lower it; a threshold of 0, collection switched off, stays). For the owner of the
    process (e.g. ``raise_gc_threshold(SERVER_GC_THRESHOLD)`` in a server's ``main``):
    nothing in amqplink calls it on its own, except the ``amqplink broker`` command."""
    current = gc.get_threshold()
    if 0 < current[0] < threshold0:
        gc.set_threshold(threshold0, *current[1:])


class Acceptor:
    """Makes the :class:`ServerProtocol` of each accepted connection, under ``limits``: a
    connection beyond ``max_connections`` (lowered to what the process's file-descriptor
    limit allows) is refused at its open. One acceptor can serve several listeners (a TCP
    port and AMQP over WebSockets), which then share its connection cap.

    ``config`` and ``sasl`` are called once per connection; ``sasl=None`` uses
    ``SaslServer()`` (PLAIN for anyone, ANONYMOUS, MSSBCBS); pass ``lambda: None`` to run
    without a SASL layer.
    """

    def __init__(
        self,
        factory: HandlerFactory,
        *,
        config: Callable[[], ConnectionConfig] = ConnectionConfig,
        sasl: Callable[[], SaslServer | None] | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self._factory = factory
        self._config = config
        self._sasl = sasl if sasl is not None else SaslServer
        self.limits = limits or ServerLimits()
        self.capacity = connection_capacity(self.limits.max_connections)
        self._live: set[ServerProtocol] = set()
        self._refusing = False

    @property
    def connections(self) -> int:
        """Connections served now."""
        return len(self._live)

    def __call__(self) -> ServerProtocol:
        engine = EngineConnection(self._config(), server=True, sasl=self._sasl())
        refuse = None
        if len(self._live) >= self.capacity:
            refuse = f"the server has reached its limit of {self.capacity} connections: try again later"
            # One report per episode of refusals, not one per refused client.
            log.log(logging.DEBUG if self._refusing else logging.WARNING, "refusing a connection: %s", refuse)
            self._refusing = True
        else:
            self._refusing = False
        protocol = ServerProtocol(engine, self.limits, self._live.discard, refuse)
        if refuse is None:
            self._live.add(protocol)
            protocol.handler = self._factory(engine, protocol)
        return protocol


async def serve(
    factory: HandlerFactory | Acceptor,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    config: Callable[[], ConnectionConfig] = ConnectionConfig,
    sasl: Callable[[], SaslServer | None] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    limits: ServerLimits | None = None,
) -> asyncio.Server:
    """Listen on ``host:port`` (0: any free port); return the started ``asyncio.Server``.

    ``factory`` makes each connection's event handler (:class:`Acceptor` has the meaning
    of ``config``, ``sasl`` and ``limits``), or is an :class:`Acceptor` already (which
    then has them).
    """
    acceptor = factory if isinstance(factory, Acceptor) else Acceptor(factory, config=config, sasl=sasl, limits=limits)
    return await asyncio.get_running_loop().create_server(acceptor, host, port, ssl=ssl_context)
