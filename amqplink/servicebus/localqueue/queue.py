"""One client's local queue, asyncio: stores (group commit), forwarding, and its state.

Senders store a message here when no namespace takes it (:func:`shields` says which
errors): the commit that holds it is synced before the send returns; concurrent stores
share one commit (one ``fdatasync``). Every file call runs on one worker thread, in turn.

Forwarding: one task per entity with stored messages, oldest first, up to
``forward_batch`` at a time, through the client's own route (the primary, or a backlog
queue when paired), with the same message ids; a batch is acknowledged in the file once
the namespace accepted it, then the next is sent. So an entity's messages (and a session's,
a partition key's) leave in the order they were stored; a crash between the acceptance
and the acknowledgement sends that batch again (the same message ids: duplicate detection
on the entity removes the repeat). While an entity has messages here, new sends to it are
stored behind them (``has``), so that they do not overtake them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from amqplink.aio.errors import AMQPError
from amqplink.message import Message
from amqplink.servicebus.exceptions import ServiceBusError, ServiceBusQuotaExceededError, ServiceBusServerBusyError
from amqplink.servicebus.localqueue.errors import LocalQueueError, LocalQueueFullError
from amqplink.servicebus.localqueue.options import LocalQueueOptions
from amqplink.servicebus.localqueue.store import LocalQueueFile, Stored
from amqplink.servicebus.message import ServiceBusMessage, new_message_id
from amqplink.servicebus.replication.outage import suggests_outage

__all__ = ["EntityBacklog", "LocalQueue", "LocalQueueState", "shields"]

log = logging.getLogger(__name__)

T = TypeVar("T")

FORWARD_BYTES = 1 << 20
"""About how many message bytes one forward reads at most (the sender splits by link size)."""


def shields(error: BaseException) -> bool:
    """Whether the local queue takes a message whose send failed with ``error``: the namespace
    (and the secondary, when paired) seems unavailable (:func:`suggests_outage`), is busy, or
    the entity is full. Not: a message too large, authentication and authorisation, an entity
    not found (those fail the same way later: raised at once), nor the local queue's own."""
    if isinstance(error, LocalQueueError) or not isinstance(error, ServiceBusError):
        return False
    return isinstance(error, ServiceBusServerBusyError | ServiceBusQuotaExceededError) or suggests_outage(error)


class Reroutable(Protocol):
    """A sender that switches between the plain and the routed methods (``reroute``)."""

    entity_name: str

    def reroute(self) -> None: ...


@dataclass(frozen=True)
class EntityBacklog:
    """One entity's messages in the local queue."""

    depth: int
    oldest_age: float | None
    """Seconds since the oldest was stored."""
    forwarding: str
    """``forwarding``, ``waiting`` (after a failure, until ``retry_in``) or ``idle``."""
    last_error: str | None
    retry_in: float | None


@dataclass(frozen=True)
class LocalQueueState:
    """A snapshot of a client's local queue (``client.local_queue_state``)."""

    directory: str
    depth: int
    """Messages stored and not yet forwarded."""
    bytes: int
    max_bytes: int
    oldest_age: float | None
    forwarding: str
    """``not started``, ``idle`` (empty), ``forwarding``, ``waiting`` (every entity left waits
    after a failure) or ``closed``."""
    entities: Mapping[str, EntityBacklog] = field(default_factory=dict)
    stored: int = 0
    """Messages this client stored."""
    forwarded: int = 0
    """Messages this client forwarded (and removed)."""
    refused_full: int = 0
    """Messages refused because the queue was full."""
    last_error: str | None = None
    torn_bytes: int = 0
    """Bytes of torn last writes found at open (a crash while storing; left in place, not read)."""
    segments: int = 0
    file_bytes: int = 0


@dataclass
class _Drain:
    task: asyncio.Task[None] | None = None
    last_error: str | None = None
    retry_at: float | None = None


Forward = Callable[[str, list[ServiceBusMessage]], Awaitable[None]]
"""Sends an entity's messages onwards (the client's route without the local queue)."""


