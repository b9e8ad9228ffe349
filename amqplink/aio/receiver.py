"""Receiving: prefetch credit replenished as the application consumes, and settlement."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Literal

from amqplink.aio.errors import AMQPError, SettlementError
from amqplink.aio.link import LinkBase
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol
from amqplink.engine.events import (
    DeliveriesReceived,
    DeliveriesUpdated,
    DeliveryAborted,
    Event,
    LinkDrained,
    StatefulDeliveriesReceived,
)
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_SETTLED, SND_UNSETTLED, Delivery, ReceiverLink
from amqplink.engine.session import Session
from amqplink.message import Message
from amqplink.protocol.definitions import (
    Accepted,
    Error,
    Modified,
    Rejected,
    Released,
    Source,
    Target,
    TransactionalState,
)

if TYPE_CHECKING:
    from amqplink.aio.connection import Connection

__all__ = ["ReceivedMessage", "Receiver", "ReceiverMode", "SettlementWaiter", "rejected"]

log = logging.getLogger(__name__)

ReceiverMode = Literal["receive-and-delete", "peek-lock"]

_ACCEPTED = Accepted()
_RELEASED = Released()


class ReceivedMessage(Message):
    """A message as it arrived on a :class:`Receiver`, with its delivery."""

    __slots__ = ("_delivery",)

    _delivery: Delivery | None

    @property
    def delivery_tag(self) -> bytes | None:
        """The delivery tag the sender chose (Service Bus: the lock token's bytes)."""
        return self._delivery.tag if self._delivery is not None else None

    @property
    def settled(self) -> bool:
        """True once this side has settled the message (or it arrived pre-settled)."""
        d = self._delivery
        return d is None or d.settled


class SettlementWaiter:
    """What waits for the peer's settlement of a delivery this side settled in rcv-settle-mode
    ``second`` (2.8.3), as the delivery's context (else a plain future is): told once, by
    one of its two methods."""

    __slots__ = ()

    def confirmed(self) -> None:
        """The peer settled the delivery (its outcome is the delivery's ``remote_state``)."""
        raise NotImplementedError

    def failed(self, error: SettlementError) -> None:
        """The link failed before the peer settled the delivery."""
        raise NotImplementedError


class _Confirmations(SettlementWaiter):
    """The peer's settlements one settle call waits for (rcv-settle-mode ``second``,
    2.8.3): one future for the whole call, done when the last of them arrives."""

    __slots__ = ("future", "left")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.left = 0

    def confirmed(self, count: int = 1) -> None:
        """``count`` more of them settled (one unless said)."""
        self.left -= count
        if self.left <= 0 and not self.future.done():
            self.future.set_result(None)

    def failed(self, error: SettlementError) -> None:
        _fail(self.future, error)


class _Provisional(SettlementWaiter):
    """What waits for the peer's answer to a transactional disposition (a delivery's
    context): its unsettled provisional outcome, or its settlement."""

    __slots__ = ("delivery", "future", "what")

    def __init__(self, future: asyncio.Future[Any], delivery: Delivery, what: str) -> None:
        self.future = future
        self.delivery = delivery
        self.what = what

    def answered(self) -> None:
        """The peer answered (``delivery.remote_state``): the provisional outcome, or a refusal,
        which leaves the delivery to be settled again."""
        delivery = self.delivery
        delivery.context = None
        state = delivery.remote_state
        outcome = state.outcome if type(state) is TransactionalState else state
        if type(outcome) is Rejected and outcome.error is not None:
            if not delivery.settled:
                delivery.state = None  # not applied: it may be settled again
            error = outcome.error
            condition = str(error.condition)
            _fail(
                self.future,
                SettlementError(
                    f"{self.what}: the peer refused the settlement [{condition}]: {error.description}",
                    condition=condition,
                    description=error.description,
                ),
            )
        elif not self.future.done():
            self.future.set_result(state)

    def confirmed(self) -> None:
        self.answered()

    def failed(self, error: SettlementError) -> None:
        _fail(self.future, error)


def _fail(future: asyncio.Future[Any], error: SettlementError) -> None:
    if not future.done():
        future.set_exception(error)
        future.exception()  # one failure, one report: the awaiting caller gets it


class Receiver(LinkBase):
    """A receiving link. Create it with :meth:`Connection.create_receiver`.

    Credit: ``prefetch`` messages are granted at attach; credit is given back as the
    application takes messages (``receive`` / iteration), not when frames arrive,
    so a slow consumer holds at most ``prefetch`` messages in memory.
    """

    kind = "receiver"
    link: ReceiverLink

    def __init__(
        self,
        connection: Connection,
        session: Session,
        address: str | None,
        mode: ReceiverMode,
        prefetch: int,
        name: str,
        properties: dict[Any, Any] | None,
        filters: dict[Any, Any] | None,
        dynamic: bool,
        confirm: bool,
        max_message_size: int | None = None,
    ) -> None:
        if mode not in ("receive-and-delete", "peek-lock"):
            raise ValueError(f"mode must be 'receive-and-delete' or 'peek-lock', not {mode!r}")
        if prefetch < 0:
            raise ValueError(f"prefetch must be 0 or more, not {prefetch}")
        if address is None and not dynamic:
            raise ValueError("a receiver needs an address (or dynamic=True)")
        super().__init__(connection, session, address)
        self.mode = mode
        self.prefetch = prefetch
        self.confirm = confirm
        self._buffer: deque[ReceivedMessage] = deque()
        self._arrival: asyncio.Future[None] | None = None
        self._to_grant = 0
        self._drained: asyncio.Future[None] | None = None
        self._grant_batch = max(1, prefetch // 4)
        self.decode_failures = 0
        self._outcomes: frozenset[str] | None = None  # what the peer's source offers, if it says
        link = session.attach_receiver(
            name,
            source=Source(address=address, dynamic=dynamic, filter=filters),
            target=Target(address=name),
            snd_settle_mode=SND_SETTLED if mode == "receive-and-delete" else SND_UNSETTLED,
            rcv_settle_mode=RCV_SECOND if confirm else RCV_FIRST,
            properties=properties,
            max_message_size=max_message_size,
        )
        self._start(link)

    # -- attach -----------------------------------------------------------------------
    def _refused(self) -> bool:
        remote = self.link.remote_attach
        return remote is not None and remote.source is None

    def _on_attached(self) -> None:
        remote = self.link.remote_attach
        assert remote is not None
        if self.address is None and remote.source is not None:
            self.address = remote.source.address  # dynamic node: the peer names it
        # The engine link settles first if the peer answered first (it will not confirm).
        self.confirm = self.link.rcv_settle_mode == RCV_SECOND
        if remote.source is not None and remote.source.outcomes:
            # "the symbolic descriptors of the outcomes that can be chosen on this link" (3.5.3);
            # RabbitMQ 3.x offers no modified and ends the session if it gets one.
            self._outcomes = frozenset(str(o) for o in remote.source.outcomes)
        if self.prefetch:
            self.link.flow(self.prefetch)
            self._protocol.schedule_flush()

    # -- receiving --------------------------------------------------------------------
    @property
    def buffered(self) -> int:
        """Messages arrived and not yet taken by the application."""
        return len(self._buffer)

    async def receive(self, max_messages: int = 1, timeout: float | None = None) -> list[ReceivedMessage]:
        """Wait for at least one message (up to ``timeout`` s) and take up to ``max_messages``.

        Returns an empty list on time-out, or once the link is closed cleanly and
        drained; raises the link's error once it failed and its buffer is empty.
        """
        if max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, not {max_messages}")
        buffer = self._buffer
        if not buffer:
            if self._detached.done():
                if self.error is not None:
                    raise self.error
                return []
            if self.prefetch == 0:
                self._grant_on_demand(max_messages)
            if not await self._wait_arrival(timeout):
                return []
        n = len(buffer)
        if n <= max_messages:
            taken = list(buffer)
            buffer.clear()
        else:
            n = max_messages
            taken = [buffer.popleft() for _ in range(n)]
        self._consumed(n)
        return taken

    async def _wait_arrival(self, timeout: float | None) -> bool:
        if self._arrival is None or self._arrival.done():
            self._arrival = self._loop.create_future()
        try:
            if timeout is None:
                await self._arrival
            else:
                await asyncio.wait_for(asyncio.shield(self._arrival), timeout)
        except TimeoutError:
            return False
        except AMQPError:
            if self._buffer:
                return True
            raise
        if not self._buffer:
            if self.error is not None:
                raise self.error
            return False
        return True

    def __aiter__(self) -> Receiver:
        return self

    async def __anext__(self) -> ReceivedMessage:
        while True:
            got = await self.receive(1)
            if got:
                return got[0]
            if self._detached.done():
                raise StopAsyncIteration

    def _grant_on_demand(self, wanted: int) -> None:
        missing = wanted - self.link.link_credit
        if missing > 0 and self.link.is_attached:
            self.link.add_credit(missing)
            self._protocol.schedule_flush()

    async def drain(self, timeout: float | None = None) -> bool:
        """Ask the sender to use the link's credit at once or give it back, and wait for its
        answer: "the sender ... MUST either use all the available credit or ... advance the
        delivery-count" (2.6.7). Messages it sends meanwhile are buffered as usual. True once
        no credit is left (at once if there was none); False on time-out or a closed link."""
        link = self.link
        if link.link_credit == 0:
            return True
        if self._detached.done() or not link.is_attached:
            return False
        if self._drained is None or self._drained.done():
            self._drained = self._loop.create_future()
        drained = self._drained
        link.flow(link.link_credit, drain=True)
        self._protocol.schedule_flush()
        try:
            await asyncio.wait_for(asyncio.shield(drained), timeout)
        except TimeoutError:
            return False
        return link.link_credit == 0

    def _consumed(self, n: int) -> None:
        if not self.prefetch:
            return
        self._to_grant += n
        if self._to_grant >= self._grant_batch:
            self.link.add_credit(self._to_grant)
            self._to_grant = 0
            self._protocol.schedule_flush()

    # -- settlement -------------------------------------------------------------------
    async def accept(self, *messages: ReceivedMessage) -> None:
        """Settle with ``accepted`` (3.4.2): the message is processed and gone."""
        await self._settle(messages, _ACCEPTED, "accept")

    async def release(self, *messages: ReceivedMessage) -> None:
        """Settle with ``released`` (3.4.4): not processed; the peer may redeliver it."""
        await self._settle(messages, _RELEASED, "release")

    def give_back(self, messages: list[ReceivedMessage]) -> None:
        """Release ``messages`` without waiting for the peer (for a receive that was cancelled
        after taking them: nobody will handle them, and a released delivery is not a delivery
        attempt, 3.4.4); does nothing once the link is closed."""
        if messages and not self.closed:
            self.start_settle(messages, _RELEASED, "release")

    async def modify(
        self,
        *messages: ReceivedMessage,
        delivery_failed: bool = True,
        undeliverable_here: bool = False,
        annotations: dict[Any, Any] | None = None,
    ) -> None:
        """Settle with ``modified`` (3.4.5): not processed; ``delivery_failed`` counts an
        attempt, ``undeliverable_here`` keeps it from this link, ``annotations`` merge
        into the message annotations."""
        anns = {Symbol(k) if type(k) is str else k: v for k, v in annotations.items()} if annotations else None
        state = Modified(
            delivery_failed=delivery_failed, undeliverable_here=undeliverable_here, message_annotations=anns
        )
        await self._settle(messages, state, "modify")

    async def reject(
        self,
        *messages: ReceivedMessage,
        condition: str = "amqp:internal-error",
        description: str | None = None,
        info: dict[Any, Any] | None = None,
    ) -> None:
        """Settle with ``rejected`` (3.4.3) and an error; Service Bus dead-letters the message."""
        await self._settle(messages, rejected(condition, description, info), "reject")

    async def settle_with_state(self, message: ReceivedMessage, state: TransactionalState) -> Any:
        """Settle ``message`` with a transaction's ``transactional-state(txn-id, outcome)``
        (:mod:`amqplink.aio.transactions`); with a peer that confirms settlements, wait for
        its answer, the provisional outcome (the delivery stays unsettled until the
        transaction ends): it is returned, or raised as :class:`SettlementError` when the
        peer refused it (the outcome was not applied and the message may be settled again).
        None when no answer comes (this receiver settles first)."""
        self._check_outcome(state.outcome, "settle in a transaction")
        delivery = self._settle_delivery(message, state, "settle in a transaction")
        self._protocol.schedule_flush()
        if delivery is None:
            return None
        answer: asyncio.Future[Any] = self._loop.create_future()
        delivery.context = _Provisional(answer, delivery, self._what())
        return await answer

    async def _settle(self, messages: tuple[ReceivedMessage, ...], state: Any, verb: str) -> None:
        waits = self.start_settle(messages, state, verb)
        if waits is not None:
            await waits

    def start_settle(
        self, messages: tuple[ReceivedMessage, ...] | list[ReceivedMessage], state: Any, verb: str
    ) -> asyncio.Future[None] | None:
        """Settle ``messages`` with ``state`` (the disposition leaves at the end of this loop
        turn); the future to await for the peer's confirmation, None if none will come.
        A settlement this link cannot make raises ``SettlementError`` at once."""
        self._check_outcome(state, verb)
        deliveries = self._settleable(messages)
        if deliveries is None:
            return self._start_settle_each(messages, state, verb)
        self.link.settle_all(deliveries, state)
        future = self._confirmations([delivery for delivery in deliveries if not delivery.settled])
        self._protocol.schedule_flush()
        return future

    def _settleable(self, messages: tuple[ReceivedMessage, ...] | list[ReceivedMessage]) -> list[Delivery] | None:
        """The deliveries of ``messages`` if settling them together is settling each in turn:
        each is this link's and unsettled, none comes twice, the link is not gone. None
        otherwise: :meth:`_start_settle_each` then settles them or raises as it does."""
        if self._detached.done():
            return None
        link = self.link
        try:
            deliveries = [message._delivery for message in messages]
        except AttributeError:  # not a received message
            return None
        for delivery in deliveries:
            if delivery is None or delivery.link is not link or delivery.settled or delivery.state is not None:
                return None
        if len(set(deliveries)) != len(deliveries):
            return None
        return deliveries  # type: ignore[return-value]  # the loop above returned None on any None

    def _start_settle_each(
        self, messages: tuple[ReceivedMessage, ...] | list[ReceivedMessage], state: Any, verb: str
    ) -> asyncio.Future[None] | None:
        """:meth:`start_settle` one message after another: those before one this link cannot
        settle are settled (and waited for) when its ``SettlementError`` is raised."""
        pending: list[Delivery] = []
        try:
            for message in messages:
                delivery = self._settle_delivery(message, state, verb)
                if delivery is not None:
                    pending.append(delivery)
        finally:  # what was settled before a refusal leaves now too
            future = self._confirmations(pending)
            self._protocol.schedule_flush()
        return future

    def _confirmations(self, pending: list[Delivery]) -> asyncio.Future[None] | None:
        """The future done once the peer has settled each of ``pending`` (None if empty), as
        their context: one delivery (the usual call) has the future itself; several, one
        :class:`_Confirmations` counting them down to it."""
        if not pending:
            return None
        future: asyncio.Future[None] = self._loop.create_future()
        if len(pending) == 1:
            pending[0].context = future
            return future
        waits = _Confirmations(future)
        waits.left = len(pending)
        for delivery in pending:
            delivery.context = waits
        return future

    def _start_settle_one(self, message: ReceivedMessage, state: Any, verb: str, waiter: SettlementWaiter) -> bool:
        """:meth:`start_settle` of one message, whose confirmation goes to ``waiter``; False
        if none will come (the delivery settled at once, ``waiter`` is not told)."""
        self._check_outcome(state, verb)
        delivery = self._settle_delivery(message, state, verb)
        if delivery is not None:
            delivery.context = waiter
        self._protocol.schedule_flush()
        return delivery is not None

    def _check_outcome(self, state: Any, verb: str) -> None:
        """``SettlementError`` unless this link may settle with ``state``."""
        if self.mode == "receive-and-delete":
            raise SettlementError(f"{self._what()}: cannot {verb}: receive-and-delete messages are settled on arrival")
        offered = self._outcomes
        if offered is not None and str(state.DESCRIPTOR_SYMBOL) not in offered:
            raise SettlementError(
                f"{self._what()}: cannot {verb}: the peer offers only {', '.join(sorted(offered))} on this link;"
                " the message stays unsettled"
            )

    def _settle_delivery(self, message: ReceivedMessage, state: Any, verb: str) -> Delivery | None:
        """Settle ``message``'s delivery with ``state`` on the engine link; the delivery if the
        peer's settlement is still to come. ``SettlementError`` if this link cannot settle it."""
        delivery = message._delivery
        link = self.link
        if delivery is None or delivery.link is not link:
            raise SettlementError(f"{self._what()}: cannot {verb} a message this receiver did not receive")
        if delivery.settled:
            raise SettlementError(f"{self._what()}: cannot {verb}: the message is already settled")
        if delivery.state is not None:
            # rcv-settle-mode second: the outcome went out and "the receiver will only settle
            # after the sender has settled" (2.8.3); a second outcome would leave the first
            # call's waiter without the one settlement the peer sends.
            raise SettlementError(
                f"{self._what()}: cannot {verb}: an outcome for the message is already given and waits"
                " for the peer's settlement"
            )
        if self._detached.done():
            raise SettlementError(
                f"{self._what()}: cannot {verb}: the link is gone, so the peer will redeliver the message",
                condition=self.error.condition if self.error is not None else None,
            )
        link.settle(delivery, state)
        return None if delivery.settled else delivery

    # -- engine events ----------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        # ``type(event) is C`` per branch: exact types, and narrowed for mypy.
        if type(event) is DeliveriesReceived or type(event) is StatefulDeliveriesReceived:
            self._on_deliveries(event.deliveries)
        elif type(event) is DeliveriesUpdated:
            if event.settled:
                self._on_peer_settled(event.deliveries)
            elif type(event.state) is TransactionalState:
                for delivery in event.deliveries:
                    waits = delivery.context
                    if type(waits) is _Provisional:
                        waits.answered()
        elif type(event) is DeliveryAborted:
            self._consumed(1)  # the credit it used is free again
        elif type(event) is LinkDrained:
            drained = self._drained
            if drained is not None and not drained.done():
                drained.set_result(None)
        else:
            super()._on_event(event)

    def _on_peer_settled(self, deliveries: list[Delivery]) -> None:
        """The peer settled ``deliveries``: whoever waits for that is told."""
        told = False
        group: _Confirmations | None = None  # told of a run of its deliveries at once
        count = 0
        for delivery in deliveries:
            waits = delivery.context
            if waits is None:
                continue
            told = True
            if waits is group:
                count += 1
                continue
            if group is not None:
                group.confirmed(count)
                group = None
            if type(waits) is _Confirmations:
                group, count = waits, 1
            elif isinstance(waits, SettlementWaiter):
                waits.confirmed()
            elif not waits.done():
                waits.set_result(None)
        if group is not None:
            group.confirmed(count)
        if told:
            # The flush after the wake-ups these confirmations scheduled: what the woken
            # tasks settle next leaves in their loop turn, not one turn later.
            self._protocol.schedule_flush()

    def _on_deliveries(self, deliveries: list[Delivery]) -> None:
        """Whole deliveries arrived: each decoded into the buffer (or rejected)."""
        decode = ReceivedMessage.decode
        append = self._buffer.append
        settle_on_arrival = self.mode == "receive-and-delete"
        took = False
        for delivery in deliveries:
            try:
                message = decode(delivery.payload)
            except DecodeError as exc:
                self._refuse_undecodable(delivery, exc)
                continue
            message._delivery = delivery
            delivery.payload = None  # the message holds what it needs
            if settle_on_arrival and not delivery.settled:
                self.link.settle(delivery, _ACCEPTED)  # the peer sent it unsettled anyway
                self._protocol.schedule_flush()
            append(message)
            took = True
        arrival = self._arrival
        if took and arrival is not None and not arrival.done():
            arrival.set_result(None)

    def _refuse_undecodable(self, delivery: Delivery, exc: DecodeError) -> None:
        """A delivery that is no message: rejected with ``amqp:decode-error``, its credit given back."""
        self.decode_failures += 1
        log.warning("%s: undecodable message (%s); rejecting it with amqp:decode-error", self._what(), exc)
        if not delivery.settled:
            self.link.settle(delivery, rejected("amqp:decode-error", str(exc)))
        self._consumed(1)
        self._protocol.schedule_flush()

    def _on_failed(self, failure: AMQPError) -> None:
        for delivery in self.link.unsettled.values():
            waits = delivery.context
            if waits is not None:
                error = SettlementError(
                    f"{self._what()}: settlement not confirmed: {failure}", condition=failure.condition
                )
                if isinstance(waits, SettlementWaiter):
                    waits.failed(error)
                else:
                    _fail(waits, error)
        for waiter in (self._arrival, self._drained):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)


def rejected(condition: str, description: str | None = None, info: dict[Any, Any] | None = None) -> Rejected:
    """The ``rejected`` outcome (3.4.3) carrying an error with ``condition``."""
    return Rejected(error=Error(condition=Symbol(condition), description=description, info=info))
