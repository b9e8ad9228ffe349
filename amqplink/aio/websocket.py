"""AMQP over WebSockets: an ``asyncio.Transport`` over an aiohttp WebSocket, and the client's dialer.

The AMQP WebSocket Binding (AMQPWSB10) carries the AMQP byte stream (protocol headers,
SASL and AMQP frames) in binary WebSocket messages, split anywhere; the subprotocol
``AMQPWSB10`` is negotiated in the upgrade. Service Bus serves it at
``wss://NAMESPACE:443/$servicebus/websocket``. :class:`WebSocketTransport` makes a
WebSocket look like a socket to an :class:`~amqplink.aio.transport.EngineProtocol`, so
the same client and server code runs over either; it works with aiohttp's client and
server WebSockets alike (duck-typed: ``send_bytes``, ``receive``, ``close``).

aiohttp is imported only by :func:`open_websocket`, when a client asks for this transport.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "AMQP_WS_SUBPROTOCOL",
    "SERVICEBUS_WS_PATH",
    "HttpProxy",
    "WebSocketTransport",
    "open_websocket",
    "require_aiohttp",
]

log = logging.getLogger(__name__)

AMQP_WS_SUBPROTOCOL = "AMQPWSB10"
"""The WebSocket subprotocol of the AMQP WebSocket Binding 1.0."""
SERVICEBUS_WS_PATH = "/$servicebus/websocket"
"""Where Service Bus serves AMQP over WebSockets."""
MAX_WS_MESSAGE = 1 << 20
"""Bytes of AMQP in one WebSocket message sent at most (aiohttp's peers read 4 MiB by default)."""
WRITE_HIGH = 1 << 20
"""Bytes waiting to be sent above which the protocol is told to pause writing."""
CLOSE_TIMEOUT = 5.0
"""Seconds a closing WebSocket waits for the peer's close frame before dropping the socket."""

_TEXT, _BINARY = 0x1, 0x2  # RFC 6455 opcodes, aiohttp's WSMsgType values
_cleanups: set[asyncio.Task[None]] = set()  # closing sockets, kept until done


class WebSocket(Protocol):
    """What the transport needs of an aiohttp WebSocket (client or server side)."""

    async def send_bytes(self, data: bytes) -> None: ...

    async def receive(self) -> Any: ...

    async def close(self) -> bool: ...

    def exception(self) -> BaseException | None: ...


class WebSocketTransport(asyncio.Transport):
    """The AMQP byte stream of one WebSocket, for an ``asyncio.Protocol``.

    :meth:`start` calls the protocol's ``connection_made`` and starts reading: each binary
    message goes to ``data_received``; a text message is a protocol error (the binding
    uses binary messages only) and ends the connection. Writes are queued and sent by one
    task, in messages of at most :data:`MAX_WS_MESSAGE` bytes; past :data:`WRITE_HIGH`
    queued the protocol's ``pause_writing`` is called. ``on_closed`` runs once the
    WebSocket is closed (the client closes its HTTP session there).
    """

    def __init__(
        self,
        ws: WebSocket,
        protocol: asyncio.Protocol,
        *,
        extra: dict[str, Any] | None = None,
        on_closed: Callable[[], Awaitable[None]] | None = None,
        drop: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(extra)
        self._ws = ws
        self._drop = drop
        self._protocol = protocol
        self._on_closed = on_closed
        self._loop = asyncio.get_running_loop()
        self._queue: list[bytes] = []
        self._queued = 0
        self._high = WRITE_HIGH
        self._paused = False
        self._closing = False
        self._lost = False
        self._reading = asyncio.Event()
        self._reading.set()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._cleanup_started = False
        self.closed: asyncio.Future[None] = self._loop.create_future()
        """Done once the protocol has been told the connection is lost."""
        self.socket_closed: asyncio.Future[None] = self._loop.create_future()
        """Done once the WebSocket itself is closed (and ``on_closed`` has run)."""

    def start(self) -> None:
        """Hand the transport to the protocol and start reading."""
        self._protocol.connection_made(self)
        self._reader = self._loop.create_task(self._read())

    # -- reading ----------------------------------------------------------------------
    async def _read(self) -> None:
        error: BaseException | None = None
        try:
            while not self._lost:
                await self._reading.wait()
                message = await self._ws.receive()
                kind = int(message.type)
                if kind == _BINARY:
                    if not self._closing:
                        self._protocol.data_received(message.data)
                elif kind == _TEXT:
                    error = ConnectionError("the peer sent a text message: AMQP over WebSockets uses binary ones")
                    break
                else:  # close, closing, closed or error
                    error = self._ws.exception()
                    break
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the socket broke under the read
            error = exc
        self._finish(error)
        self._cleanup()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    # -- writing ----------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or self._lost or not data:
            return
        self._queue.append(bytes(data))
        self._queued += len(data)
        if self._writer is None:
            self._writer = self._loop.create_task(self._write())
        if not self._paused and self._queued > self._high:
            self._paused = True
            self._protocol.pause_writing()

    async def _write(self) -> None:
        try:
            while self._queue:
                data = self._queue[0] if len(self._queue) == 1 else b"".join(self._queue)
                self._queue.clear()
                for start in range(0, len(data), MAX_WS_MESSAGE):
                    await self._ws.send_bytes(data[start : start + MAX_WS_MESSAGE])
                self._queued -= len(data)
                if self._paused and self._queued <= self._high // 4:
                    self._paused = False
                    self._protocol.resume_writing()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the socket broke under the write
            self._writer = None
            self._finish(exc)
            self._cleanup()
            return
        self._writer = None
        if self._closing:
            self._cleanup()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = WRITE_HIGH if high is None else high

    def get_write_buffer_size(self) -> int:
        return self._queued

    def can_write_eof(self) -> bool:
        return False  # a WebSocket closes both ways at once

    def write_eof(self) -> None:
        raise NotImplementedError("a WebSocket cannot half-close: call close()")

    # -- closing ----------------------------------------------------------------------
    def is_closing(self) -> bool:
        return self._closing or self._lost

    def close(self) -> None:
        """Send what is queued, then the WebSocket close; the protocol hears once it is closed."""
        if self._closing or self._lost:
            return
        self._closing = True
        if self._writer is None:
            self._cleanup()

    def abort(self) -> None:
        """Drop what is queued and the socket (``drop``, when given; else the WebSocket is
        closed in the background); the protocol hears at once."""
        self._closing = True
        self._queue.clear()
        if self._drop is not None:
            self._drop()
        if self._writer is not None:
            self._writer.cancel()
            self._writer = None
        self._finish(None)
        self._cleanup()

    def _finish(self, error: BaseException | None) -> None:
        if self._lost:
            return
        self._lost = True
        self._closing = True
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()
        if error is not None:
            log.debug("WebSocket transport lost: %s", error)
        self._protocol.connection_lost(error if isinstance(error, Exception) or error is None else None)
        if not self.closed.done():
            self.closed.set_result(None)

    def _cleanup(self) -> None:
        """Close the WebSocket in a task of its own (bounded), then tell the owner."""
        if self._cleanup_started:
            return
        self._cleanup_started = True
        task = self._loop.create_task(self._close_socket())
        _cleanups.add(task)
        task.add_done_callback(_cleanups.discard)

    async def _close_socket(self) -> None:
        try:
            await asyncio.wait_for(self._ws.close(), CLOSE_TIMEOUT)
        except (Exception, asyncio.CancelledError) as exc:  # closing anyway: nothing to report
            log.debug("closing a WebSocket: %r", exc)
        self._finish(None)
        try:
            if self._on_closed is not None:
                await self._on_closed()
        finally:
            if not self.socket_closed.done():
                self.socket_closed.set_result(None)


@dataclass(frozen=True, slots=True)
class HttpProxy:
    """An HTTP proxy that tunnels with CONNECT; the password never appears in ``repr``."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the proxy (an IPv6 host in brackets); no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def require_aiohttp() -> None:
    """Raise ``ImportError`` saying what to install when aiohttp is missing."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise ImportError(
            "AMQP over WebSockets (TransportType.AmqpOverWebsocket, http_proxy) needs aiohttp:"
            " pip install aiohttp (or 'amqplink[websockets]')"
        ) from None


async def open_websocket(
    protocol: asyncio.Protocol,
    url: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    proxy: HttpProxy | None = None,
) -> WebSocketTransport:
    """Open ``url`` (``wss://HOST:PORT/PATH`` or ``ws://``) with subprotocol AMQPWSB10 (through
    ``proxy`` with CONNECT when given) and start a :class:`WebSocketTransport` for ``protocol``.

    Failures raise ``ConnectionError`` naming the URL and what went wrong (refused, a
    status other than 101, the subprotocol not accepted, the proxy's answer). Needs aiohttp.
    """
    require_aiohttp()
    import aiohttp

    session = aiohttp.ClientSession()
    headers = None
    if proxy is not None and (proxy.username or proxy.password):
        token = base64.b64encode(f"{proxy.username or ''}:{proxy.password or ''}".encode()).decode("ascii")
        headers = {"Proxy-Authorization": f"Basic {token}"}  # RFC 7617
    via = f" through the proxy {proxy.url}" if proxy is not None else ""
    try:
        ws = await session.ws_connect(
            url,
            protocols=(AMQP_WS_SUBPROTOCOL,),
            ssl=ssl_context if ssl_context is not None else url.startswith("wss:"),
            proxy=None if proxy is None else proxy.url,
            proxy_headers=headers,
            autoping=True,
            compress=0,
        )
    except aiohttp.ClientHttpProxyError as exc:
        await session.close()
        raise ConnectionError(
            f"the HTTP proxy {proxy.url if proxy else ''} refused the tunnel to {url}: {exc.status} {exc.message}"
        ) from None
    except aiohttp.WSServerHandshakeError as exc:
        await session.close()
        raise ConnectionError(
            f"{url} refused the WebSocket upgrade{via}: {exc.status} {exc.message}"
            " (is it an AMQP over WebSockets endpoint?)"
        ) from None
    except (aiohttp.ClientError, OSError) as exc:
        await session.close()
        raise ConnectionError(f"cannot open {url}{via}: {exc}") from None
    except BaseException:
        await session.close()
        raise
    if ws.protocol != AMQP_WS_SUBPROTOCOL:
        await ws.close()
        await session.close()
        raise ConnectionError(f"{url} did not accept the WebSocket subprotocol {AMQP_WS_SUBPROTOCOL}")
    transport = WebSocketTransport(
        ws, protocol, extra={"peername": ws.get_extra_info("peername")}, on_closed=session.close
    )
    transport.start()
    return transport
