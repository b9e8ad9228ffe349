"""What one client of the management API may hold: the AMQP port's own bounds.

The limits are the AMQP server's (:class:`~amqplink.aio.server.ServerLimits` and the
broker's ``idle_timeout``), applied to HTTP:

* ``max_connections`` (lowered to fit ``ulimit -n``): a connection beyond it is closed
  as soon as it is accepted, before any TLS handshake, so a refused client costs a
  socket and nothing else (the TLS layer alone allocates 256 KiB per connection);
* ``handshake_timeout``: from its TCP connect, a client has this long to finish the TLS
  handshake, send its first request (head and body) and read the answer; every later
  request has as long from its first byte (or from its turn, when pipelined);
* ``idle_timeout``: how long a kept-alive connection may wait silent for its next
  request (``None``: no limit, as on the AMQP port);
* a request line or header field is at most :data:`MAX_HEADER_SIZE` bytes and a request
  has at most :data:`MAX_HEADERS` fields (aiohttp answers 400 beyond).

A request aiohttp cannot parse is answered ``400`` with an error document and logged in
one INFO line (aiohttp itself logs each at ERROR with a traceback, which would let any
client flood the log).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web, web_protocol, web_server
from aiohttp.http_exceptions import HttpProcessingError

from amqplink.aio.server import ServerLimits, connection_capacity
from amqplink.atom.document import error_document

__all__ = ["MAX_HEADERS", "MAX_HEADER_SIZE", "BoundedHandler", "BoundedListener", "request_deadline"]

log = logging.getLogger(__name__)

MAX_HEADER_SIZE = 8190
"""Bytes of the request line and of each header field at most (aiohttp's default)."""
MAX_HEADERS = 32
"""Header fields of one request at most (the SDK sends about ten)."""


def _peer(transport: asyncio.BaseTransport | None) -> Any:
    return None if transport is None else transport.get_extra_info("peername")


class BoundedHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler with a deadline for each request and quiet errors."""

    def __init__(
        self,
        manager: web_server.Server,
        *,
        loop: asyncio.AbstractEventLoop,
        limits: ServerLimits,
        idle_timeout: float | None,
        first_deadline: float,
        on_lost: Callable[[], None],
    ) -> None:
        super().__init__(
            manager,
            loop=loop,
            keepalive_timeout=math.inf if idle_timeout is None else idle_timeout,
            access_log=None,  # type: ignore[arg-type]  # None: no access log (aiohttp checks for it)
            max_line_size=MAX_HEADER_SIZE,
            max_field_size=MAX_HEADER_SIZE,
            max_headers=MAX_HEADERS,
        )
        self._limits = limits
        self._first_deadline = first_deadline
        self._on_lost = on_lost
        self._timer: asyncio.TimerHandle | None = None
        self._upgraded = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._timer = self._loop.call_at(self._first_deadline, self._expired)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        try:
            super().connection_lost(exc)
        finally:
            self._on_lost()

    def data_received(self, data: bytes) -> None:
        if data:
            self.request_started()
        super().data_received(data)

    def request_started(self) -> None:
        """A request has begun: it must be read and answered within ``handshake_timeout``."""
        if self._timer is None and self.transport is not None and not self._upgraded:
            self._timer = self._loop.call_later(self._limits.handshake_timeout, self._expired)

    def upgraded(self) -> None:
        """The connection is now a WebSocket: no more request deadlines (what it carries
        bounds its own time, e.g. the AMQP handshake and idle time-outs)."""
        self._upgraded = True
        self._disarm()

    def log_access(self, request: Any, response: Any, time: float | None) -> None:
        # aiohttp calls this once a response is written: the request is over.
        """aiohttp's end of a request (the response is written): its deadline is disarmed."""
        self._disarm()
        super().log_access(request, response, time)

    def handle_error(
        self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """A request aiohttp could not parse: one INFO line and ``400`` with an error document
        (aiohttp logs each at ERROR with a traceback); other errors are aiohttp's."""
        if status >= 500 or not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        # The first line only: aiohttp quotes the request's bytes after it (a token, say).
        lines = str(exc.message).splitlines()
        detail = f"the request is malformed: {lines[0][:100] if lines else type(exc).__name__}"
        log.info("management API: %r from %s", detail, _peer(self.transport))
        if request.writer.output_size > 0:
            raise ConnectionError("a response was sent already: the connection is closed")
        response = web.Response(
            status=status, text=error_document(status, detail), content_type="application/xml", charset="utf-8"
        )
        response.force_close()
        return response

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        log.info(
            "management API: dropping the connection from %s: no complete request within %s s",
            _peer(self.transport),
            self._limits.handshake_timeout,
        )
        self.force_close()


@web.middleware
async def request_deadline(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Start the request's deadline when its turn comes (a pipelined one read earlier)."""
    protocol = request.protocol
    if isinstance(protocol, BoundedHandler):
        protocol.request_started()
    return await handler(request)


class _Gate(asyncio.Protocol):
    """A connection until it is admitted and through its TLS handshake; then the handler's."""

    def __init__(self, listener: BoundedListener) -> None:
        self._listener = listener
        self._raw: asyncio.Transport | None = None
        self._handler: BoundedHandler | None = None
        self._task: asyncio.Task[None] | None = None
        self._early: list[bytes] = []
        self._eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        listener = self._listener
        if not listener.admit(self):
            transport.abort()
            return
        self._raw = transport
        deadline = listener.loop.time() + listener.limits.handshake_timeout
        if listener.ssl_context is None:
            self._serve(transport, deadline)
        else:
            transport.pause_reading()
            self._task = listener.loop.create_task(self._upgrade(transport, listener.ssl_context, deadline))

    async def _upgrade(self, raw: asyncio.Transport, context: ssl.SSLContext, deadline: float) -> None:
        loop = self._listener.loop
        try:
            tls = await loop.start_tls(
                raw, self, context, server_side=True, ssl_handshake_timeout=max(deadline - loop.time(), 0.001)
            )
        except Exception as exc:  # the slot is released whatever went wrong
            if isinstance(exc, (OSError, TimeoutError)):  # ssl.SSLError is an OSError: the client's doing
                log.debug("management API: TLS handshake with %s failed: %s", _peer(raw), exc)
            else:
                log.warning("management API: TLS with %s could not start: %r", _peer(raw), exc)
            raw.abort()
            self._listener.release(self)
            return
        if tls is None or tls.is_closing():
            self._listener.release(self)
            return
        self._serve(tls, deadline)

    def _serve(self, transport: asyncio.Transport, deadline: float) -> None:
        self._handler = handler = self._listener.handler(deadline, lambda: self._listener.release(self))
        transport.set_protocol(handler)
        handler.connection_made(transport)
        for chunk in self._early:  # bytes after the handshake, before the handler took over
            handler.data_received(chunk)
        self._early.clear()
        if self._eof:
            handler.eof_received()

    def data_received(self, data: bytes) -> None:
        self._early.append(data)

    def eof_received(self) -> bool | None:
        self._eof = True
        return None

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self._handler is None:
            self._listener.release(self)

    def abort(self) -> None:
        """Drop a connection the handler does not have yet (stopping)."""
        if self._handler is None:
            if self._task is not None:
                self._task.cancel()
            if self._raw is not None:
                self._raw.abort()
            self._listener.release(self)


class BoundedListener:
    """Listens for the aiohttp ``manager`` (an ``AppRunner``'s server) under ``limits``."""

    def __init__(
        self,
        manager: web_server.Server,
        limits: ServerLimits,
        idle_timeout: float | None,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.manager = manager
        self.limits = limits
        self.idle_timeout = idle_timeout
        self.ssl_context = ssl_context
        self.capacity = connection_capacity(limits.max_connections)
        self.loop = asyncio.get_running_loop()
        self._live: set[_Gate] = set()
        self._refusing = False
        self._server: asyncio.Server | None = None

    @property
    def connections(self) -> int:
        """Connections held now (in their TLS handshake or served)."""
        return len(self._live)

    @property
    def port(self) -> int:
        """The port listened on (``RuntimeError`` before :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the management API is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (0: any free port)."""
        self._server = await self.loop.create_server(lambda: _Gate(self), host, port)

    def admit(self, gate: _Gate) -> bool:
        """Whether a new connection may stay: False past ``capacity`` (logged once per episode of refusals)."""
        if len(self._live) >= self.capacity:
            # One report per episode of refusals, not one per refused client.
            level = logging.DEBUG if self._refusing else logging.WARNING
            log.log(level, "management API: refusing a connection: at its limit of %d connections", self.capacity)
            self._refusing = True
            return False
        self._refusing = False
        self._live.add(gate)
        return True

    def release(self, gate: _Gate) -> None:
        """Forget a connection that closed (its place is free again)."""
        self._live.discard(gate)

    def handler(self, first_deadline: float, on_lost: Callable[[], None]) -> BoundedHandler:
        """An HTTP handler for one connection, with the time-outs and header bounds of this listener."""
        return BoundedHandler(
            self.manager,
            loop=self.loop,
            limits=self.limits,
            idle_timeout=self.idle_timeout,
            first_deadline=first_deadline,
            on_lost=on_lost,
        )

    def close(self) -> None:
        """Stop listening and drop the connections still in their handshake (the runner
        closes the served ones)."""
        if self._server is not None:
            self._server.close()
        for gate in list(self._live):
            gate.abort()
