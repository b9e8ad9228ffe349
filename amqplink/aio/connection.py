"""The asyncio connection: open, close, sessions, and the factory for senders and receivers."""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal

from amqplink.aio.errors import AMQPError, ConnectionClosedError, SessionEndedError
from amqplink.aio.link import LinkBase
from amqplink.aio.receiver import Receiver, ReceiverMode
from amqplink.aio.sender import Sender, SettleMode
from amqplink.aio.transactions import Controller, Transaction
from amqplink.aio.transport import EngineProtocol
from amqplink.aio.url import Endpoint, parse_url
from amqplink.engine import errors as engine_errors
from amqplink.engine.connection import DEFAULT_MIN_PEER_IDLE_TIMEOUT, ConnectionConfig
from amqplink.engine.connection import Connection as EngineConnection
from amqplink.engine.events import (
    ConnectionClosed,
    ConnectionOpened,
    DeliveriesReceived,
    DeliveriesUpdated,
    DeliveryAborted,
    Event,
    LinkAttached,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    LinkDrained,
    SessionBegun,
    SessionEnded,
    StatefulDeliveriesReceived,
    TransactionDeclared,
    TransactionEnded,
)
from amqplink.engine.link import DEFAULT_MAX_MESSAGE_SIZE, Link
from amqplink.engine.sasl import SaslClient
from amqplink.engine.session import Session
from amqplink.protocol.definitions import Error

__all__ = ["Connection", "connect"]

log = logging.getLogger(__name__)

SaslOption = Literal["auto", "anonymous", "plain", "external", "mssbcbs", "none"] | SaslClient
Dialer = Callable[[asyncio.Protocol], Awaitable[object]]
"""Opens the byte stream to the peer for a protocol and hands it over (``connection_made``),
in place of a TCP connection: AMQP over WebSockets (:func:`amqplink.aio.websocket.open_websocket`)."""

DEFAULT_TIMEOUT = 30.0
# Events that belong to one link: handed to the Sender/Receiver that owns it.
_LINK_EVENTS = frozenset(
    (
        DeliveriesUpdated,
        DeliveriesReceived,
        StatefulDeliveriesReceived,
        LinkCreditChanged,
        LinkAttached,
        LinkDetached,
        LinkDrained,
        DeliveryAborted,
        TransactionDeclared,
        TransactionEnded,
    )
)
CLOSE_TIMEOUT = 5.0


def _sasl_for(endpoint: Endpoint, sasl: SaslOption, hostname: str) -> SaslClient | None:
    if isinstance(sasl, SaslClient):
        return sasl
    if sasl == "none":
        return None
    if sasl == "auto":
        return SaslClient(username=endpoint.username, password=endpoint.password, hostname=hostname)
    if sasl == "plain" and endpoint.username is None:
        raise ValueError("sasl='plain' needs a user name in the URL: amqp://user:pass@host")
    mechanism = {"anonymous": "ANONYMOUS", "plain": "PLAIN", "external": "EXTERNAL", "mssbcbs": "MSSBCBS"}.get(sasl)
    if mechanism is None:
        raise ValueError(f"unknown sasl option {sasl!r}: use auto, anonymous, plain, external, mssbcbs or none")
    return SaslClient(mechanism=mechanism, username=endpoint.username, password=endpoint.password, hostname=hostname)


def _connect_hint(exc: BaseException) -> str:
    """What to check after a failed connect. An ``SSLError`` ``WRONG_VERSION_NUMBER`` is a
    peer that answered a TLS hello without TLS, e.g. the embedded broker (or the Service Bus
    emulator) given a connection string without ``UseDevelopmentEmulator=true``."""
    if isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER":
        return (
            "the peer does not speak TLS on this port: use an amqp:// URL, or for a local broker or the "
            "emulator put UseDevelopmentEmulator=true in the connection string"
        )
    return "is the broker running and the port right?"


