"""One paired client's failover machinery: the entities' states, the backlog rotation,
parking, pings, and (optionally) the syphon.

Every sender the client makes for an entity shares that entity's :class:`EntityFailover`,
so that "all senders [...] learn of the failure" at once (seed 001). The backlog queues
are checked and created at start (:meth:`Pairing.start`); the secondary namespace's
AMQP connection is opened only when something is parked or the syphon runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import AMQPError
from amqplink.message import Message
from amqplink.sbwire.formats import PING_CONTENT_TYPE
from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.amqp import AmqpAnnotatedMessage
from amqplink.servicebus.exceptions import MessageSizeExceededError, ServiceBusConnectionError, ServiceBusError
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch, iter_outgoing
from amqplink.servicebus.paired.backlog import BacklogQueueError, BacklogRotation, ensure_backlog_queues_sync
from amqplink.servicebus.paired.failover import FAILED_OVER, SUSPECT, EntityFailover
from amqplink.servicebus.paired.options import PairedNamespaceOptions, backlog_queue_name, namespace_label
from amqplink.servicebus.paired.parking import park
from amqplink.servicebus.retry import RetryPolicy
from amqplink.servicebus.sender import ServiceBusSender, _materialize

if TYPE_CHECKING:
    from amqplink.servicebus.client import ServiceBusClient
    from amqplink.servicebus.paired.sender import PairedSender
    from amqplink.servicebus.paired.syphon import Syphon

__all__ = ["PING_CONTENT_TYPE", "REPEATABLE", "PairedState", "Pairing", "listed", "outgoing_list", "settle"]

log = logging.getLogger(__name__)

PING_TTL_SECONDS = 1


@dataclass(frozen=True)
class PairedState:
    """A snapshot of a paired client (``client.paired_state``)."""

    entities: Mapping[str, str]
    """Each entity a sender was made for -> ``healthy``, ``suspect`` or ``failed-over``."""
    failed_over: tuple[str, ...]
    backlog_queues: tuple[str, ...]
    """Every backlog queue of this client (``<primary>/x-servicebus-transfer/<i>``)."""
    in_rotation: tuple[str, ...]
    """The backlog queues not pulled from rotation."""
    current_backlog_queue: str | None
    parked: int
    """Messages sent to a backlog queue by this client."""
    syphoned: int
    """Parked messages this process's syphon forwarded to their destination."""
    pings_sent: int
    pings_accepted: int
    failovers: int
    failbacks: int
    syphon_running: bool
    backlog_checked: bool = False
    """True once the backlog queues were checked (and the missing ones created)."""
    backlog_error: str | None = None
    """Why the last check of the backlog queues failed (it is tried again every ping interval)."""
    last_error: str | None = None
    """The last error a send to a backlog queue met."""
    last_failover_at: float | None = None
    """Wall-clock time (``time.time()``) of the last failover engaged."""
    last_failback_at: float | None = None
    primary_label: str = ""
    """The primary's name in the backlog queues' paths (``contoso``, ``127-0-0-1-5672``)."""
    syphon_moved: Mapping[str, int] = field(default_factory=dict)
    """Messages this process's syphon moved, per backlog queue."""
    syphon_faulted: int = 0
    """Partner connections the syphon's close/fault coordination faulted."""
    syphon_oldest: Mapping[str, float] = field(default_factory=dict)
    """Per backlog queue, when the oldest message the syphon last received was parked (Unix s)."""


def outgoing_list(message: Any) -> list[ServiceBusMessage]:
    """The messages of what ``send_messages`` takes (a batch decoded back into its messages)."""
    if isinstance(message, ServiceBusMessageBatch):
        return [ServiceBusMessage._wrap(Message.decode(encoded)) for encoded in message.encoded_messages()]
    return list(iter_outgoing(message))


REPEATABLE = (ServiceBusMessage, AmqpAnnotatedMessage, ServiceBusMessageBatch, Mapping, Message, list, tuple)
"""What can be read again after a failed attempt (anything else, an iterable or an async
iterable, is read into a list first)."""


