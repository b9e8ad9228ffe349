"""AMQP over WebSockets on the management port, as Service Bus serves it on 443.

A ``GET /$servicebus/websocket`` upgraded to a WebSocket with subprotocol ``AMQPWSB10``
carries one AMQP connection of the namespace: the broker's own
:class:`~amqplink.aio.server.Acceptor` makes it, so it is served by the same code as a
TCP connection and under the same bounds (the connection cap, shared with the AMQP port;
the handshake time-out from the upgrade to the AMQP open; the idle time-out). Once
upgraded, the HTTP port's per-request deadline no longer applies
(:meth:`~amqplink.broker.http.bounds.BoundedHandler.upgraded`).

The upgrade carries no ``Authorization`` header (the SDK sends none): the connection is
authorised inside AMQP, by SASL and a CBS token per entity, as on the AMQP port.

Refusals, each with an error document naming what to change: an upgrade to another
path is ``404``; a method other than GET ``405``; a request that is not a valid
WebSocket upgrade, or that does not offer ``AMQPWSB10``, ``400``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from amqplink.aio.server import ServerProtocol
from amqplink.aio.websocket import AMQP_WS_SUBPROTOCOL, SERVICEBUS_WS_PATH, WebSocketTransport
from amqplink.atom.document import error_document
from amqplink.broker.http.bounds import BoundedHandler

__all__ = ["MAX_WS_MESSAGE_IN", "AmqpWebSockets"]

log = logging.getLogger(__name__)

MAX_WS_MESSAGE_IN = 4 << 20
"""Bytes of one WebSocket message from a client at most (the SDK sends a frame per message)."""


def _refuse(status: int, detail: str) -> web.Response:
    return web.Response(
        status=status, text=error_document(status, detail), content_type="application/xml", charset="utf-8"
    )


def is_upgrade(request: web.Request) -> bool:
    """Whether ``request`` asks for a WebSocket (``Upgrade: websocket``)."""
    return request.headers.get("Upgrade", "").lower() == "websocket"


class AmqpWebSockets:
    """Serves AMQP over WebSockets for ``accept`` (the AMQP port's acceptor)."""

    def __init__(self, accept: Callable[[], ServerProtocol]) -> None:
        self._accept = accept
        self._live: set[WebSocketTransport] = set()

    @property
    def connections(self) -> int:
        """WebSocket connections open now."""
        return len(self._live)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """WebSocket upgrades are served here (before the management API's authorisation);
        every other request goes on."""
        if not is_upgrade(request):
            return await handler(request)
        return await self._serve(request)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        peer = None if request.transport is None else request.transport.get_extra_info("peername")
        if request.path != SERVICEBUS_WS_PATH:
            log.info("management API: WebSocket upgrade to %r from %s refused (404)", request.path[:100], peer)
            return _refuse(404, f"AMQP over WebSockets is served at {SERVICEBUS_WS_PATH}, not {request.path[:100]!r}")
        if request.method != "GET":
            return _refuse(405, f"a WebSocket upgrade is a GET, not {request.method}")
        ws = web.WebSocketResponse(
            protocols=(AMQP_WS_SUBPROTOCOL,), autoping=True, compress=False, max_msg_size=MAX_WS_MESSAGE_IN
        )
        ready = ws.can_prepare(request)
        if not ready.ok:
            log.info("management API: a malformed WebSocket upgrade from %s refused (400)", peer)
            return _refuse(400, "not a valid WebSocket upgrade (Connection, Sec-WebSocket-Version 13 and Key)")
        if ready.protocol != AMQP_WS_SUBPROTOCOL:
            log.info("management API: a WebSocket upgrade from %s without %s refused (400)", peer, AMQP_WS_SUBPROTOCOL)
            return _refuse(
                400,
                f"AMQP over WebSockets needs the subprotocol {AMQP_WS_SUBPROTOCOL}: offer it in Sec-WebSocket-Protocol",
            )
        await ws.prepare(request)
        if isinstance(request.protocol, BoundedHandler):
            request.protocol.upgraded()
        raw = request.transport
        transport = WebSocketTransport(
            ws, self._accept(), extra={"peername": peer}, drop=None if raw is None else raw.abort
        )
        self._live.add(transport)
        try:
            transport.start()
            await transport.socket_closed
        finally:
            self._live.discard(transport)
            if not transport.closed.done():  # the handler was cancelled
                transport.abort()
        return ws

    def close_all(self) -> None:
        """Drop every WebSocket connection (the broker is stopping)."""
        for transport in list(self._live):
            transport.abort()
