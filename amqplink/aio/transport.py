"""An ``asyncio.Protocol`` that drives a sans-IO engine over a socket.

Bytes read go to :meth:`Connection.receive_data`; the events that come back go to
a callback; whatever the engine wants written is written. Writes made by the
application (sends, settlements, credit) are coalesced: the first one schedules a
single flush with ``call_soon``, so a burst of deliveries leaves in one socket
write. The protocol also owns the idle-time-out timer (``tick``) and tracks the
transport's write buffer (``pause_writing``/``resume_writing``) so producers can
wait instead of growing memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from amqplink import AMQPLinkError
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import Event

__all__ = ["EngineProtocol", "SocketWriteTimeout"]

log = logging.getLogger(__name__)

# The transport's write buffer high-water mark: above it producers wait.
WRITE_BUFFER_HIGH = 1 << 20
# What the engine's output buffer may hold between flushes: past it, the next
# schedule_flush writes through at once, so the transport's back-pressure
# (pause_writing) applies to a burst of sends within one loop iteration too.
ENGINE_OUTPUT_HIGH = 256 * 1024


class SocketWriteTimeout(AMQPLinkError, ConnectionError):
    """The socket took no data for longer than the writer's bound (the SDK's ``socket_timeout``)."""


class EngineProtocol(asyncio.Protocol):
    """Feeds one engine connection from one asyncio transport, client or server role."""

    def __init__(self, engine: EngineConnection, on_events: Callable[[list[Event]], None]) -> None:
        self.engine = engine
        self._on_events = on_events
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._flush_pending = False
        self.write_paused = False
        """True while the socket's buffer is above its high-water mark (an attribute: the
        senders read it on every send)."""
        self._writable: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self._abort_reason = "transport closed"
        """Why the connection ended, when this side ended it (a write timeout)."""
        self.peername: object = None

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peername = transport.get_extra_info("peername")
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.flush()
        self.reschedule_tick()

    def data_received(self, data: bytes) -> None:
        events = self.engine.receive_data(data)
        if events:
            self._on_events(events)
        self.flush()
        if self._timer is None:
            self.reschedule_tick()  # the peer's open may have set an idle time-out

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("transport to %s lost: %s", self.peername, exc)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.transport = None
        self._wake_writers()
        events = self.engine.transport_closed(self._abort_reason)
        if events:
            self._on_events(events)
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_writers()

    # -- writing ----------------------------------------------------------------------
    async def wait_writable(self, timeout: float | None = None) -> None:
        """Return once the transport's write buffer has drained below its mark;
        :class:`SocketWriteTimeout` if it has not within ``timeout`` seconds (None: no bound),
        the connection then aborted."""
        deadline = None if timeout is None else self._loop.time() + timeout
        while self.write_paused and self.transport is not None:
            if self._writable is None or self._writable.done():
                self._writable = self._loop.create_future()
            if deadline is None:
                await self._writable
                continue
            try:
                await asyncio.wait_for(asyncio.shield(self._writable), deadline - self._loop.time())
            except TimeoutError:
                # As the SDK's transport: a write that times out ends the connection (its
                # deliveries in flight fail at once and are retried on a new one).
                reason = (
                    f"the socket to {self.peername} took no data for {timeout} s (socket_timeout): the peer is"
                    " not reading; raise socket_timeout if the network is slow"
                )
                transport = self.transport
                if transport is not None:
                    self._abort_reason = reason
                    transport.abort()
                raise SocketWriteTimeout(reason) from None

    def _wake_writers(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def schedule_flush(self) -> None:
        """Write what the engine holds at the end of this loop iteration (coalescing)."""
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._deferred_flush)
        elif self.engine.output_size() >= ENGINE_OUTPUT_HIGH:
            self._write_through()

    def flush_lone(self) -> None:
        """Write now if no flush is pending, else as :meth:`schedule_flush`: a lone send or
        settlement has nothing to coalesce with, and its bytes then leave without the loop
        turning once more (one iteration, and its poll, fewer per sequential call)."""
        if self._flush_pending:
            self.schedule_flush()
        else:
            self.flush()

    def _deferred_flush(self) -> None:
        self._flush_pending = False
        self.flush()

    def flush(self) -> None:
        """Write the engine's pending bytes now, then deliver events the calls caused."""
        events = self.engine.take_events()
        if events:
            self._on_events(events)
        self._write_through()

    def _write_through(self) -> None:
        # Bytes only: events stay for the deferred flush, whose dispatch this may be inside.
        data = self.engine.data_to_send()
        transport = self.transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)

    def close(self) -> None:
        """Flush and close the socket (after the close handshake, or on giving up)."""
        self.flush()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Drop the socket at once without flushing."""
        if self.transport is not None:
            self.transport.abort()

    # -- time -------------------------------------------------------------------------
    def reschedule_tick(self) -> None:
        """(Re)arm the idle time-out timer from the engine's current interval."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        interval = self.engine.tick_interval()
        if interval and self.transport is not None:
            self._timer = self._loop.call_later(interval, self._on_tick)

    def _on_tick(self) -> None:
        self._timer = None
        events = self.engine.tick(self._loop.time())
        if events:
            self._on_events(events)
        self.flush()
        self.reschedule_tick()