async def listed(message: Any) -> list[ServiceBusMessage]:
    """:func:`outgoing_list` of what ``send_messages`` takes, an iterable or async iterable read first."""
    if not isinstance(message, REPEATABLE):
        message = await _materialize(message)
    return outgoing_list(message)


class Pairing:
    """The paired-namespace state of one primary client."""

    def __init__(
        self,
        primary: ConnectionHolder,
        options: PairedNamespaceOptions,
        secondary: ServiceBusClient,
        clock: Callable[[], float] = time.monotonic,
        *,
        local_queue: bool = False,
    ) -> None:
        """``primary``: the paired client's connection (its ``policy`` the client's);
        ``secondary``: a client of the secondary namespace, made by whoever pairs (the paired
        client) and closed with the pairing; ``local_queue``: the client has one (an error's hint)."""
        self.options = options
        self.clock = clock
        self.primary = primary
        self.policy: RetryPolicy = primary.policy
        self.local_queue = local_queue
        self.label = namespace_label(primary.endpoint.host, primary.endpoint.port)
        self.names = tuple(backlog_queue_name(self.label, i) for i in range(options.backlog_queue_count))
        self.rotation = BacklogRotation(self.names, random.Random(options.seed))
        self.failover_seconds = options.failover_seconds
        self.ping_seconds = options.ping_seconds
        self.entities: dict[str, EntityFailover] = {}
        self.started = False
        self.closed = False
        self.secondary: ServiceBusClient = secondary
        """The secondary namespace's client (its connection is opened when first used)."""
        self.syphon: Syphon | None = None
        self.parked = 0
        self.syphoned = 0
        self.pings_sent = 0
        self.pings_accepted = 0
        self.last_failover_at: float | None = None
        """Wall-clock time (``time.time()``) of the last failover engaged, of any entity."""
        self.last_failback_at: float | None = None
        self.last_error: str | None = None
        """The last error a send to the primary or to a backlog queue met (for an operator)."""
        self.backlog_ready = False
        """True once the backlog queues were checked (and the missing ones created)."""
        self.backlog_error: BacklogQueueError | None = None
        """Why the last check of the backlog queues failed (None: it did not, or none ended yet)."""
        self._checking: asyncio.Task[None] | None = None
        self._first_check = asyncio.Event()
        self._backlog_senders: dict[str, ServiceBusSender] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._pings: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._senders: dict[str, weakref.WeakSet[PairedSender]] = {}

    def __repr__(self) -> str:
        return f"<Pairing {self.primary.host} -> {self.options.secondary.fully_qualified_namespace}>"

    # -- start and close ----------------------------------------------------------------
    async def start(self) -> None:
        """Start the syphon if enabled, and start checking the
        backlog queues (creating the missing ones) in the background: an unreachable
        secondary never stops sends to a healthy primary (issue 32). A failed check is
        logged, shown in :meth:`state` and tried again every ``ping_primary_interval``."""
        if self.started:
            return
        if self.closed:
            raise ServiceBusError("the paired client is closed")
        if self.options.enable_syphon:
            from amqplink.servicebus.paired.syphon import Syphon

            self.syphon = Syphon(self)
            self.syphon.start()
        self.started = True
        self._checking = self.keep(asyncio.get_running_loop().create_task(self._check_backlog()))
        for senders in self._senders.values():
            for sender in senders:
                sender.reroute()

    async def backlog_checked(self) -> None:
        """Wait for the first check of the backlog queues to end, however it ends (never raises:
        its failure is in :attr:`backlog_error`)."""
        await self.start()
        await self._first_check.wait()  # the check's own calls are bounded by management_timeout

    async def _check_backlog(self) -> None:
        """Check the backlog queues (``GET``, ``PUT`` if missing) until it succeeds once: every
        ``ping_primary_interval`` after a failure, logged when it first fails and when it works."""
        o = self.options
        try:
            while not self.closed:
                try:
                    await asyncio.to_thread(
                        ensure_backlog_queues_sync, self.names, o.management_url, o.secondary, o.connection_verify,
                        o.management_timeout,
                    )  # fmt: skip
                except BacklogQueueError as exc:
                    self._first_check.set()
                    if self.backlog_error is None:
                        log.warning(
                            "paired namespace: the backlog queues could not be checked (%s); sends to the primary"
                            " go on, parking will try them as they are; checking again every %g s",
                            exc, self.ping_seconds,
                        )  # fmt: skip
                    self.backlog_error = exc
                    await asyncio.sleep(self.ping_seconds)
                    continue
                if self.backlog_error is not None:
                    log.warning("paired namespace: the backlog queues are checked now (the management API answers)")
                self.backlog_error = None
                self.backlog_ready = True
                log.info("paired namespace: %d backlog queue(s) ready in %s", len(self.names), o.secondary.amqp_url)
                return
        finally:
            self._first_check.set()  # however the check ends (closed, cancelled), nobody waits on it

    async def close(self) -> None:
        """Stop timers, pings and the syphon; close the backlog senders and the secondary client."""
        self.closed = True
        self._first_check.set()  # (nobody waits for a check that will not end)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        tasks = [*self._pings.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.syphon is not None:
            await self.syphon.close()
        senders, self._backlog_senders = self._backlog_senders, {}
        for sender in senders.values():
            await sender.close()
        await self.secondary.close()

    def keep(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Hold ``task`` until it ends (cancelled at close)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- state --------------------------------------------------------------------------
    def entity(self, name: str) -> EntityFailover:
        """The failover state of ``name`` (shared by every sender of this client)."""
        failover = self.entities.get(name)
        if failover is None:
            failover = self.entities[name] = EntityFailover(name, self.failover_seconds, self.clock)
            failover.on_change = self._changed
        return failover

    def register(self, sender: PairedSender) -> None:
        """Route ``sender`` by its entity's state, now and at each change."""
        self._senders.setdefault(sender.entity_name, weakref.WeakSet()).add(sender)
        sender.reroute()

    def _changed(self, failover: EntityFailover) -> None:
        """Every sender of the entity learns of the change at once."""
        for sender in self._senders.get(failover.entity, ()):
            sender.reroute()

    def state(self) -> PairedState:
        """What the pairing looks like now (``client.paired_state``): each entity's state, the
        backlog queues, the counters."""
        entities = self.entities.values()
        return PairedState(
            entities={f.entity: f.state.value for f in entities},
            failed_over=tuple(f.entity for f in entities if f.state is FAILED_OVER),
            backlog_queues=self.names,
            in_rotation=tuple(self.rotation.in_rotation),
            current_backlog_queue=self.rotation.current,
            parked=self.parked,
            syphoned=self.syphoned,
            pings_sent=self.pings_sent,
            pings_accepted=self.pings_accepted,
            failovers=sum(f.failovers for f in entities),
            failbacks=sum(f.failbacks for f in entities),
            syphon_running=self.syphon is not None and self.syphon.running,
            backlog_checked=self.backlog_ready,
            backlog_error=None if self.backlog_error is None else str(self.backlog_error),
            last_error=self.last_error,
            last_failover_at=self.last_failover_at,
            last_failback_at=self.last_failback_at,
            primary_label=self.label,
            syphon_moved={} if self.syphon is None else dict(self.syphon.moved),
            syphon_faulted=0 if self.syphon is None else self.syphon.faulted,
            syphon_oldest={} if self.syphon is None else dict(self.syphon.oldest),
        )

    def primary_failed(self, failover: EntityFailover, error: BaseException) -> bool:
        """A send to the primary failed; True if the message is to be parked instead."""
        was = failover.state
        if failover.failed(error):
            if was is not FAILED_OVER:
                self._engaged(failover, error)
            return True
        if failover.state is SUSPECT and failover.entity not in self._timers:
            remaining = failover.remaining() or 0.0
            loop = asyncio.get_running_loop()
            self._timers[failover.entity] = loop.call_later(remaining, self._timer_fired, failover, error)
            log.info("%s: send failed (%s); failover in %.1f s unless a send succeeds", failover.entity, error,
                     remaining)  # fmt: skip
        return False

    def attempt_failed(self, failover: EntityFailover, error: BaseException) -> None:
        """One attempt of a send to the primary failed and the retry policy may try again: the
        failover timer starts now, at the first failure (seed 001: "upon receiving a
        non-transient failure, a timer starts"), not once the retries ran out."""
        self.primary_failed(failover, error)

    def _timer_fired(self, failover: EntityFailover, error: BaseException) -> None:
        self._timers.pop(failover.entity, None)
        if failover.state is SUSPECT:
            if failover.expire():
                self._engaged(failover, error)
            else:  # the timer restarted meanwhile (a success, then a new failure)
                self.primary_failed(failover, error)

    def _engaged(self, failover: EntityFailover, error: BaseException) -> None:
        timer = self._timers.pop(failover.entity, None)
        if timer is not None:
            timer.cancel()
        self.last_failover_at = time.time()
        log.warning(
            "%s: failover engaged: no send succeeded for %.1f s since the first failed attempt (failover_interval"
            " %.1f s; last error: %s); parking in the secondary namespace",
            failover.entity, failover.engaged_after or 0.0, failover.interval, error,
        )  # fmt: skip
        if failover.entity not in self._pings and not self.closed:
            task = asyncio.get_running_loop().create_task(self._ping(failover))
            self._pings[failover.entity] = task

    # -- parking ------------------------------------------------------------------------
    async def _backlog_sender(self, name: str) -> ServiceBusSender:
        """The sender to backlog queue ``name``, attached. One attempt, no retries: a queue that
        fails leaves the rotation at once (issue 32: a retry budget per queue kept senders
        waiting 98 s while ten queues failed in turn). A failed queue's sender is kept (it
        attaches again when the queue is back in rotation): closing it under parks that still
        hold it made them fail with a ValueError."""
        sender = self._backlog_senders.get(name)
        if sender is None or sender._closed:
            await self.start()
            policy = dataclasses.replace(self.secondary._policy, retry_total=0)
            sender = self._backlog_senders[name] = ServiceBusSender(self.secondary._holder, name, policy=policy)
        if not sender._ready():
            await sender._retry(_attached)  # learn the queue's max message size
        return sender

    async def backlog_max_size(self) -> int:
        """The current backlog queue's max-message-size (attaching to it if need be)."""
        name = self.rotation.current
        if name is None:
            raise BacklogQueueError("every backlog queue failed: nothing can be parked")
        return (await self._backlog_sender(name)).max_message_size

    async def park(self, entity: str, messages: Iterable[ServiceBusMessage], timeout: float | None = None) -> None:
        """Send ``messages`` (bound for ``entity``) to the current backlog queue; a queue whose
        attempt fails is pulled from rotation and the next one tried (every queue at once when
        the secondary namespace cannot be reached: they share its connection); none left:
        :class:`BacklogQueueError`, naming ``entity``. Every error is a ``ServiceBusError``."""
        originals = list(messages)
        last: BaseException | None = None
        rotation = self.rotation
        if rotation.emptied_at is not None and self.clock() - rotation.emptied_at >= self.ping_seconds:
            log.info("paired namespace: trying every backlog queue again")
            rotation.restore_all()
        await self.start()
        if not self._first_check.is_set():
            await self._first_check.wait()  # a fresh client: the queues are being created
        while True:
            name = rotation.current
            if name is None:
                raise self._none_left(entity, len(originals), last)
            if self.closed:
                raise ServiceBusError(f"the client is closed: {len(originals)} message(s) not parked", entity=entity)
            try:
                sender = await self._backlog_sender(name)
                parked = [park(m, entity, sender.max_message_size) for m in originals]
                # one message: the single-send path (concurrent ones are gathered into batches)
                await sender.send_messages(parked[0] if len(parked) == 1 else parked, timeout=timeout)
            except MessageSizeExceededError:
                raise
            except (ServiceBusError, AMQPError, OSError) as exc:
                last = exc
                self.last_error = f"{name}: {exc}"
                if name in rotation.in_rotation:  # (other parks may have pulled it meanwhile)
                    log.warning("%s: backlog queue %r failed (%s)", entity, name, exc)
                if isinstance(exc, ServiceBusConnectionError):
                    rotation.pull_all(self.clock(), f"the secondary namespace could not be reached ({exc})")
                else:
                    rotation.pull(name, self.clock())
                continue
            self.parked += len(parked)
            return

    def _none_left(self, entity: str, count: int, last: BaseException | None) -> BacklogQueueError:
        where = self.options.secondary.amqp_url
        checked = (
            "" if self.backlog_error is None else f"; the backlog queues could not be checked: {self.backlog_error}"
        )
        hint = "" if self.local_queue else " (or give the client a local_queue)"
        return BacklogQueueError(
            f"the primary entity is failed over and every backlog queue of {where} failed (last:"
            f" {last or self.last_error}{checked}); {count} message(s) not sent: retry later{hint}",
            entity=entity,
            error=last,
            retryable=True,
        )

    async def park_nowait(
        self,
        entity: str,
        message: ServiceBusMessage,
        *,
        park: Callable[[list[ServiceBusMessage], float | None], Awaitable[None]] | None = None,
    ) -> asyncio.Future[None]:
        """:meth:`park` for ``send_nowait``: a future for the parked message's outcome
        (``park``: what parks it instead, e.g. a sender's, with its local queue behind)."""
        result: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        parking = self.park(entity, [message]) if park is None else park([message], None)
        self.keep(asyncio.get_running_loop().create_task(settle(result, parking)))
        return result

    # -- pings --------------------------------------------------------------------------
    def ping_message(self) -> ServiceBusMessage:
        """The message that probes the primary entity: empty, Service Bus's ping content type, a short TTL."""
        return ServiceBusMessage(b"", content_type=PING_CONTENT_TYPE, time_to_live=PING_TTL_SECONDS)

    async def _ping(self, failover: EntityFailover) -> None:
        """Every ``ping_primary_interval``, a ping to the primary entity until one is accepted:
        then every sender of the entity sends to the primary again (failback)."""
        entity = failover.entity
        policy = dataclasses.replace(self.policy, retry_total=0)
        sender = ServiceBusSender(self.primary, entity, policy=policy)
        try:
            while failover.state is FAILED_OVER and not self.closed:
                await asyncio.sleep(self.ping_seconds)
                self.pings_sent += 1
                try:
                    await sender.send_messages(self.ping_message())
                except (ServiceBusError, AMQPError, OSError) as exc:
                    log.debug("%s: ping refused (%s)", entity, exc)
                    continue
                self.pings_accepted += 1
                if failover.ping_accepted():
                    self.last_failback_at = time.time()
                    log.warning("%s: the primary accepted a ping; sending to it again (failback)", entity)
                    if not any(f.state is FAILED_OVER for f in self.entities.values()):
                        self.rotation.restore_all()
        finally:
            self._pings.pop(entity, None)
            await sender.close()


async def settle(result: asyncio.Future[None], work: Awaitable[None]) -> None:
    """Await ``work`` and hand its outcome to ``result`` (the future a ``send_nowait`` returned):
    None, its exception, or its cancellation (the client closing)."""
    try:
        await work
    except asyncio.CancelledError:
        result.cancel()
        raise
    except Exception as exc:
        if not result.done():
            result.set_exception(exc)
        return
    if not result.done():
        result.set_result(None)


async def _attached(_remaining: float) -> None:
    return None
