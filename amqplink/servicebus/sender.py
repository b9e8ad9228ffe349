"""The asyncio Service Bus sender (azure-servicebus's ``aio.ServiceBusSender``), pipelined.

``send_messages`` takes one message, a list, a :class:`ServiceBusMessageBatch`, any
iterable or (beyond the SDK) an async iterable. A list that fits the link's
max-message-size goes as one batch transfer (as the SDK sends it); a larger list or an
iterable is split into batches by that size and the batches are pipelined (up to
``max_in_flight`` transfers unsettled at once). Single messages sent by concurrent tasks
while earlier ones await their outcome are gathered into batch transfers (each task still
awaits only its own message's outcome). Beyond the SDK:
:meth:`ServiceBusSender.send_nowait` hands one message over and returns a future for its
outcome. A send whose link or connection breaks is sent again on a new
one under the retry policy (at least once: never dropped silently).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.aio.sender import Sender
from amqplink.codec.errors import EncodeError
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Rejected
from amqplink.sbwire.nodes import TRANSFER_DESTINATION_ADDRESS
from amqplink.servicebus._base import ConnectionHolder, Handler
from amqplink.servicebus.amqp import AmqpAnnotatedMessage
from amqplink.servicebus.client_options import client_identifier as identifier
from amqplink.servicebus.errors import from_amqp_error
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError
from amqplink.servicebus.management_node import ScheduledMessage
from amqplink.servicebus.message import (
    BATCH_MESSAGE_FORMAT,
    MAX_MESSAGE_LENGTH_BYTES,
    SINGLE_MESSAGE_TYPES,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    TransferBatcher,
    iter_outgoing,
    to_outgoing,
)
from amqplink.servicebus.partitioning import check_partition_key
from amqplink.servicebus.retry import RetryHooks, RetryPolicy, run_with_retry

if TYPE_CHECKING:
    from amqplink.servicebus.transaction import ServiceBusTransaction

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "GATHER_MAX_MESSAGES", "ServiceBusSender"]

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT = 1000
"""Transfers awaiting their outcome at once per sender; the next send waits for room."""
GATHER_MAX_MESSAGES = 1000
"""At most this many gathered single sends go in one batch transfer (Service Bus bounds the
messages of a batch; its size is bounded by the link's max-message-size)."""
WATCH_INTERVAL_MIN, WATCH_INTERVAL_MAX = 0.05, 5.0
"""Bounds (seconds) of the outcome watchdog's period: a quarter of the operation timeout."""

SendError = ServiceBusError | MessageAlreadySettled
SendInput = (
    ServiceBusMessage
    | AmqpAnnotatedMessage
    | ServiceBusMessageBatch
    | Mapping[str, Any]
    | Message
    | Iterable[Any]
    | AsyncIterable[Any]
)


class SendFailureHooks(Protocol):
    """What a sender of a paired client does when a send fails (:mod:`.paired.sender`):
    park the message in a backlog queue, or raise; and what it learns from each attempt
    that the retry policy makes after a failure (its failover timer starts at the first)."""

    def attempt_failed(self, error: SendError) -> None: ...

    def retried_send_succeeded(self) -> None: ...

    async def send_failed(self, message: SendInput, error: ServiceBusError, timeout: float | None) -> None: ...

    async def nowait_refused(self, message: ServiceBusMessage, error: SendError) -> asyncio.Future[None]: ...

    def nowait_failed(self, result: asyncio.Future[None], error: BaseException, message: ServiceBusMessage) -> None: ...


class _SendRetry(RetryHooks):
    """A send's retry hooks: a paired sender's :class:`SendFailureHooks` and the sender's
    :attr:`~ServiceBusSender.attempt_watcher` hear of each failed attempt, the former of
    the success that ends them too."""

    __slots__ = ("paired", "watcher")

    def __init__(self, paired: SendFailureHooks | None, watcher: Callable[[SendError], None] | None) -> None:
        self.paired, self.watcher = paired, watcher

    def attempt_failed(self, error: SendError) -> None:
        if self.paired is not None:
            self.paired.attempt_failed(error)
        if self.watcher is not None:
            self.watcher(error)

    def recovered(self) -> None:
        if self.paired is not None:
            self.paired.retried_send_succeeded()


class ServiceBusSender(Handler):
    """Sends to a queue or topic. Get one from ``ServiceBusClient.get_queue_sender`` /
    ``get_topic_sender``; use it as ``async with``."""

    _kind = "sender"
    _paired: SendFailureHooks | None = None
    """Set on the senders of a paired client; consulted only once a send has failed (the
    healthy path is the plain sender's)."""
    attempt_watcher: Callable[[SendError], None] | None = None
    """Told of the error of each failed attempt of a send, while the retry policy may still
    try again (an active replication sender's circuit breaker opens at the first)."""

    def __init__(
        self,
        holder: ConnectionHolder | str,
        entity_name: Any = None,
        *,
        policy: RetryPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        queue_name: str | None = None,
        topic_name: str | None = None,
        client_identifier: str | None = None,
        socket_timeout: float | None = None,
        via: str | None = None,
        **options: Any,
    ) -> None:
        """From a client (``get_queue_sender``), or as the SDK's ``ServiceBusSender(
        fully_qualified_namespace, credential, queue_name=... | topic_name=..., **client_options)``,
        which opens a connection of its own (closed with the sender). ``via``: send to the
        entity *through* this one (send-via, docs/transactions.md): a transaction that works on
        ``via`` may then send elsewhere."""
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if not isinstance(holder, ConnectionHolder):  # the SDK's direct construction
            credential = entity_name if entity_name is not None else options.pop("credential", None)
            entity_name = options.pop("_entity_path", None)  # from_connection_string's entity
            if entity_name is None:
                if (queue_name is None) == (topic_name is None):
                    raise ValueError("Exactly one of queue_name or topic_name must be specified.")
                entity_name = queue_name or topic_name
            client_identifier = identifier(self._kind, client_identifier)  # also the connection's container-id
            holder, policy = self._standalone(holder, credential, {**options, "container_id": client_identifier})
        assert policy is not None, "a sender from a ConnectionHolder needs its policy"
        super().__init__(
            holder, entity_name, policy=policy, client_identifier=client_identifier, socket_timeout=socket_timeout
        )
        self.max_in_flight = max_in_flight
        self.via = via
        """The entity its messages go through (send-via), or None."""
        self.queue_name = queue_name
        self.topic_name = topic_name
        self._link: Sender | None = None
        self._watched: deque[tuple[float, asyncio.Future[Any]]] = deque()
        self._watchdog: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self._gathering: list[tuple[ServiceBusMessage, asyncio.Future[Any]]] | None = None
        self._flushing: set[asyncio.Task[None]] = set()  # gathered batches waiting to leave

    # -- links ------------------------------------------------------------------------
    def _links_alive(self) -> bool:
        return self._link is not None and not self._link.closed

    async def _attach(self, connection: Connection) -> None:
        via = self.via
        if via is None:
            self._link = await connection.create_sender(
                self.entity_name, max_in_flight=self.max_in_flight, name=self._next_link_name()
            )
        else:  # target: the via entity; the destination in the attach (docs/protocol.md#transactions)
            await self._holder.authorize(via)  # both audiences, as the .NET via-sender asks
            self._link = await connection.create_sender(
                via,
                max_in_flight=self.max_in_flight,
                name=self._next_link_name(),
                properties={TRANSFER_DESTINATION_ADDRESS: self.entity_name},
            )
        self._link.write_timeout = self._socket_timeout

    async def _close_links(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        self._watched.clear()
        if self._link is not None:
            await self._link.close()

    @property
    def max_message_size(self) -> int:
        """The largest transfer the entity takes (the peer's max-message-size), once attached."""
        link = self._link
        remote = None if link is None else link.link.remote_attach
        size = None if remote is None else remote.max_message_size
        return int(size) if size else MAX_MESSAGE_LENGTH_BYTES

    # -- sending ----------------------------------------------------------------------
    async def _transfer(self, payload: bytes, message_format: int) -> asyncio.Future[Any]:
        await self._open()
        assert self._link is not None
        return self._watch(await self._link.send_payload_nowait(payload, message_format=message_format))

    # -- outcome watchdog ---------------------------------------------------------------
    def _watch(self, outcome: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """Note when ``outcome`` was sent; one timer per sender (not per send) checks the oldest."""
        loop = asyncio.get_running_loop()
        self._watched.append((loop.time(), outcome))
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._watch_interval(), self._check_outcomes)
        return outcome

    def _watch_interval(self) -> float:
        return min(WATCH_INTERVAL_MAX, max(WATCH_INTERVAL_MIN, self._policy.timeout / 4))

    def _check_outcomes(self) -> None:
        """A link whose oldest transfer has had no outcome for the operation timeout is taken
        as dead: it is closed, which fails every transfer on it, and the sends are retried on
        a new link under the retry policy (at least once)."""
        self._watchdog = None
        watched = self._watched
        while watched and watched[0][1].done():
            watched.popleft()
        if not watched:
            return
        loop = asyncio.get_running_loop()
        if loop.time() - watched[0][0] >= self._policy.timeout:
            timeout = self._policy.timeout
            failure = AMQPError(
                f"{self.entity_name}: no outcome from the broker within {timeout:.1f} s",
                condition="com.microsoft:timeout",
            )
            for _, outcome in watched:
                if not outcome.done():
                    outcome.set_exception(failure)  # the link is dropped below, its count with it
            watched.clear()
            link, self._link = self._link, None  # the next send attaches a new link
            if link is not None and not link.closed:
                log.warning("%s; closing the link to send again on a new one", failure)
                self._closing = loop.create_task(link.close())
            return
        self._watchdog = loop.call_later(self._watch_interval(), self._check_outcomes)

    async def _send_payload(self, payload: bytes, message_format: int, timeout: float | None) -> None:
        """One transfer, retried on a new link when a retryable error ends it.

        Fast path: on a live link, the first attempt is a plain pipelined transfer (no task,
        no timer: the sender's outcome watchdog bounds the wait by the operation timeout);
        the retry machinery starts only after a retryable failure, or when the caller gave a
        ``timeout``.
        """
        link = self._link
        if timeout is None and link is not None and self._ready():
            try:
                sent = self._watch(await link.send_payload_nowait(payload, message_format=message_format))
                _check_outcome(await sent, self.entity_name)
                return
            except (AMQPError, OSError, TimeoutError, ServiceBusError) as exc:
                failed: BaseException | None = exc
        else:
            failed = None
        await self._send_again(payload, message_format, timeout, failed)

    # -- single sends from concurrent tasks, gathered into batches ------------------------
    def _gather(self, message: ServiceBusMessage) -> asyncio.Future[Any]:
        """Queue one message while others are unacknowledged; the future gets its outcome.

        The single sends that reach the sender in one loop iteration (concurrent tasks) leave
        as batch transfers (as a list would: one outcome for the batch is each message's
        outcome): the first schedules :meth:`_flush_gathered` behind the tasks already ready,
        which add theirs. A send on an idle link leaves at once, so a lone sender never waits.
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[Any] = loop.create_future()
        gathering = self._gathering
        if gathering is None:
            gathering = self._gathering = []
            loop.call_soon(self._flush_gathered)
        gathering.append((message, outcome))
        return outcome

    def _flush_gathered(self) -> None:
        """Send the gathered messages in batches bounded by the link's max-message-size and
        :data:`GATHER_MAX_MESSAGES`; each message's future gets its batch's outcome (or the
        error that kept it from leaving). Batches the link takes at once leave from this
        callback; the rest (waiting for room, or for a new link) from a task."""
        gathering, self._gathering = self._gathering, None
        if not gathering:
            return
        transfers = self._gathered_transfers(gathering)
        link = self._link
        if link is not None and self._ready():
            while transfers:
                payload, message_format, members = transfers[0]
                try:
                    sent = link.try_send_payload(payload, message_format=message_format)
                except (AMQPError, OSError) as exc:
                    _fail(members, exc)
                    transfers.popleft()
                    continue
                if sent is None:
                    break
                transfers.popleft()
                sent.add_done_callback(_share(members))
                self._watch(sent)
        if transfers:  # a reference held until it ends (the loop keeps only weak ones)
            task = asyncio.get_running_loop().create_task(self._transfer_all(transfers))
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)

    async def _transfer_all(self, transfers: deque[tuple[bytes, int, list[asyncio.Future[Any]]]]) -> None:
        """Send ``transfers`` in order, waiting for room; if this ends early, the messages not
        sent get the error (or are cancelled), so that no sender waits forever."""
        try:
            while transfers:
                payload, message_format, members = transfers[0]
                try:
                    sent = await self._transfer(payload, message_format)
                except (AMQPError, OSError, TimeoutError, ServiceBusError) as exc:
                    _fail(members, exc)
                else:
                    sent.add_done_callback(_share(members))
                transfers.popleft()
        except BaseException as exc:
            for _, _, members in transfers:
                if isinstance(exc, asyncio.CancelledError):
                    for outcome in members:
                        outcome.cancel()
                else:
                    _fail(members, exc)
            raise

    def _gathered_transfers(
        self, gathering: list[tuple[ServiceBusMessage, asyncio.Future[Any]]]
    ) -> deque[tuple[bytes, int, list[asyncio.Future[Any]]]]:
        """The payloads of the gathered messages and the futures each one answers. A message
        that cannot be encoded fails alone with the ``EncodeError`` (as its own send would)."""
        transfers: deque[tuple[bytes, int, list[asyncio.Future[Any]]]] = deque()
        if len(gathering) == 1:  # a plain transfer, as sent alone
            message, outcome = gathering[0]
            try:
                transfers.append((message._message.encode(), 0, [outcome]))
            except EncodeError as exc:
                outcome.set_exception(exc)
            return transfers
        limit = self.max_message_size
        batch = ServiceBusMessageBatch(limit)
        members: list[asyncio.Future[Any]] = []
        for message, outcome in gathering:
            try:
                if len(members) >= GATHER_MAX_MESSAGES or not batch._add(message):
                    if members:
                        transfers.append((batch._payload(), BATCH_MESSAGE_FORMAT, members))
                        batch, members = ServiceBusMessageBatch(limit), []
                    if not batch._add(message):  # too large for any batch: alone, as a plain send
                        transfers.append((message._message.encode(), 0, [outcome]))
                        continue
            except EncodeError as exc:
                outcome.set_exception(exc)
                continue
            members.append(outcome)
        if members:
            transfers.append((batch._payload(), BATCH_MESSAGE_FORMAT, members))
        return transfers

    # -- the one way back in after a failure ---------------------------------------------
    async def _send_again(
        self, payload: bytes, message_format: int, timeout: float | None, failed: BaseException | None = None
    ) -> None:
        """One transfer under the retry policy (:func:`~amqplink.servicebus.retry.run_with_retry`,
        the one retry loop), each attempt on a live link (a new one after a loss): every route
        comes back in here after a failure. ``failed``: why a first, pipelined attempt failed
        (a fast path's, a gathered batch's, a list's batch); it counts against ``retry_total``,
        and is raised at once if it cannot be retried (the hooks not told). Server-busy waits
        at least 4 s."""
        entity = self.entity_name
        error = None
        if failed is not None:
            error = from_amqp_error(failed, entity=entity)
            if not error.retryable or self._policy.retry_total == 0:
                raise error from failed

        async def attempt(_remaining: float) -> None:
            # shielded: the retry's deadline cancels this wait, never the link's outcome future;
            # an outcome that comes after the wait was given up is read (else asyncio reports an
            # exception never retrieved when it is collected)
            outcome = await self._transfer(payload, message_format)
            outcome.add_done_callback(_read_outcome)
            _check_outcome(await asyncio.shield(outcome), entity)

        await self._under_policy(attempt, timeout, error)

    async def _under_policy(
        self, operation: Callable[[float], Awaitable[None]], timeout: float | None, failed: SendError | None = None
    ) -> None:
        """``operation`` in the retry loop with the sender's hooks (:class:`_SendRetry`);
        ``timeout`` replaces the policy's overall one."""
        policy = self._policy
        if timeout is not None and timeout != policy.timeout:
            policy = dataclasses.replace(policy, timeout=timeout)
        hooks = _SendRetry(self._paired, self.attempt_watcher)
        await run_with_retry(operation, policy, entity=self.entity_name, hooks=hooks, failed=failed)

    async def send_nowait(self, message: ServiceBusMessage | Mapping[str, Any] | Message) -> asyncio.Future[None]:
        """Hand one message to the link (waiting only for room under ``max_in_flight``) and
        return a future that resolves to None when the broker accepted it, or fails with the
        Service Bus error. Not retried: retry on the error if you need at-least-once."""
        outgoing = to_outgoing(message)
        check_partition_key(outgoing)
        self._check_not_closed()
        try:
            inner = await self._transfer(outgoing._message.encode(), 0)
        except (AMQPError, OSError, TimeoutError, ServiceBusError) as exc:
            error = from_amqp_error(exc, entity=self.entity_name)
            if self._paired is None:
                raise error from exc
            return await self._paired.nowait_refused(outgoing, error)
        result: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entity = self.entity_name

        def done(outcome: asyncio.Future[Any]) -> None:
            if result.done():
                return
            if outcome.cancelled():
                result.cancel()
                return
            failure = _outcome_error(outcome, entity)
            if failure is None:
                result.set_result(None)
            elif self._paired is None:  # handed to the caller's future (a paired sender may park it)
                result.set_exception(from_amqp_error(failure, entity=entity))
            else:
                self._paired.nowait_failed(result, from_amqp_error(failure, entity=entity), outgoing)

        inner.add_done_callback(done)
        return result

    def _send_soon(
        self, message: SendInput, notify: Callable[[BaseException | None], None]
    ) -> Coroutine[Any, Any, None] | None:
        """:meth:`send_messages` (no timeout) for a caller that waits elsewhere: the blocking
        facade calls this on the loop thread. One plain message on a live link with room is
        handed over at once, and ``notify`` told once it is accepted, or of the error that
        ends it: no coroutine, no Task (a first attempt that fails with a retryable error is
        retried under the policy, as :meth:`send_messages` retries it); None is returned.
        Anything else (a batch, a session message, a paired client's sender, a link to
        attach...) returns the :meth:`send_messages` coroutine to run instead."""
        link = self._link
        if (
            type(message) is not ServiceBusMessage
            or link is None
            or self._paired is not None
            or self._gathering is not None
            or self._closed
            or not self._ready()
        ):
            return self.send_messages(message)
        inner = message._message
        properties = inner.properties
        if (properties is not None and properties.group_id is not None) or inner.message_annotations is not None:
            return self.send_messages(message)  # its session id and partition key are checked there
        entity = self.entity_name

        def done(outcome: asyncio.Future[Any]) -> None:
            failure = _outcome_error(outcome, entity)
            if failure is None or not isinstance(failure, AMQPError | OSError | TimeoutError | ServiceBusError):
                notify(failure)
                return
            retry = asyncio.get_running_loop().create_task(self._send_again(payload, 0, None, failure))
            retry.add_done_callback(lambda task: notify(_outcome_error(task, entity)))

        try:
            payload = inner.encode()
            sent = link.try_send_payload(payload, outcome=_Reporting(link._loop, done))
        except (AMQPError, OSError, EncodeError):
            sent = None
        if sent is None:  # no room yet, or refused: the coroutine waits, or raises the error
            return self.send_messages(message)
        self._watch(sent)
        return None

    async def send_messages(
        self, message: SendInput, *, timeout: float | None = None, transaction: ServiceBusTransaction | None = None
    ) -> None:
        """Send one message, a list, a batch, an iterable or an async iterable (pipelined in
        size-bounded batches).

        Raises ``MessageSizeExceededError`` for a single message larger than the entity takes,
        ``ValueError`` for a partition key that differs from the session id, and the Service
        Bus error the broker answered (after the retry policy gave up). ``transaction``: the
        messages are stored only if it commits (docs/transactions.md; a message or batch one
        transfer, a list in batches, not retried).
        """
        if self._closed:
            self._check_not_closed()
        if transaction is not None:
            await transaction._send(self, message, timeout)
            return
        if timeout is not None and timeout <= 0:
            raise ValueError("The timeout must be greater than 0.")
        try:
            if type(message) is ServiceBusMessage:  # the common case first
                inner = message._message
                properties = inner.properties
                session = properties is not None and properties.group_id is not None
                if session:
                    check_partition_key(message)
                link = self._link
                if (
                    timeout is None
                    and link is not None
                    and not session
                    and inner.message_annotations is None  # no partition key, schedule
                    # joining a gathering: its flush checks the link once for all of them
                    and (self._gathering is not None or (link.in_flight and self._ready()))
                ):
                    try:
                        _check_outcome(await self._gather(message), self.entity_name)
                    except (AMQPError, OSError, TimeoutError, ServiceBusError) as exc:
                        await self._send_again(inner.encode(), 0, None, exc)
                    return
                await self._send_payload(inner.encode(), 0, timeout)
                return
            if isinstance(message, ServiceBusMessageBatch):
                if len(message) == 0:
                    return
                await self._send_payload(message._payload(), BATCH_MESSAGE_FORMAT, timeout)
                return
            if isinstance(message, SINGLE_MESSAGE_TYPES):  # one message (AmqpAnnotatedMessage too)
                outgoing = to_outgoing(message)
                check_partition_key(outgoing)
                await self._send_payload(outgoing._message.encode(), 0, timeout)
                return
            if self._paired is not None:
                message = await _materialize(message)  # what failed can then be parked
            await self._send_many(message, timeout)
        except ServiceBusError as exc:
            if self._paired is None:
                raise
            await self._paired.send_failed(message, exc, timeout)

    async def _send_many(self, messages: Iterable[Any] | AsyncIterable[Any], timeout: float | None) -> None:
        """Batch the messages up to the link's size (:class:`TransferBatcher`) and pipeline the
        batches; outcomes are collected as they come (memory stays bounded by
        ``max_in_flight`` batches), then the rest. A message no batch holds goes as a single
        send. A batch whose transfer failed comes back in through :meth:`_send_again`; the
        first error that ends one is raised once all outcomes are in."""
        await self._attached(timeout)  # learn the max size
        pending: deque[tuple[bytes, asyncio.Future[Any]]] = deque()
        failures: list[SendError] = []

        async def collect(payload: bytes, outcome: asyncio.Future[Any]) -> None:
            try:
                _check_outcome(await outcome, self.entity_name)
            except (AMQPError, OSError, TimeoutError, ServiceBusError) as exc:
                try:
                    await self._send_again(payload, BATCH_MESSAGE_FORMAT, timeout, exc)
                except ServiceBusError as again:
                    failures.append(again)

        async def leave(transfers: tuple[tuple[bytes, int], ...]) -> None:
            for payload, message_format in transfers:
                if not message_format:  # alone: the single send's route (the link checks its size)
                    await self._send_payload(payload, 0, timeout)
                    continue
                try:
                    outcome = await self._transfer(payload, message_format)
                except (AMQPError, OSError) as exc:
                    outcome = asyncio.get_running_loop().create_future()
                    outcome.set_exception(exc)
                pending.append((payload, outcome))
                while pending and pending[0][1].done():  # collect what came meanwhile
                    await collect(*pending.popleft())

        batcher = TransferBatcher(self.max_message_size)
        async for chunk in _in_chunks(messages):
            for message in iter_outgoing(chunk):
                transfers = batcher.add(message)
                if transfers:
                    await leave(transfers)
        await leave(batcher.rest())
        while pending:
            await collect(*pending.popleft())
        if failures:
            raise failures[0]

    async def _attached(self, timeout: float | None) -> None:
        """Attach the link under the retry policy, unless it is attached already (no Task then)."""
        if not self._ready():
            await self._under_policy(lambda _remaining: self._open(), timeout)

    async def create_message_batch(self, max_size_in_bytes: int | None = None) -> ServiceBusMessageBatch:
        """An empty batch bounded by ``max_size_in_bytes`` (default and maximum: the link's max-message-size)."""
        self._check_not_closed()
        await self._attached(None)
        limit = self.max_message_size
        if max_size_in_bytes and max_size_in_bytes > limit:
            raise ValueError(
                f"Max message size: {max_size_in_bytes} is too large, acceptable max batch size is: {limit} bytes."
            )
        return ServiceBusMessageBatch(max_size_in_bytes or limit)

    # -- scheduling -------------------------------------------------------------------
    async def schedule_messages(
        self,
        messages: ServiceBusMessage | Mapping[str, Any] | Iterable[Any],
        schedule_time_utc: dt.datetime,
        *,
        timeout: float | None = None,
    ) -> list[int]:
        """Have the broker enqueue ``messages`` at ``schedule_time_utc``; their sequence numbers
        (for :meth:`cancel_scheduled_messages`)."""
        self._check_not_closed()
        entries = []
        for message in iter_outgoing(messages):
            check_partition_key(message)
            message.scheduled_enqueue_time_utc = schedule_time_utc
            entries.append(
                ScheduledMessage(
                    message_id=str(message.message_id),
                    message=message._message.encode(),
                    session_id=message.session_id,
                    partition_key=message.partition_key,
                )
            )
        if not entries:
            return []
        return await self._mgmt_call(lambda mgmt: mgmt.schedule_messages(entries), timeout)

    async def cancel_scheduled_messages(
        self, sequence_numbers: int | Iterable[int], *, timeout: float | None = None
    ) -> None:
        """Cancel scheduled messages by their sequence numbers."""
        self._check_not_closed()
        numbers = [sequence_numbers] if isinstance(sequence_numbers, int) else [int(n) for n in sequence_numbers]
        if not numbers:
            return
        await self._mgmt_call(lambda mgmt: mgmt.cancel_scheduled_messages(numbers), timeout)


class _Reporting(asyncio.Future[Any]):
    """A transfer's outcome future that calls ``report`` with itself as it resolves: in the
    engine's dispatch of the broker's disposition, not one loop turn later as a
    done-callback would (what :meth:`ServiceBusSender._send_soon` waits with)."""

    __slots__ = ("_report",)

    def __init__(self, loop: asyncio.AbstractEventLoop, report: Callable[[asyncio.Future[Any]], None]) -> None:
        super().__init__(loop=loop)
        self._report = report

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._report(self)

    def set_exception(self, exception: type[BaseException] | BaseException) -> None:
        super().set_exception(exception)
        self._report(self)

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self._report(self)
        return True


def _fail(members: list[asyncio.Future[Any]], exc: BaseException) -> None:
    """Hand ``exc`` to every future of ``members`` still waiting."""
    for outcome in members:
        if not outcome.done():
            outcome.set_exception(exc)


def _read_outcome(outcome: asyncio.Future[Any]) -> None:
    """Mark an outcome's exception as retrieved (whoever still waits on it gets it too)."""
    if not outcome.cancelled():
        outcome.exception()


def _share(members: list[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback handing a batch transfer's outcome to each of its messages' futures."""

    def share(done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            for outcome in members:
                outcome.cancel()
            return
        failure = done.exception()
        if failure is not None:
            _fail(members, failure)
            return
        result = done.result()
        for outcome in members:
            if not outcome.done():
                outcome.set_result(result)

    return share


async def _materialize(messages: Iterable[Any] | AsyncIterable[Any]) -> list[Any]:
    """An iterable or async iterable read into a list."""
    if isinstance(messages, AsyncIterable):
        return [m async for m in messages]
    return list(messages)


async def _in_chunks(messages: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Iterable[Any]]:
    """An iterable as one chunk; an async iterable one message at a time."""
    if isinstance(messages, AsyncIterable):
        async for message in messages:
            yield (message,)
    else:
        yield messages


def _outcome_error(done: asyncio.Future[Any], entity: str) -> BaseException | None:
    """None if the finished transfer (or retry) ``done`` ended with its message accepted; else
    why not: its exception, cancellation, or the error its outcome means."""
    if done.cancelled():
        return asyncio.CancelledError()
    failure = done.exception()
    if failure is not None:
        return failure
    try:
        _check_outcome(done.result(), entity)
    except (AMQPError, ServiceBusError) as refused:
        return refused
    return None


def _check_outcome(outcome: Any, entity: str) -> None:
    """Accepted: done. Rejected: the error its condition names. Released/modified: retry."""
    if outcome is None or type(outcome) is Accepted:
        return
    if type(outcome) is Rejected:
        error = outcome.error
        if error is None or error.condition is None:
            raise ServiceBusError(description="the broker rejected the message", entity=entity, retryable=False)
        raise AMQPError(
            f"{entity}: the broker rejected the message",
            condition=str(error.condition),
            description=error.description,
            info=error.info,
        )
    raise ServiceBusError(
        description=f"the broker did not take the message ({type(outcome).__name__.lower()})",
        entity=entity,
        retryable=True,
    )
