"""The asyncio Service Bus receiver (azure-servicebus's ``aio.ServiceBusReceiver``).

Settlement on the receiving link, as docs/protocol.md#settlement-mapping maps it: complete = ``accepted``,
abandon = ``modified(delivery-failed, not undeliverable-here)``, defer =
``modified(delivery-failed, undeliverable-here)``, dead-letter =
``rejected(com.microsoft:dead-letter, info={DeadLetterReason, DeadLetterErrorDescription})``.
The link asks rcv-settle-mode ``second``, so the broker confirms each settlement;
``rejected(com.microsoft:message-lock-lost)`` raises :class:`MessageLockLostError`.
A message whose link is gone (the connection broke, the link was detached) has lost
its lock: settling or renewing it raises ``MessageLockLostError`` without asking the
broker. Deferred messages (no link delivery) settle over ``$management``. A settlement on
the link starts when the settle method is called (:mod:`amqplink.servicebus.settlement`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.receiver import ReceivedMessage, Receiver, rejected
from amqplink.codec.types import UInt
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Modified, Rejected
from amqplink.sbwire.conditions import DEAD_LETTER as DEAD_LETTER_CONDITION
from amqplink.sbwire.nodes import OPERATION_TIMEOUT as _OPERATION_TIMEOUT
from amqplink.servicebus._base import ConnectionHolder, Handler
from amqplink.servicebus.client_options import RECEIVER_NAME
from amqplink.servicebus.client_options import client_identifier as identifier
from amqplink.servicebus.constants import (
    SUB_QUEUE_SUFFIX,
    ServiceBusReceiveMode,
    ServiceBusSessionFilter,
    ServiceBusSubQueue,
)
from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    ServiceBusError,
    SessionLockLostError,
)
from amqplink.servicebus.management_node import DispositionStatus
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.retry import backoff_delay
from amqplink.servicebus.session import LOCKED_UNTIL_UTC, SESSION_FILTER, ServiceBusSession, datetime_from_ticks
from amqplink.servicebus.settlement import LinkSettlement

if TYPE_CHECKING:
    from amqplink.servicebus.lock_renewer import AutoLockRenewer
    from amqplink.servicebus.retry import RetryPolicy

if TYPE_CHECKING:
    from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = ["DEAD_LETTER_CONDITION", "GATHER_WINDOW", "ServiceBusReceiver"]

log = logging.getLogger(__name__)

"""The attach property telling Service Bus how long a next-available-session receiver waits (ms)."""

GATHER_WINDOW = 0.02
"""Seconds ``receive_messages`` keeps collecting after the first message, while fewer than
``max_message_count`` have come (messages still on the wire join the same call)."""
_LINK_OUTCOMES: dict[DispositionStatus, tuple[Any, str]] = {
    DispositionStatus.COMPLETED: (Accepted(), "accept"),
    DispositionStatus.ABANDONED: (Modified(delivery_failed=True, undeliverable_here=False), "modify"),
    DispositionStatus.DEFERRED: (Modified(delivery_failed=True, undeliverable_here=True), "modify"),
}
"""The outcome each settlement sends on the receive link, and its verb for errors
(docs/protocol.md#settlement-mapping); dead-lettering is a ``rejected`` carrying the reason."""
RECEIVER_SETTLE_FIRST, RECEIVER_SETTLE_SECOND = 0, 1
DRAIN_ANSWER_TIMEOUT = 5.0
"""Seconds (at most the operation timeout) a broker gets to answer a drain before the link
is taken as broken and closed (its credit would otherwise stay open)."""

SessionArg = str | ServiceBusSessionFilter | None


def link_outcome(status: DispositionStatus, reason: str | None, description: str | None) -> tuple[Any, str]:
    """The outcome a settlement is on the receive link (docs/protocol.md#settlement-mapping) and its verb:
    complete = accepted, abandon = modified, defer = modified undeliverable-here, dead-letter =
    rejected with ``com.microsoft:dead-letter`` and the reason and description in its info."""
    outcome = _LINK_OUTCOMES.get(status)
    if outcome is not None:
        return outcome
    info: dict[str, Any] = {}
    if reason is not None:
        info["DeadLetterReason"] = reason
    if description is not None:
        info["DeadLetterErrorDescription"] = description
    return rejected(DEAD_LETTER_CONDITION, description, info or None), "reject"


class ServiceBusReceiver(Handler):
    """Receives from a queue, a subscription, or their dead-letter queue; get one from
    ``ServiceBusClient.get_queue_receiver`` / ``get_subscription_receiver``."""

    _kind = "receiver"

    def __init__(
        self,
        holder: ConnectionHolder | str,
        entity_name: Any = None,
        *,
        policy: RetryPolicy | None = None,
        receive_mode: ServiceBusReceiveMode | str = ServiceBusReceiveMode.PEEK_LOCK,
        prefetch_count: int = 0,
        max_wait_time: float | None = None,
        sub_queue: ServiceBusSubQueue | str | None = None,
        session_id: SessionArg = None,
        is_session: bool = False,
        auto_lock_renewer: AutoLockRenewer | None = None,
        queue_name: str | None = None,
        topic_name: str | None = None,
        subscription_name: str | None = None,
        client_identifier: str | None = None,
        socket_timeout: float | None = None,
        **options: Any,
    ) -> None:
        """From a client (``get_queue_receiver``...), or as the SDK's ``ServiceBusReceiver(
        fully_qualified_namespace, credential, queue_name=... | topic_name=..., subscription_name=...,
        **options)``, which opens a connection of its own (closed with the receiver)."""
        if prefetch_count < 0:
            raise ValueError("prefetch_count must be 0 or greater.")
        if max_wait_time is not None and max_wait_time <= 0:
            raise ValueError("max_wait_time must be greater than 0.")
        if not isinstance(holder, ConnectionHolder):  # the SDK's direct construction
            credential = entity_name if entity_name is not None else options.pop("credential", None)
            entity_path = options.pop("_entity_path", None)  # from_connection_string's queue or topic
            if entity_path is not None:
                sub = subscription_name
                entity_name = entity_path if sub is None else f"{entity_path}/Subscriptions/{sub}"
            elif queue_name is not None and topic_name is None and subscription_name is None:
                entity_name = queue_name
            elif queue_name is None and topic_name is not None and subscription_name is not None:
                entity_name = f"{topic_name}/Subscriptions/{subscription_name}"
            else:
                raise ValueError("Exactly one of queue_name or topic_name (with subscription_name) must be specified.")
            client_identifier = identifier(self._kind, client_identifier)  # also the connection's container-id
            holder, policy = self._standalone(holder, credential, {**options, "container_id": client_identifier})
        assert policy is not None, "a receiver from a ConnectionHolder needs its policy"
        suffix = SUB_QUEUE_SUFFIX[ServiceBusSubQueue(sub_queue)] if sub_queue is not None else ""
        super().__init__(
            holder,
            f"{entity_name}{suffix}",
            policy=policy,
            client_identifier=client_identifier,
            socket_timeout=socket_timeout,
        )
        self._receive_mode = ServiceBusReceiveMode(receive_mode)
        self._prefetch_count = prefetch_count
        self._max_wait_time = max_wait_time
        self._sub_queue = sub_queue
        self._is_session = is_session or session_id is not None
        self._session_id: SessionArg = session_id
        self._session: ServiceBusSession | None = None
        self._auto_lock_renewer = auto_lock_renewer
        self._link: Receiver | None = None
        self._last_peeked: int | None = None
        self.queue_name = queue_name
        self.topic_name = topic_name
        self.subscription_name = subscription_name

    @classmethod
    def _check_named(cls, kwargs: dict[str, Any]) -> None:
        """As the SDK's ``_from_connection_string``: a queue has no subscription, a topic needs one."""
        if kwargs.get("queue_name") and kwargs.get("subscription_name"):
            raise ValueError("Queue entity does not have subscription.")
        if kwargs.get("topic_name") and not kwargs.get("subscription_name"):
            raise ValueError("Subscription name is missing for the topic. Please specify subscription_name.")

    @property
    def receive_mode(self) -> ServiceBusReceiveMode:
        """PEEK_LOCK or RECEIVE_AND_DELETE."""
        return self._receive_mode

    @property
    def entity_path(self) -> str:
        """The path received from (``topic/Subscriptions/sub``, a ``/$DeadLetterQueue`` suffix), as the SDK's."""
        return self.entity_name

    @property
    def session(self) -> ServiceBusSession | None:
        """The locked session of a session receiver (after it opened); None on a receiver
        without a session, as the SDK's ("it would return None if called on a non-sessionful
        receiver")."""
        if not self._is_session:
            return None
        if self._session is None:
            raise ValueError("the session receiver has not opened yet: use it as `async with` or receive first.")
        return self._session

    # -- links ------------------------------------------------------------------------
    def _links_alive(self) -> bool:
        return self._link is not None and not self._link.closed

    @property
    def _management_link_name(self) -> str | None:
        return None if self._link is None else self._link.name

    def _on_links_lost(self) -> None:
        if self._session is not None:
            self._session._lock_lost = True

    async def _attach(self, connection: Connection) -> None:
        filters = None
        properties: dict[Any, Any] = {RECEIVER_NAME: self.client_identifier}  # as the SDK's link_properties
        if self._is_session:
            wanted = self._session_id
            if self._session is not None:
                wanted = self._session.session_id  # reattach to the session this receiver had
            next_available = isinstance(wanted, ServiceBusSessionFilter)
            filters = {SESSION_FILTER: None if next_available else wanted}
            if next_available and self._max_wait_time:
                # As the SDKs: how long Service Bus may hold the attach for a session to come free.
                properties[_OPERATION_TIMEOUT] = UInt(int(self._max_wait_time * 1000))
        peek_lock = self._receive_mode is ServiceBusReceiveMode.PEEK_LOCK
        self._link = await connection.create_receiver(
            self.entity_name,
            mode="peek-lock" if peek_lock else "receive-and-delete",
            prefetch=self._prefetch_count,
            name=self._next_link_name(),
            filters=filters,
            properties=properties,
        )
        if self._is_session:
            first = self._session is None
            self._session = self._session_from_attach(self._link)
            if first and self._auto_lock_renewer is not None:
                self._auto_lock_renewer.register(self, self._session)

    def _session_from_attach(self, link: Receiver) -> ServiceBusSession:
        remote = link.link.remote_attach
        assert remote is not None and remote.source is not None
        answered = (remote.source.filter or {}).get(SESSION_FILTER)
        if isinstance(answered, bytes):
            answered = answered.decode("utf-8")
        if answered is None:
            answered = self._session_id if isinstance(self._session_id, str) else None
        ticks = (remote.properties or {}).get(LOCKED_UNTIL_UTC)
        until = None if ticks is None else datetime_from_ticks(int(ticks))
        if answered is None:
            raise ServiceBusError(description="the broker locked a session without naming it", entity=self.entity_name)
        return ServiceBusSession(str(answered), self, until)

    async def _close_links(self) -> None:
        link = self._link
        if link is None:
            return
        if not self._is_session and self._receive_mode is ServiceBusReceiveMode.PEEK_LOCK:
            await _release_buffered(link, min(DRAIN_ANSWER_TIMEOUT, self._policy.timeout))
        await link.close()

    # -- receiving --------------------------------------------------------------------
    def _wrap(self, raw: ReceivedMessage) -> ServiceBusReceivedMessage:
        settled = self._receive_mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE
        message = ServiceBusReceivedMessage(raw, receiver=self, settled=settled, delivery=raw)
        renewer = self._auto_lock_renewer
        if renewer is not None and not settled and not self._is_session:
            renewer.register(self, message)
        return message

    async def _receive_raw(self, max_message_count: int, timeout: float | None) -> list[ReceivedMessage]:
        """Wait up to ``timeout`` s for a message; reattach (under the retry policy) when the link breaks."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        retried = 0
        while True:
            try:
                await self._open()
                assert self._link is not None
                left = None if deadline is None else max(0.0, deadline - loop.time())
                link = self._link
                got = await link.receive(max_message_count, left)
                if not got and self._prefetch_count == 0:
                    got = await self._take_back_credit(link, max_message_count)
                return got
            except (AMQPError, OSError) as exc:
                error = from_amqp_error(exc, entity=self.entity_name)
                retried += 1
                if self._is_session and isinstance(error, ServiceBusError) and self._session is not None:
                    self._session._lock_lost = True
                    raise SessionLockLostError(description=str(error), entity=self.entity_name, error=exc) from exc
                if not error.retryable or retried > self._policy.retry_total:
                    raise error from exc
                delay = backoff_delay(self._policy, retried, error)
                if deadline is not None and loop.time() + delay >= deadline:
                    if self._is_session and self._session is None:
                        # No session was locked (NEXT_AVAILABLE_SESSION found none in its wait):
                        # as the SDK, the attach's error, not "no messages" from a session never had.
                        raise error from exc
                    return []
                log.info("%s: receiving failed (%s); reattaching in %.1f s", self.entity_name, error, delay)
                await asyncio.sleep(delay)

    async def _take_back_credit(self, link: Receiver, max_message_count: int) -> list[ReceivedMessage]:
        """Without prefetch, a receive that timed out drains the credit it granted, so that no
        message is locked for a receiver nobody waits on; one that came meanwhile is returned.
        A broker that does not answer within ``DRAIN_ANSWER_TIMEOUT`` gets the link closed (its
        locks are lost, as on any link loss; the next receive attaches a new one)."""
        if not await link.drain(min(DRAIN_ANSWER_TIMEOUT, self._policy.timeout)) and not link.closed:
            log.warning("%s: the broker did not answer a drain; closing the link", self.entity_name)
            await link.close()
        if link.buffered and max_message_count > 0:
            return await link.receive(max_message_count, 0)
        return []

    async def receive_messages(
        self, max_message_count: int | None = 1, max_wait_time: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        """Up to ``max_message_count`` messages, waiting up to ``max_wait_time`` s (default: the
        receiver's ``max_wait_time``; None waits until one comes) for the first."""
        self._check_not_closed()
        count = 1 if max_message_count is None else int(max_message_count)
        if count < 1:
            raise ValueError("max_message_count must be 1 or greater.")
        if max_wait_time is not None and max_wait_time <= 0:
            raise ValueError("max_wait_time must be greater than 0.")
        wait = max_wait_time if max_wait_time is not None else self._max_wait_time
        raws = await self._receive_raw(count, wait)
        link = self._link
        try:
            while raws and len(raws) < count and link is not None and not link.closed:
                try:
                    more = await link.receive(count - len(raws), GATHER_WINDOW)
                except AMQPError:
                    break  # hand out what came; the next call reports the link's error
                if not more:
                    break
                raws += more
            if raws and self._prefetch_count == 0 and link is not None and link.link.link_credit:
                raws += await self._take_back_credit(link, count - len(raws))  # what the gathering granted
        except asyncio.CancelledError:
            if link is not None:  # taken and never handed out: not left locked until the lock expires
                link.give_back(raws)
            raise
        return [self._wrap(raw) for raw in raws]

    def __aiter__(self) -> ServiceBusReceiver:
        return self

    async def __anext__(self) -> ServiceBusReceivedMessage:
        """The next message; iteration ends after ``max_wait_time`` s without one (never if None)."""
        self._check_not_closed()
        raws = await self._receive_raw(1, self._max_wait_time)
        if not raws:
            raise StopAsyncIteration
        return self._wrap(raws[0])

    async def peek_messages(
        self, max_message_count: int = 1, *, sequence_number: int = 0, timeout: float | None = None, **kwargs: Any
    ) -> list[ServiceBusReceivedMessage]:
        """Browse messages without locking them, from ``sequence_number`` (default: after the last peeked)."""
        self._check_not_closed()
        if timeout is not None and timeout <= 0:
            raise ValueError("The timeout must be greater than 0.")
        if int(max_message_count) < 0:
            raise ValueError("max_message_count must be 1 or greater.")
        start = sequence_number or ((self._last_peeked + 1) if self._last_peeked else 1)
        session_id = await self._session_id_for_management()
        count = int(max_message_count)
        found = await self._mgmt_call(lambda m: m.peek_messages(start, count, session_id=session_id), timeout)
        messages = [
            ServiceBusReceivedMessage(Message.decode(payload), receiver=self, settled=True, is_peeked_message=True)
            for payload in found
        ]
        if messages:
            self._last_peeked = messages[-1].sequence_number
        return messages

    async def receive_deferred_messages(
        self, sequence_numbers: int | Iterable[int], *, timeout: float | None = None, **kwargs: Any
    ) -> list[ServiceBusReceivedMessage]:
        """The deferred messages with these sequence numbers (locked, in PEEK_LOCK mode)."""
        self._check_not_closed()
        if timeout is not None and timeout <= 0:
            raise ValueError("The timeout must be greater than 0.")
        numbers = [sequence_numbers] if isinstance(sequence_numbers, int) else [int(n) for n in sequence_numbers]
        if not numbers:
            return []
        peek_lock = self._receive_mode is ServiceBusReceiveMode.PEEK_LOCK
        mode = RECEIVER_SETTLE_SECOND if peek_lock else RECEIVER_SETTLE_FIRST
        session_id = await self._session_id_for_management()
        found = await self._mgmt_call(
            lambda m: m.receive_by_sequence_number(numbers, receiver_settle_mode=mode, session_id=session_id), timeout
        )
        out = []
        for token, payload in found:
            message = ServiceBusReceivedMessage(
                Message.decode(payload),
                receiver=self,
                settled=not peek_lock,
                lock_token=token if isinstance(token, uuid.UUID) else None,
                is_deferred_message=True,
            )
            if self._auto_lock_renewer is not None and peek_lock and not self._is_session:
                self._auto_lock_renewer.register(self, message)
            out.append(message)
        return out

    async def _session_id_for_management(self) -> str | None:
        if not self._is_session:
            return None
        await self._retry(lambda _remaining: _noop())
        session = self.session
        assert session is not None  # a session receiver
        return session.session_id

    # -- settlement -------------------------------------------------------------------
    def _check_message_alive(self, message: ServiceBusReceivedMessage, action: str) -> None:
        if not isinstance(message, ServiceBusReceivedMessage):
            raise TypeError(f"{action} needs a ServiceBusReceivedMessage, not {type(message).__name__}")
        if message._is_peeked_message:
            raise ValueError(
                f"The operation {action} is not supported for peeked messages."
                "Only messages received using receive methods in PEEK_LOCK mode can be settled."
            )
        if self._receive_mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            raise ValueError(f"The operation {action} is not supported in 'RECEIVE_AND_DELETE' receive mode.")
        if message._settled:
            raise MessageAlreadySettled(f"Unable to {action} the message as it has already been settled.")
        if self._closed:
            raise ValueError(
                f"Failed to {action} the message as the handler has already been shutdown."
                "Please use ServiceBusClient to create a new instance."
            )

    def _lock_lost(self, message: ServiceBusReceivedMessage, action: str) -> ServiceBusError | None:
        """A lost lock known without asking the broker: the message's link is gone (for a
        session receiver, the session's lock went with it)."""
        raw = message._delivery
        gone = message._lock_lost
        if not gone and raw is not None and not message._is_deferred_message:
            delivery = raw._delivery
            link = self._link
            gone = link is None or link.closed or delivery is None or delivery.link is not link.link
        if not gone:
            return None
        message._lock_lost = True
        cls = SessionLockLostError if self._is_session else MessageLockLostError
        return cls(
            description=f"cannot {action}: the link that delivered the message is gone, so its lock is lost"
            " and Service Bus will deliver it again",
            entity=self.entity_name,
        )

    def _settle(
        self,
        message: ServiceBusReceivedMessage,
        action: str,
        status: DispositionStatus,
        *,
        dead_letter_reason: str | None = None,
        dead_letter_error_description: str | None = None,
        transaction: ServiceBusTransaction | None = None,
    ) -> Coroutine[Any, Any, None]:
        """What a settle method returns: on the link's loop, for a message its link delivered,
        the :class:`LinkSettlement` started at once (gathered, it costs no asyncio Task);
        otherwise (another thread, as the blocking facade calls; a deferred message, settled
        over ``$management``) the coroutine that settles it once awaited, on the loop. In a
        ``transaction``: its coroutine (docs/transactions.md)."""
        if transaction is not None:
            return transaction._settle(self, message, action, status, dead_letter_reason, dead_letter_error_description)
        link = self._link
        if (
            link is not None
            and asyncio._get_running_loop() is link._loop
            and isinstance(message, ServiceBusReceivedMessage)
            and message._delivery is not None
            and not message._is_deferred_message
            and not _answered_on_link(message)
        ):
            return self._start_settlement(
                link._loop, message, action, status, dead_letter_reason, dead_letter_error_description
            )
        return self._settle_when_awaited(message, action, status, dead_letter_reason, dead_letter_error_description)

    async def _settle_when_awaited(
        self,
        message: ServiceBusReceivedMessage,
        action: str,
        status: DispositionStatus,
        reason: str | None,
        description: str | None,
    ) -> None:
        self._check_message_alive(message, action)
        lost = self._lock_lost(message, action)
        if lost is not None:
            raise lost
        if message._delivery is None or message._is_deferred_message or _answered_on_link(message):
            await self._settle_by_management(message, status, reason, description)
            self._mark_settled(message)
        else:
            await self._start_settlement(asyncio.get_running_loop(), message, action, status, reason, description)

    def _start_settlement(
        self,
        loop: asyncio.AbstractEventLoop,
        message: ServiceBusReceivedMessage,
        action: str,
        status: DispositionStatus,
        reason: str | None,
        description: str | None,
    ) -> LinkSettlement:
        """Send the message's disposition on the link; its settlement, which raises what
        refuses it where it is awaited."""
        settlement = LinkSettlement(loop, self, message, action, status)
        try:
            self._check_message_alive(message, action)
            lost = self._lock_lost(message, action)
            if lost is not None:
                raise lost
            raw = message._delivery
            assert raw is not None and raw._delivery is not None
            if _settlement_under_way(message):
                raise MessageAlreadySettled(
                    f"Unable to {action} the message as a settlement of it is already waiting for the broker."
                )
            try:
                waits = self._start_settle_on_link(raw, status, reason, description, settlement)
            except (AMQPError, OSError) as exc:
                raise self._link_error(exc) from exc
        except Exception as error:
            settlement.set_exception(error)
            return settlement
        if not waits:
            settlement.confirmed()  # settled at once: no confirmation will come
        return settlement

    def _link_error(self, exc: AMQPError | OSError) -> ServiceBusError | MessageAlreadySettled:
        """The Service Bus error for a failure of the link (``__cause__``: the failure)."""
        error = from_amqp_error(exc, entity=self.entity_name)
        error.__cause__ = exc
        return error

    def _mark_settled(self, message: ServiceBusReceivedMessage) -> None:
        message._settled = True
        if self._auto_lock_renewer is not None:
            self._auto_lock_renewer._settled(message)

    def _start_settle_on_link(
        self,
        raw: ReceivedMessage,
        status: DispositionStatus,
        reason: str | None,
        description: str | None,
        waiter: LinkSettlement,
    ) -> bool:
        """Send the disposition (docs/protocol.md#settlement-mapping: complete = accepted, abandon = modified,
        defer = modified undeliverable-here, dead-letter = rejected); False if no
        confirmation will come (else ``waiter`` is told of it)."""
        link = self._link
        assert link is not None
        state, verb = link_outcome(status, reason, description)
        return link._start_settle_one(raw, state, verb, waiter)

    def _check_answer(self, raw: ReceivedMessage | None, action: str, status: DispositionStatus) -> None:
        """The broker confirmed the settlement; a rejected outcome is its refusal (e.g. lock lost)."""
        delivery = None if raw is None else raw._delivery
        answer = None if delivery is None else delivery.remote_state
        if type(answer) is Rejected and answer.error is not None:
            condition = str(answer.error.condition)
            if condition != DEAD_LETTER_CONDITION or status is not DispositionStatus.SUSPENDED:
                raise from_amqp_error(
                    AMQPError(
                        f"{self.entity_name}: cannot {action}: {answer.error.description or condition}",
                        condition=condition,
                        description=answer.error.description,
                    ),
                    entity=self.entity_name,
                )

    async def _settle_by_management(
        self,
        message: ServiceBusReceivedMessage,
        status: DispositionStatus,
        reason: str | None,
        description: str | None,
    ) -> None:
        token = message.lock_token
        if token is None:
            raise ValueError("the message carries no lock token: it cannot be settled")
        session_id = self._session.session_id if self._session is not None else None
        await self._mgmt_call(
            lambda m: m.update_disposition(
                status,
                [token],
                dead_letter_reason=reason,
                dead_letter_description=description,
                session_id=session_id,
            )
        )

    # The settle methods are ``async def`` in the SDK: each returns what ``_settle`` does,
    # a coroutine or an object that is one (see LinkSettlement for when the disposition leaves).
    # ``transaction``: the settlement takes effect only if it commits (docs/transactions.md).
    def complete_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> Coroutine[Any, Any, None]:
        """Done with the message: the broker removes it."""
        return self._settle(message, "complete", DispositionStatus.COMPLETED, transaction=transaction)

    async def complete_messages(self, messages: Sequence[ServiceBusReceivedMessage]) -> list[Exception | None]:
        """Complete ``messages`` together (an amqplink extension for consumers that settle in
        bulk, such as the Spark source): on the link their dispositions leave in one loop turn,
        one frame per run of consecutive delivery-ids ("the disposition applies to all
        deliveries from first to last", 2.7.6), and the broker's confirmations are awaited
        together. Returns each message's outcome in order: None once the broker confirmed it,
        else the error :meth:`complete_message` raises for it (nothing is raised for one
        message's refusal). A message the link cannot settle (deferred, or refused on the link
        before) is completed as :meth:`complete_message` completes it."""
        outcomes: list[Exception | None] = [None] * len(messages)
        link = self._link
        together: list[int] = []
        alone: list[int] = []
        seen: set[int] = set()
        on_loop = link is not None and asyncio._get_running_loop() is link._loop
        for i, message in enumerate(messages):
            if (
                not on_loop
                or not isinstance(message, ServiceBusReceivedMessage)
                or message._delivery is None
                or message._is_deferred_message
                or _answered_on_link(message)
            ):
                alone.append(i)
                continue
            try:
                self._check_message_alive(message, "complete")
                lost = self._lock_lost(message, "complete")
                if lost is not None:
                    raise lost
                if id(message) in seen or _settlement_under_way(message):
                    raise MessageAlreadySettled(
                        "Unable to complete the message as a settlement of it is already waiting for the broker."
                    )
            except Exception as error:
                outcomes[i] = error
                continue
            seen.add(id(message))
            together.append(i)
        if together:
            assert link is not None
            settled = await self._complete_on_link(link, [messages[i] for i in together])
            for i, outcome in zip(together, settled, strict=True):
                outcomes[i] = outcome
        for i in alone:
            try:
                await self.complete_message(messages[i])
            except Exception as error:
                outcomes[i] = error
        return outcomes

    async def _complete_on_link(
        self, link: Receiver, messages: list[ServiceBusReceivedMessage]
    ) -> list[Exception | None]:
        """:meth:`complete_messages`' settlement of ``messages`` (checked: each is this
        link's, alive and not being settled) on ``link``: their outcomes."""
        outcomes: list[Exception | None] = []
        raws = [m._delivery for m in messages if m._delivery is not None]  # (each has one)
        state, verb = link_outcome(DispositionStatus.COMPLETED, None, None)
        failure: ServiceBusError | MessageAlreadySettled | None = None
        try:
            waits = link.start_settle(raws, state, verb)
            if waits is not None:
                await waits
        except (AMQPError, OSError) as exc:
            failure = self._link_error(exc)
        for message, raw in zip(messages, raws, strict=True):
            delivery = raw._delivery
            if failure is not None and (delivery is None or not delivery.remote_settled):
                outcomes.append(failure)  # not confirmed before the link failed: its lock is lost with it
                continue
            try:
                self._check_answer(raw, "complete", DispositionStatus.COMPLETED)
            except ServiceBusError as error:
                outcomes.append(error)
                continue
            self._mark_settled(message)
            outcomes.append(None)
        return outcomes

    def abandon_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> Coroutine[Any, Any, None]:
        """Give the message back: it is delivered again (delivery count + 1)."""
        return self._settle(message, "abandon", DispositionStatus.ABANDONED, transaction=transaction)

    def defer_message(
        self, message: ServiceBusReceivedMessage, *, transaction: ServiceBusTransaction | None = None
    ) -> Coroutine[Any, Any, None]:
        """Set the message aside: only ``receive_deferred_messages`` with its sequence number gets it."""
        return self._settle(message, "defer", DispositionStatus.DEFERRED, transaction=transaction)

    def dead_letter_message(
        self,
        message: ServiceBusReceivedMessage,
        reason: str | None = None,
        error_description: str | None = None,
        *,
        transaction: ServiceBusTransaction | None = None,
    ) -> Coroutine[Any, Any, None]:
        """Move the message to the dead-letter queue with ``reason`` and ``error_description``."""
        return self._settle(
            message,
            "dead-letter",
            DispositionStatus.SUSPENDED,
            dead_letter_reason=reason,
            dead_letter_error_description=error_description,
            transaction=transaction,
        )

    async def renew_message_lock(
        self, message: ServiceBusReceivedMessage, *, timeout: float | None = None, **kwargs: Any
    ) -> dt.datetime:
        """Extend the message's lock; the new ``locked_until_utc``."""
        if self._is_session:
            raise TypeError(
                "Renewing message lock is an invalid operation when working with sessions."
                " Please renew the session lock instead."
            )
        self._check_message_alive(message, "renew lock for")
        if timeout is not None and timeout <= 0:
            raise ValueError("The timeout must be greater than 0.")
        lost = self._lock_lost(message, "renew the lock of")
        if lost is not None:
            raise lost
        token = message.lock_token
        if token is None:
            raise ValueError("Unable to renew lock - no lock token found.")
        try:
            expirations = await self._mgmt_call(lambda m: m.renew_lock([token]), timeout)
        except MessageLockLostError:
            message._lock_lost = True
            raise
        if not expirations:
            raise ServiceBusError(description="renew-lock answered without an expiration", entity=self.entity_name)
        message._expiry = expirations[0]
        return expirations[0]

    async def renew_message_locks(
        self, messages: Iterable[ServiceBusReceivedMessage], *, timeout: float | None = None
    ) -> list[dt.datetime]:
        """Beyond the SDK: extend the locks of many messages in one ``com.microsoft:renew-lock``
        request (its ``lock-tokens`` is an array); their new ``locked_until_utc``, in order.

        A lock known to be lost (the link that delivered it is gone) raises
        :class:`MessageLockLostError` before anything is asked, as the broker's answer for
        any lost lock in the request does (then none of them is renewed: renew them one by
        one, :meth:`renew_message_lock`, to find which)."""
        if self._is_session:
            raise TypeError("Renewing message locks is an invalid operation when working with sessions.")
        chosen = list(messages)
        tokens = []
        for message in chosen:
            self._check_message_alive(message, "renew lock for")
            lost = self._lock_lost(message, "renew the lock of")
            if lost is not None:
                raise lost
            if message.lock_token is None:
                raise ValueError("Unable to renew lock - no lock token found.")
            tokens.append(message.lock_token)
        if not tokens:
            return []
        expirations = await self._mgmt_call(lambda m: m.renew_lock(tokens), timeout)
        if len(expirations) != len(chosen):
            raise ServiceBusError(
                description=f"renew-lock answered {len(expirations)} expirations for {len(chosen)} lock tokens",
                entity=self.entity_name,
            )
        for message, expiry in zip(chosen, expirations, strict=True):
            message._expiry = expiry
        return expirations


async def _noop() -> None:
    return None


async def _release_buffered(link: Receiver, timeout: float) -> None:
    """Before the link closes, drain its credit (no new credit given) and release what arrived
    and was never handed out: the broker holds an unsettled lock until it expires once the
    link is gone (as Service Bus does), and a release is not a delivery attempt. The SDK does
    the same on close ("so they are not left locked at the broker until lock expiry")."""
    if link.closed or (not link.buffered and not link.link.link_credit):
        return
    link.prefetch = 0  # taking the buffer below must not grant credit again
    try:
        await link.drain(timeout)
        if link.buffered and not link.closed:
            await link.release(*await link.receive(link.buffered, timeout=0))
    except (AMQPError, OSError) as exc:
        log.debug("releasing buffered messages before closing: %s", exc)


def _settlement_under_way(message: ServiceBusReceivedMessage) -> bool:
    """Whether a settlement of ``message`` on its link waits for the broker's confirmation (a
    message is settled once: a second call sends nothing)."""
    raw = message._delivery
    under_way = None if raw is None or raw._delivery is None else raw._delivery.context
    return type(under_way) is LinkSettlement and not under_way.done()


def _answered_on_link(message: ServiceBusReceivedMessage) -> bool:
    """Whether the broker already settled the message's delivery without it being settled: it
    refused a settlement (a rejected outcome with an error, e.g. its store could not write),
    so the link can carry no other outcome for it, and a retry goes over ``$management`` by
    the lock token, as the SDK settles a message its link cannot (it works while the lock is
    held, and is lock-lost once it is gone)."""
    raw = message._delivery
    delivery = None if raw is None else raw._delivery
    return delivery is not None and delivery.settled and not message._settled