class Connection:
    """An open AMQP connection; create it with :func:`connect`.

    Senders share one session; receivers share another, so that a peer ending a
    receiver's session (RabbitMQ does, on rcv-settle-mode ``second``) leaves the
    senders alone.
    """

    def __init__(self, endpoint: Endpoint, engine: EngineConnection, timeout: float) -> None:
        self.endpoint = endpoint
        self.engine = engine
        self.timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._protocol = _ClientProtocol(engine, self)
        self._opened: asyncio.Future[None] = self._loop.create_future()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self.error: AMQPError | None = None
        self._sessions: dict[str, Session] = {}
        self._controller: Controller | None = None
        """The control link of its transactions, once one was declared."""
        self._session_waiters: dict[Session, asyncio.Future[None]] = {}
        self._links: set[LinkBase] = set()
        self.rcv_second_supported: bool | None = None
        self._probe_session: Session | None = None  # where rcv-settle-mode second is tried
        self._waiting_senders: set[Sender] = set()
        self._handlers: dict[type[Event], Callable[[Any], None]] = {
            ConnectionOpened: self._on_opened,
            ConnectionClosed: self._on_closed,
            SessionBegun: self._on_session_begun,
            SessionEnded: self._on_session_ended,
            LinkAttachRequested: self._on_attach_requested,
        }

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open" if self._opened.done() else "opening"
        return f"<amqplink.aio.Connection {self.endpoint.url} {state}>"

    # -- properties -------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once the connection has ended, cleanly or not."""
        return self._closed.done()

    async def wait_closed(self) -> None:
        """Return once the connection has ended (cleanly or not; :attr:`error` tells which)."""
        await asyncio.shield(self._closed)

    @property
    def protocol(self) -> EngineProtocol:
        """The asyncio protocol driving the engine (for flushes and write back-pressure)."""
        return self._protocol

    @property
    def remote_properties(self) -> dict[Any, Any] | None:
        """The peer's open properties (e.g. its product name), once open."""
        remote = self.engine.remote_open
        return remote.properties if remote is not None else None

    # -- opening and closing ----------------------------------------------------------
    async def _open(
        self, ssl_context: ssl.SSLContext | None, server_hostname: str | None, dialer: Dialer | None = None
    ) -> None:
        self.engine.open()
        ep = self.endpoint
        try:
            opening = (
                dialer(self._protocol)
                if dialer is not None
                else self._loop.create_connection(
                    lambda: self._protocol,
                    ep.host,
                    ep.port,
                    ssl=ssl_context,
                    server_hostname=server_hostname if ssl_context is not None else None,
                )
            )
            await asyncio.wait_for(opening, self.timeout)
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            raise ConnectionClosedError(f"cannot connect to {ep.url}: {reason} ({_connect_hint(exc)})") from exc
        try:
            await asyncio.wait_for(asyncio.shield(self._opened), self.timeout)
        except TimeoutError:
            self._protocol.abort()
            raise ConnectionClosedError(
                f"{ep.url} did not answer the AMQP open within {self.timeout} s (is it an AMQP 1.0 endpoint?)"
            ) from None

    async def close(self, error: Error | None = None) -> None:
        """Close the connection (2.4.3): send close, wait for the peer's, drop the socket."""
        if not self.closed and not self.engine.close_sent:
            for link in list(self._links):
                link._flush_local()
            self.engine.close(error)
            self._protocol.flush()
            try:
                await asyncio.wait_for(asyncio.shield(self._closed), CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("%s did not answer close in %s s; dropping the socket", self.endpoint.url, CLOSE_TIMEOUT)
        self._protocol.close()
        if self._protocol.transport is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._protocol.lost), CLOSE_TIMEOUT)
            except TimeoutError:
                self._protocol.abort()
        self._finish(None)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _finish(self, error: AMQPError | None) -> None:
        if self._closed.done():
            return
        self.error = error
        failure = error or ConnectionClosedError(f"connection to {self.endpoint.url} closed")
        for waiter in self._session_waiters.values():
            if not waiter.done():
                waiter.set_exception(failure)
                waiter.exception()  # retrieved here; the links report it to their callers
        for link in list(self._links):
            link._fail(failure)
        if not self._opened.done():
            self._opened.set_exception(failure)
            self._opened.exception()
        self._closed.set_result(None)

    # -- sessions ---------------------------------------------------------------------
    async def session(self, purpose: str) -> Session:
        """The shared session for ``purpose`` ("senders", "receivers"), begun if needed."""
        self.check_open()
        session = self._sessions.get(purpose)
        if session is None or session.is_ended:
            session = await self.new_session()
            self._sessions[purpose] = session
        return session

    async def new_session(self) -> Session:
        """Begin a session of its own and wait until the peer has mapped it."""
        self.check_open()
        session = self.engine.begin_session()
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._session_waiters[session] = waiter
        self._protocol.schedule_flush()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.timeout)
        except TimeoutError:
            session.end()
            self._protocol.schedule_flush()
            raise SessionEndedError(f"{self.endpoint.url} did not answer begin within {self.timeout} s") from None
        finally:
            self._session_waiters.pop(session, None)
        return session

    def check_open(self) -> None:
        """Raise the connection's error if it is closed."""
        if self.closed or self.engine.close_sent:
            raise self.error or ConnectionClosedError(f"connection to {self.endpoint.url} is closed")

    # -- links ------------------------------------------------------------------------
    async def transaction(self, *, timeout: float | None = None) -> Transaction:
        """Declare a transaction (AMQP 1.0 part 4) on this connection: its work may be on any of
        its links (:mod:`amqplink.aio.transactions`). The first one attaches the connection's
        control link to the peer's coordinator; a peer without one refuses it
        (:class:`~amqplink.aio.errors.LinkDetachedError`, usually ``amqp:not-implemented``)."""
        wait = self.timeout if timeout is None else timeout
        controller = self._controller
        if controller is None or controller.closed:
            session = await self.session("transactions")
            controller = self._controller = Controller(self, session, _link_name("txn-controller"))
            try:
                await controller._attach(wait)
            except AMQPError:
                self._controller = None
                raise
        return await controller.declare(wait)

    async def create_sender(
        self,
        address: str | None,
        *,
        settle_mode: SettleMode = "unsettled",
        max_in_flight: int = 1000,
        name: str | None = None,
        properties: dict[Any, Any] | None = None,
        timeout: float | None = None,
    ) -> Sender:
        """Attach a sending link to ``address`` and wait for the peer's attach.

        ``settle_mode="unsettled"`` gives each message an outcome; ``"settled"`` sends
        pre-settled ("at most once", 3.4). ``max_in_flight`` bounds the deliveries
        not yet settled (unsettled mode) or not yet written (settled mode).
        """
        session = await self.session("senders")
        sender = Sender(self, session, address, settle_mode, max_in_flight, name or _link_name("sender"), properties)
        await sender._attach(self.timeout if timeout is None else timeout)
        return sender

    async def create_receiver(
        self,
        address: str | None,
        *,
        mode: ReceiverMode = "peek-lock",
        prefetch: int = 100,
        name: str | None = None,
        dynamic: bool = False,
        properties: dict[Any, Any] | None = None,
        filters: dict[Any, Any] | None = None,
        timeout: float | None = None,
        max_message_size: int | None = None,
    ) -> Receiver:
        """Attach a receiving link from ``address`` and grant ``prefetch`` credit.

        ``mode="receive-and-delete"`` asks the sender to settle before sending
        (snd-settle-mode ``settled``); ``"peek-lock"`` leaves each message unsettled
        until the application accepts, releases, modifies or rejects it, and asks
        for rcv-settle-mode ``second`` so the peer confirms each settlement; a peer
        that refuses that (RabbitMQ ends the session with ``amqp:not-implemented``)
        is retried once with ``first`` and remembered; probe and retry share one
        ``timeout``. ``max_message_size`` (bytes) overrides the connection's for this
        link: a larger message detaches it with ``amqp:link:message-size-exceeded``.
        """
        wait = self.timeout if timeout is None else timeout
        deadline = asyncio.get_running_loop().time() + wait
        link_name = name or _link_name("receiver")
        confirm = mode == "peek-lock" and self.rcv_second_supported is not False
        if confirm and self.rcv_second_supported is None:
            # Probe on a session of its own: a refusal ends only that session.
            session = await self.new_session()
            self._probe_session = session
            receiver = Receiver(
                self, session, address, mode, prefetch, link_name, properties, filters, dynamic, True, max_message_size
            )
            try:
                await receiver._attach(wait, deadline)
            except SessionEndedError as exc:
                if exc.condition != str(engine_errors.NOT_IMPLEMENTED):
                    raise
                log.info("%s refuses rcv-settle-mode second; settling peek-lock receivers first", self.endpoint.url)
                self.rcv_second_supported = False
            else:
                # A peer that answers first will not confirm settlements (2.7.3): the
                # receiver settles first; later receivers ask for first at once.
                self.rcv_second_supported = receiver.confirm
                if not receiver.confirm:
                    log.info(
                        "%s answers rcv-settle-mode first; peek-lock receivers settle first (unconfirmed)",
                        self.endpoint.url,
                    )
                self._sessions.setdefault("receivers", session)
                return receiver
            confirm = False
        session = await self.session("receivers")
        receiver = Receiver(
            self, session, address, mode, prefetch, link_name, properties, filters, dynamic, confirm, max_message_size
        )
        await receiver._attach(wait, deadline)
        return receiver

    def _register(self, link: LinkBase) -> None:
        self._links.add(link)

    def _unregister(self, link: LinkBase) -> None:
        self._links.discard(link)

    # -- engine events ----------------------------------------------------------------
    def _dispatch(self, events: list[Event]) -> None:
        handlers = self._handlers
        for event in events:
            t = type(event)
            if t in _LINK_EVENTS:
                owner = event.link.context  # type: ignore[attr-defined]  # each type in _LINK_EVENTS has .link
                if owner is not None:
                    owner._on_event(event)
            else:
                handler = handlers.get(t)
                if handler is not None:
                    handler(event)

    def _wake_senders(self) -> None:
        """Wake pre-settled senders waiting for their queue to move (after any input)."""
        waiting = self._waiting_senders
        self._waiting_senders = set()
        for sender in waiting:
            sender._wake()

    def _on_opened(self, event: ConnectionOpened) -> None:
        self._protocol.reschedule_tick()
        if not self._opened.done():
            log.info("connected to %s", self.endpoint.url)
            self._opened.set_result(None)

    def _on_closed(self, event: ConnectionClosed) -> None:
        error = event.error
        if error is None and not event.by_peer:
            self._protocol.close()
            self._finish(None)
            return
        who = "the peer" if event.by_peer else "amqplink"
        hint = "the peer ended the connection" if event.by_peer else "the peer broke the protocol"
        if error is not None and str(error.condition) == str(engine_errors.CONNECTION_FORCED):
            hint = "network or peer failure; reconnect to continue"
        elif error is not None and str(error.condition) == str(engine_errors.UNAUTHORIZED_ACCESS):
            hint = "check the user name and password"
        failure = ConnectionClosedError.from_error(f"connection to {self.endpoint.url} closed by {who}", error, hint)
        if error is None:
            failure = ConnectionClosedError(f"connection to {self.endpoint.url} closed by {who}")
        if event.by_peer and error is not None:
            # Reported once: to the callers, as this error (INFO here, not WARNING).
            log.info("%s", failure)
        self._protocol.close()
        # Reaching here, either there is an error or the peer closed first (the engine
        # has already answered that close, so close_sent cannot tell who started).
        self._finish(failure)

    def _on_session_begun(self, event: SessionBegun) -> None:
        waiter = self._session_waiters.get(event.session)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_session_ended(self, event: SessionEnded) -> None:
        error = SessionEndedError.from_error(
            f"session on channel {event.session.channel} of {self.endpoint.url} ended", event.error
        )
        waiter = self._session_waiters.get(event.session)
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        for link in list(self._links):
            if link.session is event.session:
                link._fail(error)
        if event.by_peer and event.error is not None:
            # The links' callers get this error; the rcv-settle-mode probe's refusal
            # is an expected fallback that create_receiver reports itself.
            log.log(logging.DEBUG if event.session is self._probe_session else logging.INFO, "%s", error)
        self._protocol.schedule_flush()

    def _on_attach_requested(self, event: LinkAttachRequested) -> None:
        # A client does not take links the peer opens: answer and refuse (2.6.3).
        link: Link = event.link
        link.attach(None, None, keep=False)
        link.detach(Error(condition=engine_errors.NOT_ALLOWED, description="this client accepts no incoming links"))
        self._protocol.schedule_flush()


