"""Pipelined sending: outcome futures under a bound on deliveries in flight."""

from __future__ import annotations

import asyncio
import datetime
import functools
import uuid
from collections.abc import AsyncIterable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from amqplink.aio.errors import AMQPError, MessageRejected, MessageSizeExceededError
from amqplink.aio.link import LinkBase
from amqplink.codec.types import Described
from amqplink.engine.events import DeliveriesUpdated, Event, LinkCreditChanged
from amqplink.engine.link import SND_SETTLED, SND_UNSETTLED, TERMINAL_OUTCOMES, Delivery, SenderLink
from amqplink.engine.session import Session
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Modified, Rejected, Released, Source, Target, TransactionalState

if TYPE_CHECKING:
    from amqplink.aio.connection import Connection

__all__ = ["Outcome", "Sendable", "Sender", "SettleMode", "future_factory", "rejection"]

SettleMode = Literal["unsettled", "settled"]

YIELD_EVERY = 256
"""Sends in a row that found room at once before a sender lets the event loop run
(reads, heartbeats, other tasks): without it a peer that grants 65,536 credit and
reads fast lets one ``send_many`` hold the loop for the whole burst."""
Outcome = Accepted | Rejected | Released | Modified
Sendable = (
    Message
    | bytes
    | bytearray
    | memoryview
    | str
    | int
    | float
    | dict[Any, Any]
    | list[Any]
    | tuple[Any, ...]
    | uuid.UUID
    | datetime.datetime
    | Described
    | None
)
"""What :meth:`Sender.send` takes: a :class:`Message`, or a body for ``Message(body)``:
bytes-likes become one data section, anything else one amqp-value section (3.2)."""