class LocalQueue:
    """The local queue of one client (``local_queue=LocalQueueOptions(...)``)."""

    def __init__(self, options: LocalQueueOptions, forward: Forward, *, close_forwarding: Callable[[], Awaitable[None]]
                 | None = None, clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.options = options
        self.directory = options.path
        self.forward = forward
        self._close_forwarding = close_forwarding
        self.clock = clock
        self.file: LocalQueueFile | None = None
        self.started = False
        self.closed = False
        self.stored = 0
        self.forwarded = 0
        self.refused_full = 0
        self.last_error: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._start_lock: asyncio.Lock | None = None
        self._waiting: list[tuple[list[Stored], asyncio.Future[bool]]] = []
        self._committing: asyncio.Task[None] | None = None
        self._storing: Counter[str] = Counter()
        """Messages of each entity queued for the next commit (not yet in the file)."""
        self._drains: dict[str, _Drain] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._senders: dict[str, weakref.WeakSet[Reroutable]] = {}

    def __repr__(self) -> str:
        return f"<LocalQueue {self.directory}>"

    # -- start and close ----------------------------------------------------------------
    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        assert self._executor is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    async def start(self) -> None:
        """Open the directory (its lock, then what it holds), and forward what a previous run
        left. :class:`~.errors.LocalQueueCorruptError` for a damaged file (nothing changed),
        :class:`~.errors.LocalQueueInUseError` when another client holds it."""
        if self.started:
            return
        if self.closed:
            raise LocalQueueError(f"the local queue {self.directory!r} is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.started:
                return
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="amqplink-local-queue")
            try:
                self.file = await self._run(LocalQueueFile, self.directory, self.options.max_bytes)
            except BaseException:
                self._executor.shutdown(wait=False)
                self._executor = None
                raise
            self.started = True
            f = self.file
            if f.torn:
                log.warning(
                    "local queue %s: %d byte(s) at the end of a segment do not form a record (a write a crash cut"
                    " short: never acknowledged); left in place, not read", self.directory, f.torn,
                )  # fmt: skip
            if f.pending:
                log.warning("local queue %s: %d message(s) of %d entities left by a previous run; forwarding them",
                            self.directory, f.depth, len(f.pending))  # fmt: skip
            for entity in list(f.pending):
                self._drain(entity)
            for senders in list(self._senders.values()):
                for sender in list(senders):
                    sender.reroute()

    async def close(self) -> None:
        """Stop forwarding (what is left stays on disk for the next client), then close the file."""
        if self.closed:
            return
        self.closed = True
        if self._committing is not None:
            await asyncio.gather(self._committing, return_exceptions=True)
        tasks = [d.task for d in self._drains.values() if d.task is not None] + list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._close_forwarding is not None:
            await self._close_forwarding()
        if self._executor is not None:
            if self.file is not None:
                await self._run(self.file.close)
            self._executor.shutdown(wait=True)

    def keep(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Hold ``task`` until it ends (cancelled at close)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- routing ------------------------------------------------------------------------
    def register(self, sender: Reroutable) -> None:
        """Tell ``sender`` (``reroute``) when its entity's messages here come and go."""
        self._senders.setdefault(sender.entity_name, weakref.WeakSet()).add(sender)
        sender.reroute()

    def _rerouted(self, entity: str) -> None:
        for sender in list(self._senders.get(entity, ())):
            sender.reroute()

    def lets_through(self, entity: str) -> bool:
        """True when a send to ``entity`` may take the plain path: the queue is open and holds
        nothing of it."""
        return self.started and not self.has(entity)

    def has(self, entity: str) -> bool:
        """True while ``entity`` has messages here (stored, or being stored): a new send to it
        is stored behind them instead of overtaking them."""
        return bool(self._storing[entity]) or (self.file is not None and entity in self.file.pending)

    # -- storing ------------------------------------------------------------------------
    async def take(self, entity: str, messages: Sequence[ServiceBusMessage], error: ServiceBusError) -> None:
        """Store ``messages``, whose send to ``entity`` failed with ``error``, if the local queue
        shields a sender from it (:func:`shields`); raise ``error`` otherwise."""
        if not shields(error):
            raise error
        log.debug("%s: send failed (%s); storing %d message(s) in the local queue", entity, error, len(messages))
        await self.store(entity, messages, cause=error)

    async def store(
        self, entity: str, messages: Sequence[ServiceBusMessage], *, cause: BaseException | None = None
    ) -> None:
        """Store ``messages`` for ``entity``, whole or not at all; synced before this returns.
        :class:`~.errors.LocalQueueFullError` (from ``cause``) when they do not fit."""
        if not self.started:
            await self.start()
        if self.closed:
            raise LocalQueueError(f"the client is closed: {len(messages)} message(s) not stored", entity=entity)
        group = [Stored(entity, _key(m), _encoded(m)) for m in messages]
        if not group:
            return
        became = not self.has(entity)
        loop = asyncio.get_running_loop()
        stored: asyncio.Future[bool] = loop.create_future()
        self._waiting.append((group, stored))
        self._storing[entity] += len(group)
        if became:
            self._rerouted(entity)
        if self._committing is None:
            self._committing = loop.create_task(self._commit())
        if not await asyncio.shield(stored):
            self.refused_full += len(group)
            why = (
                f"the send failed ({cause})"
                if cause is not None
                else "the entity's earlier messages wait there (new sends go behind them)"
            )
            raise LocalQueueFullError(
                f"the local queue {self.directory!r} is full ({self.file.live_bytes if self.file else 0} of"
                f" {self.options.max_bytes} bytes taken): {len(group)} message(s) not stored, nothing sent;"
                f" {why}. Retry later, or give the local queue more room (max_bytes)",
                entity=entity,
                error=cause,
            ) from cause

    async def _commit(self) -> None:
        """Write the stores queued so far, in one frame and one sync; again while more came."""
        try:
            while self._waiting:
                waiting, self._waiting = self._waiting, []
                assert self.file is not None
                try:
                    taken = await self._run(self.file.append, [group for group, _ in waiting])
                except OSError as exc:
                    failure = LocalQueueError(
                        f"the local queue {self.directory!r} could not be written ({exc}); nothing of this"
                        " commit was stored", error=exc,
                    )  # fmt: skip
                    self.last_error = str(failure)
                    for group, stored in waiting:
                        self._stored_done(group, False)
                        if not stored.done():
                            stored.set_exception(failure)
                    continue
                for (group, stored), ok in zip(waiting, taken, strict=True):
                    self._stored_done(group, ok)
                    if not stored.done():
                        stored.set_result(ok)
        finally:
            self._committing = None

    def _stored_done(self, group: list[Stored], ok: bool) -> None:
        entities = {item.entity for item in group}
        for item in group:
            self._storing[item.entity] -= 1
        for entity in entities:
            if not self._storing[entity]:
                del self._storing[entity]
            if ok:
                self._drain(entity)
            elif not self.has(entity):
                self._rerouted(entity)
        if ok:
            self.stored += len(group)

    # -- forwarding -----------------------------------------------------------------------
    def _drain(self, entity: str) -> None:
        """Make sure a task forwards ``entity``'s messages."""
        drain = self._drains.setdefault(entity, _Drain())
        if (drain.task is None or drain.task.done()) and not self.closed:
            drain.task = asyncio.get_running_loop().create_task(self._forward(entity, drain), name=f"forward {entity}")

    async def _forward(self, entity: str, drain: _Drain) -> None:
        options = self.options
        delay = options.retry_interval
        assert self.file is not None
        while not self.closed:
            batch = await self._run(self.file.batch, entity, options.forward_batch, FORWARD_BYTES)
            if not batch:
                break
            messages = [ServiceBusMessage._wrap(Message.decode(encoded)) for _, encoded in batch]
            try:
                await self.forward(entity, messages)
            except (ServiceBusError, AMQPError, OSError, ValueError) as exc:
                text = f"{type(exc).__name__}: {exc}"
                if drain.last_error is None:
                    log.warning("local queue: forwarding %d message(s) to %r failed (%s); trying again in %.1f s",
                                len(messages), entity, exc, delay)  # fmt: skip
                drain.last_error = self.last_error = text
                drain.retry_at = self.clock() + delay
                await asyncio.sleep(delay)
                delay = min(options.max_retry_interval, delay * 2)
                continue
            try:
                await self._run(self.file.ack, entity, batch[-1][0])
            except OSError as exc:  # forwarded, not noted: forwarded again (the same ids) after a pause
                drain.last_error = self.last_error = f"noting a forward failed: {exc}"
                log.warning("local queue %s: noting %d forwarded message(s) failed (%s)", self.directory,
                            len(batch), exc)  # fmt: skip
                await asyncio.sleep(delay)
                continue
            self.forwarded += len(batch)
            if drain.last_error is not None:
                log.warning("local queue: %r takes messages again; forwarding", entity)
            drain.last_error = drain.retry_at = None
            delay = options.retry_interval
        if not self.has(entity):
            self._drains.pop(entity, None)
            self._rerouted(entity)
            log.info("local queue: every stored message of %r forwarded", entity)

    # -- state --------------------------------------------------------------------------
    def state(self) -> LocalQueueState:
        """What the queue holds and does now: depth, oldest age, forwarding state per entity, counters."""
        f = self.file
        now = self.clock()
        if f is None:
            return LocalQueueState(self.directory, 0, 0, self.options.max_bytes, None,
                                   "closed" if self.closed else "not started")  # fmt: skip
        entities = {}
        for entity, queue in list(f.pending.items()):
            drain = self._drains.get(entity)
            waiting = drain is not None and drain.retry_at is not None
            entities[entity] = EntityBacklog(
                depth=len(queue),
                oldest_age=now - queue[0].stored_at if queue else None,
                forwarding="waiting" if waiting else "forwarding" if drain is not None else "idle",
                last_error=None if drain is None else drain.last_error,
                retry_in=None if drain is None or drain.retry_at is None else max(0.0, drain.retry_at - now),
            )
        if self.closed:
            overall = "closed"
        elif not entities:
            overall = "idle"
        elif all(e.forwarding == "waiting" for e in entities.values()):
            overall = "waiting"
        else:
            overall = "forwarding"
        oldest = f.oldest()
        return LocalQueueState(
            directory=self.directory,
            depth=sum(e.depth for e in entities.values()),
            bytes=f.live_bytes,
            max_bytes=self.options.max_bytes,
            oldest_age=None if oldest is None else now - oldest,
            forwarding=overall,
            entities=entities,
            stored=self.stored,
            forwarded=self.forwarded,
            refused_full=self.refused_full,
            last_error=self.last_error,
            torn_bytes=f.torn,
            segments=f.segments,
            file_bytes=f.file_bytes,
        )


def _key(message: ServiceBusMessage) -> str:
    """The ordering key kept with a stored message (its session id, else its partition key)."""
    return str(message.session_id or message.partition_key or "")


def _encoded(message: ServiceBusMessage) -> bytes:
    """The message's bytes, with a message id (so that a repeated forward can be recognised)."""
    if message.message_id is None:
        message.message_id = new_message_id()
    return message._message.encode()