class _ClientProtocol(EngineProtocol):
    """The client's protocol: after each read, wakes the senders that wait for room.

    Any frame read may let queued deliveries leave: a link flow (credit) or a session
    flow (the remote incoming window, 2.5.6), which raises no link event.
    """

    def __init__(self, engine: EngineConnection, connection: Connection) -> None:
        super().__init__(engine, connection._dispatch)
        self._connection = connection

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._connection._waiting_senders:
            self._connection._wake_senders()


def _link_name(kind: str) -> str:
    return f"amqplink-{kind}-{uuid.uuid4()}"


async def connect(
    url: str,
    *,
    sasl: SaslOption = "auto",
    ssl_context: ssl.SSLContext | None = None,
    idle_timeout: float | None = None,
    max_frame_size: int = 65536,
    channel_max: int = 255,
    container_id: str | None = None,
    hostname: str | None = None,
    properties: dict[Any, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    on_excess_transfer: Literal["deliver", "detach"] = "deliver",
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    min_peer_idle_timeout: float = DEFAULT_MIN_PEER_IDLE_TIMEOUT,
    dialer: Dialer | None = None,
    trace_level: int | None = None,
) -> Connection:
    """Connect to ``amqp://[user:pass@]host[:port]`` (or ``amqps://``) and open.

    ``sasl="auto"`` picks PLAIN when the URL has credentials, else ANONYMOUS;
    ``"none"`` skips the SASL layer. ``amqps://`` without ``ssl_context`` uses the
    system's default verification. ``idle_timeout`` (seconds) is this side's
    idle time-out (2.4.5): the peer is asked to send something at least every
    ``idle_timeout / 2`` s and the connection fails after ``idle_timeout`` of silence.
    ``on_excess_transfer`` is what a receiver does with a delivery past its credit
    (2.6.7): ``"deliver"`` (the default, as RabbitMQ 3.x overshoots under load) or
    ``"detach"`` with ``amqp:link:transfer-limit-exceeded``. ``max_message_size``
    is the largest message (bytes) a receiver accepts (0: no limit, 2.7.3): a larger
    one detaches the receiver with ``amqp:link:message-size-exceeded``.
    ``min_peer_idle_timeout`` (seconds) is the smallest idle time-out a peer may ask
    of us: below it the connection is closed with ``amqp:not-implemented`` rather
    than flooding the peer with heartbeats. ``dialer`` opens the byte stream instead of
    TCP to the URL's host and port (AMQP over WebSockets); TLS is then the dialer's, so
    ``ssl_context`` must not be given. ``trace_level``: log this connection's frames on
    ``amqplink.frames`` at that level (:class:`~amqplink.engine.connection.ConnectionConfig`).
    """
    endpoint = parse_url(url)
    if dialer is not None and ssl_context is not None:
        raise ValueError("give the TLS context to the dialer: ssl_context applies to TCP connections only")
    if endpoint.tls and ssl_context is None and dialer is None:
        ssl_context = ssl.create_default_context()
    virtual_host = hostname or endpoint.host
    config = ConnectionConfig(
        container_id=container_id or f"amqplink-{uuid.uuid4()}",
        hostname=virtual_host,
        max_frame_size=max_frame_size,
        channel_max=channel_max,
        idle_timeout=idle_timeout,
        properties=properties,
        on_excess_transfer=on_excess_transfer,
        max_message_size=max_message_size,
        min_peer_idle_timeout=min_peer_idle_timeout,
        trace_level=trace_level,
    )
    engine = EngineConnection(config, sasl=_sasl_for(endpoint, sasl, virtual_host))
    conn = Connection(endpoint, engine, timeout)
    try:
        await conn._open(ssl_context, endpoint.host, dialer)
    except BaseException:
        conn._protocol.abort()
        raise
    return conn