class Sender(LinkBase):
    """A sending link. Create it with :meth:`Connection.create_sender`.

    In ``unsettled`` mode every message gets an outcome from the peer and at most
    ``max_in_flight`` messages await theirs: the next send waits (it never drops)
    until one settles, which holds memory flat however fast the caller produces.
    In ``settled`` mode messages go pre-settled ("at most once", 3.4); sends wait
    while ``max_in_flight`` messages are queued for lack of credit or while the
    socket's write buffer is full.
    """

    kind = "sender"
    link: SenderLink
    write_timeout: float | None = None
    """How long a send may wait for the socket to take data (None: as long as it takes);
    past it, :class:`~amqplink.aio.transport.SocketWriteTimeout`."""

    def __init__(
        self,
        connection: Connection,
        session: Session,
        address: str | None,
        settle_mode: SettleMode,
        max_in_flight: int,
        name: str,
        properties: dict[Any, Any] | None,
    ) -> None:
        if settle_mode not in ("unsettled", "settled"):
            raise ValueError(f"settle_mode must be 'unsettled' or 'settled', not {settle_mode!r}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        super().__init__(connection, session, address)
        self.settle_mode = settle_mode
        self.max_in_flight = max_in_flight
        self._presettled = settle_mode == "settled"
        self._in_flight = 0
        self._unyielded = 0
        self._room: asyncio.Future[None] | None = None
        self._new_future = future_factory(self._loop)
        self._sent: asyncio.Future[Any] = self._loop.create_future()
        self._sent.set_result(None)
        link = session.attach_sender(
            name,
            source=Source(address=name),
            target=Target(address=address),
            snd_settle_mode=SND_SETTLED if self._presettled else SND_UNSETTLED,
            properties=properties,
        )
        # Unsettled sends made in one loop turn leave together at the flush that follows
        # (a settled sender's room is its queue, which must empty as sends write).
        link.batch_transfers = not self._presettled
        self._start(link)

    # -- state ------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Messages sent and not yet settled (unsettled mode) or not yet written (settled)."""
        return len(self.link.queue) if self._presettled else self._in_flight

    @property
    def credit(self) -> int:
        """Link credit the peer has granted and no queued message uses yet."""
        return self.link.credit

    def _refused(self) -> bool:
        remote = self.link.remote_attach
        return remote is not None and remote.target is None

    def _has_room(self) -> bool:
        if self._presettled:
            return len(self.link.queue) < self.max_in_flight
        return self._in_flight < self.max_in_flight

    async def _wait_room(self) -> None:
        protocol = self._protocol
        while True:
            self.check_usable()
            if protocol.write_paused:
                await protocol.wait_writable(self.write_timeout)
                continue
            if self._has_room():
                return
            await self._wait_progress()

    async def _wait_progress(self) -> None:
        """Wait until a delivery settles (unsettled) or the queue may have moved (settled)."""
        if self._room is None or self._room.done():
            self._room = self._loop.create_future()
        if self._presettled:
            # Queued deliveries leave on any frame that opens link credit or the
            # session window (a session flow carries no link event): wake on input.
            self.connection._waiting_senders.add(self)
        await self._room

    def _wake(self) -> None:
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)

    # -- sending ----------------------------------------------------------------------
    async def send_nowait(self, message: Sendable) -> asyncio.Future[Any]:
        """Hand ``message`` to the link and return a future for its outcome.

        A body that is not a :class:`Message` is sent as ``Message(body)``: ``bytes``
        as a data section, a ``str``, number, ``dict``, ``list`` or ``None`` as an
        amqp-value section (3.2), so any amqplink receiver decodes it back.

        Waits only for room under ``max_in_flight`` (and the socket's buffer), never
        for the outcome; the future resolves to the peer's outcome (``Accepted``,
        ``Rejected``, ``Released`` or ``Modified``; ``None`` in settled mode, as soon
        as the message is queued) or fails with the error that ended the link.
        """
        if type(message) is not Message and not isinstance(message, Message):
            message = Message(message)
        payload = message.encode()
        future = self._hand_over(payload, 0)
        if future is None:
            await self._pause()
            future = self._hand_over(payload, 0, paused=True)
            assert future is not None  # paused: handed over
        return future

    async def send_payload_nowait(self, payload: bytes, *, message_format: int = 0) -> asyncio.Future[Any]:
        """:meth:`send_nowait` for a payload already encoded (a message's sections, or a
        Service Bus batch with its ``message_format``, 2.7.5)."""
        future = self._hand_over(payload, message_format)
        if future is None:
            await self._pause()
            future = self._hand_over(payload, message_format, paused=True)
            assert future is not None  # paused: handed over
        return future

    async def send_payload_with_state(
        self, payload: bytes, state: Any, *, message_format: int = 0
    ) -> asyncio.Future[Any]:
        """:meth:`send_payload_nowait`, the transfer carrying the delivery state ``state`` (a
        transaction's ``transactional-state``: :mod:`amqplink.aio.transactions`); the future
        resolves to the peer's answer (its provisional outcome, in the transaction)."""
        while self._detached.done() or not self._has_room() or self._protocol.write_paused:
            await self._wait_room()
        limit = self.link.peer_max_message_size
        if limit and len(payload) > limit:
            raise MessageSizeExceededError(self._what(), len(payload), limit)  # as :meth:`_hand_over`
        if self._presettled:
            self.link.send_with_state(payload, state, message_format=message_format)
            self._protocol.schedule_flush()
            return self._sent
        future: asyncio.Future[Any] = self._new_future()
        self.link.send_with_state(payload, state, message_format=message_format, context=future)
        self._in_flight += 1
        self._protocol.schedule_flush()
        return future

    def try_send_payload(
        self, payload: bytes, *, message_format: int = 0, outcome: asyncio.Future[Any] | None = None
    ) -> asyncio.Future[Any] | None:
        """:meth:`send_payload_nowait` without waiting: the outcome future if the payload was
        handed over at once, None if the sender must first wait for room (then await
        :meth:`send_payload_nowait` instead). For callbacks that cannot await. ``outcome``:
        the (pending) future to resolve, instead of a new one (unsettled mode)."""
        return self._hand_over(payload, message_format, outcome=outcome)

    async def _pause(self) -> None:
        """Wait for room (the link's in-flight bound, the socket's buffer), or let the
        event loop run once after :data:`YIELD_EVERY` sends that found room at once."""
        if self._detached.done() or not self._has_room() or self._protocol.write_paused:
            await self._wait_room()
        else:
            await asyncio.sleep(0)
        self._unyielded = 0

    def _hand_over(
        self,
        payload: bytes,
        message_format: int,
        *,
        paused: bool = False,
        outcome: asyncio.Future[Any] | None = None,
    ) -> asyncio.Future[Any] | None:
        """Give one payload to the engine link and return its outcome future; None, and
        nothing given, when the sender must first :meth:`_pause`: after
        :data:`YIELD_EVERY` sends in a row, once detached, without room, or while the
        socket's buffer is full (``paused``: the caller has just paused, go ahead)."""
        if not paused and (
            self._unyielded >= YIELD_EVERY
            or self._detached.done()
            or not self._has_room()
            or self._protocol.write_paused
        ):
            return None
        self._unyielded += 1
        link = self.link
        limit = link.peer_max_message_size  # the peer's attach's max-message-size (0: none)
        if limit and len(payload) > limit:
            raise MessageSizeExceededError(self._what(), len(payload), limit)
        if self._presettled:
            link.send(payload, message_format=message_format)
            self._protocol.schedule_flush()
            return self._sent
        future: asyncio.Future[Any] = self._new_future() if outcome is None else outcome
        link.send(payload, message_format=message_format, context=future)
        self._in_flight += 1
        if self._in_flight == 1:  # alone: written now (the others of a burst coalesce)
            self._protocol.flush_lone()
        else:
            self._protocol.schedule_flush()
        return future

    async def send(self, message: Sendable, *, timeout: float | None = None) -> Outcome | None:
        """Send one message and wait for its outcome.

        Returns the outcome (``None`` in settled mode); raises :class:`MessageRejected`
        if the peer rejected it, and ``TimeoutError`` if no outcome came within
        ``timeout`` seconds (the message may still be delivered).
        """
        future = await self.send_nowait(message)
        outcome: Outcome | None  # what the future of an outcome resolves to
        if timeout is None:
            outcome = await future
        else:
            outcome = await asyncio.wait_for(asyncio.shield(future), timeout)
        if type(outcome) is Rejected:
            raise rejection(self._what(), outcome)
        return outcome

    async def send_many(self, messages: Iterable[Sendable] | AsyncIterable[Sendable]) -> list[Any]:
        """Pipeline every message under the in-flight bound; return the outcomes in order.

        A rejection is returned as its ``Rejected`` outcome, not raised; an error that
        ends the link is raised.
        """
        futures: list[asyncio.Future[Any]] = []
        if isinstance(messages, AsyncIterable):
            async for message in messages:
                futures.append(await self.send_nowait(message))
        else:
            for message in messages:
                futures.append(await self.send_nowait(message))
        return [await f for f in futures]

    async def wait_settled(self) -> None:
        """Wait until every message sent so far is settled (unsettled) or written (settled)."""
        while self.in_flight:
            self.check_usable()
            await self._wait_progress()
        self._protocol.flush()

    # -- engine events ----------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if type(event) is DeliveriesUpdated:  # per branch: exact, and narrowed for mypy
            self._outcomes(event.deliveries, event.state, event.settled)
        elif type(event) is LinkCreditChanged:
            if self._presettled:
                self._wake()
        else:
            super()._on_event(event)

    def _outcomes(self, deliveries: Iterable[Delivery], state: Any, settled: bool) -> None:
        """The peer's disposition of ``deliveries`` (one state for all): once it settles
        them or gives a terminal outcome (3.4), their futures resolve to it, in
        delivery-id order; a non-terminal state of an unsettled delivery resolves none."""
        if not settled and not isinstance(state, TERMINAL_OUTCOMES) and type(state) is not TransactionalState:
            return  # an interim state (a transaction's provisional outcome is an answer)
        resolved = 0
        for delivery in deliveries:
            future = delivery.context
            if future is not None and not future.done():
                future.set_result(state)
                resolved += 1
        if resolved:
            self._in_flight -= resolved
            self._wake()

    def _on_failed(self, failure: AMQPError) -> None:
        for delivery in [*self.link.unsettled.values(), *self.link.queue]:
            future = delivery.context
            if future is not None and not future.done():
                future.set_exception(failure)
                # One failure, one report: the caller who awaits it gets the error;
                # futures nobody awaits must not each log "never retrieved".
                future.exception()
        self._in_flight = 0
        room = self._room
        if room is not None and not room.done():
            room.set_exception(failure)
            room.exception()


def future_factory(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.Future[Any]]:
    """What makes ``loop``'s futures: ``loop.create_future``, or when that is asyncio's own
    (which returns ``asyncio.Future(loop=loop)``) a call that makes the same future without
    running a Python function for each (a send makes one per message)."""
    if type(loop).create_future is asyncio.BaseEventLoop.create_future:
        return functools.partial(asyncio.Future, loop=loop)
    return loop.create_future


def rejection(what: str, outcome: Rejected) -> MessageRejected:
    """The :class:`MessageRejected` for a message ``what`` sent, naming the peer's condition and description."""
    error = outcome.error
    condition = str(error.condition) if error is not None and error.condition is not None else None
    description = error.description if error is not None else None
    text = f"{what}: the peer rejected the message"
    if condition:
        text += f" [{condition}]"
    if description:
        text += f": {description}"
    return MessageRejected(
        text,
        outcome=outcome,
        condition=condition,
        description=description,
        info=error.info if error is not None else None,
    )
