"""A receiver over the same entity in two (or more) namespaces that yields each message once (seed 003), asyncio."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from amqplink.servicebus.constants import ServiceBusReceiveMode
from amqplink.servicebus.exceptions import MessageAlreadySettled, ServiceBusError
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.receiver import ServiceBusReceiver
from amqplink.servicebus.replication.dedup import Deduplicator
from amqplink.servicebus.replication.outage import ReplicationError

__all__ = ["DeduplicatingReceiver"]

log = logging.getLogger(__name__)

_SWEEP_AT = 64
"""Unsettled handed-out messages above which those with a lapsed lock are forgotten."""


@dataclass(slots=True)
class _Pending:
    """A message handed to the user and not settled yet, and the copies that came meanwhile."""

    message: ServiceBusReceivedMessage
    copies: list[ServiceBusReceivedMessage] = field(default_factory=list)


@dataclass(slots=True)
class _Source:
    """One namespace's receiver, its receive in progress, and its retry state after a failure."""

    receiver: ServiceBusReceiver
    task: asyncio.Task[list[ServiceBusReceivedMessage]] | None = None
    error: BaseException | None = None
    retry_at: float = 0.0
    backoff: float = 0.0


class DeduplicatingReceiver:
    """Receive from the same queue or subscription in each namespace; yield each message once.

    Seed 003: "A client receives messages from both queues. The receiver processes the
    first copy of a message, and the second copy is suppressed." A message's id is its
    ``message_id``, or the application property ``id_property`` when given (the seed also
    allows a custom property); a message without one is yielded as it is (it cannot be
    matched; :attr:`without_id` counts them). The ids handled are kept in
    ``deduplicator`` (a :class:`Deduplicator`: bounded by count and time window, and
    durable when it has a SQLite file, so that a restarted consumer does not process a
    message twice); default: an in-memory one with the default bounds.

    **Peek-lock** (all receivers must use the same mode): a message is yielded and its id
    recorded when you settle it through this object (``complete_message``,
    ``dead_letter_message``, ``defer_message``: the message was handled), *before* the
    settlement is sent, so a crash after processing never processes a copy again. A copy
    that arrives while the first is still unsettled is held; when the first is completed,
    dead-lettered or deferred the copies are completed (duplicates removed), when it is
    abandoned they are abandoned too (both come back; one is yielded). A copy of a
    recorded id is completed without being yielded. A consumer that crashes between
    processing and settling processes the message again after restart (peek-lock's
    at-least-once: its id was not recorded). **Receive-and-delete**: the id is recorded
    when the message is handed out; a copy of a recorded id is dropped; a crash while
    processing loses the message (and its copy, now recorded).

    A namespace whose receive fails is retried after ``retry_interval`` s (doubling up to
    ``max_retry_interval``) while the others go on; the failure is logged once, and again
    when it is back. When every namespace fails, :meth:`receive_messages` raises
    :class:`ReplicationError` with each one's error.

    What replication costs, as the seed states it: a copy that comes later than
    ``window`` after the first (or after ``max_count`` newer ids) is not recognised and is
    yielded again; with **passive** replication a message sent to a namespace just before
    it went down is received only when it is back (delay), or never after a disaster
    (loss), and a send that timed out but was stored is sent again to the other namespace
    (a duplicate: same id, removed here unless it arrives outside the window). With
    **active** replication every message comes twice (twice the receive operations).
    """

    def __init__(
        self,
        receivers: Sequence[ServiceBusReceiver],
        *,
        deduplicator: Deduplicator | None = None,
        id_property: str | None = None,
        max_wait_time: float | None = None,
        retry_interval: float = 1.0,
        max_retry_interval: float = 30.0,
        poll_time: float = 5.0,
    ) -> None:
        receivers = list(receivers)
        if len(receivers) < 2 or len({id(r) for r in receivers}) != len(receivers):
            raise ValueError("a de-duplicating receiver needs two or more different receivers (one per namespace)")
        modes = {r.receive_mode for r in receivers}
        if len(modes) != 1:
            raise ValueError(f"the receivers must use the same receive mode, not {sorted(m.value for m in modes)}")
        if not (retry_interval > 0 and max_retry_interval >= retry_interval and poll_time > 0):
            raise ValueError("retry_interval and poll_time must be positive, max_retry_interval >= retry_interval")
        self.receive_mode: ServiceBusReceiveMode = modes.pop()
        self._sources = [_Source(r) for r in receivers]
        self._owns_dedup = deduplicator is None
        self.deduplicator = Deduplicator() if deduplicator is None else deduplicator
        self.id_property = id_property
        self.max_wait_time = max_wait_time
        self.retry_interval, self.max_retry_interval, self.poll_time = retry_interval, max_retry_interval, poll_time
        self.without_id = 0
        """Messages yielded without an id (they cannot be de-duplicated)."""
        self._ready: deque[ServiceBusReceivedMessage] = deque()
        self._pending: dict[str, _Pending] = {}
        self._sweep_at = _SWEEP_AT
        self._closed = False

    @property
    def receivers(self) -> tuple[ServiceBusReceiver, ...]:
        """The receivers, one per namespace."""
        return tuple(s.receiver for s in self._sources)

    @property
    def duplicates_removed(self) -> int:
        """Copies not yielded (completed or dropped) because their id was handled."""
        return self.deduplicator.duplicates_removed

    @property
    def held_copies(self) -> int:
        """Copies held (locked, not yielded) until the message handed out with their id is settled."""
        return sum(len(p.copies) for p in self._pending.values())

    # -- receiving --------------------------------------------------------------------

    async def receive_messages(
        self, max_message_count: int | None = 1, max_wait_time: float | None = None
    ) -> list[ServiceBusReceivedMessage]:
        """Up to ``max_message_count`` messages none of which was yielded before, waiting up
        to ``max_wait_time`` s (default: this object's; None: until one comes) for the first."""
        if self._closed:
            raise ValueError("the de-duplicating receiver is closed")
        count = 1 if max_message_count is None else int(max_message_count)
        if count < 1:
            raise ValueError("max_message_count must be 1 or greater.")
        wait = self.max_wait_time if max_wait_time is None else max_wait_time
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        out: list[ServiceBusReceivedMessage] = []
        while True:
            await self._hand_out(out, count)
            if out:
                return out
            self._start_receives(count, loop.time())
            running = {s.task for s in self._sources if s.task is not None}
            if not running:
                self._raise_if_all_failed()
            timeout = self._next_retry(loop.time())
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    return out
                timeout = left if timeout is None else min(timeout, left)
            if running:
                await asyncio.wait(running, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(timeout or 0)  # only retries are due: wait for the first of them
            self._collect(loop.time())

    def __aiter__(self) -> DeduplicatingReceiver:
        return self

    async def __anext__(self) -> ServiceBusReceivedMessage:
        """The next message; iteration ends after ``max_wait_time`` s without one (never if None)."""
        got = await self.receive_messages(1)
        if not got:
            raise StopAsyncIteration
        return got[0]

    def _start_receives(self, count: int, now: float) -> None:
        for source in self._sources:
            if source.task is None and now >= source.retry_at:
                source.task = asyncio.ensure_future(source.receiver.receive_messages(count, self.poll_time))

    def _next_retry(self, now: float) -> float | None:
        waits = [s.retry_at - now for s in self._sources if s.task is None and s.error is not None]
        return max(min(waits), 0.0) if waits else None

    def _collect(self, now: float) -> None:
        for index, source in enumerate(self._sources):
            task = source.task
            if task is None or not task.done():
                continue
            source.task = None
            error = task.exception() if not task.cancelled() else asyncio.CancelledError()
            if error is None:
                self._ready.extend(task.result())
                if source.error is not None:
                    log.warning("de-duplicating receiver: namespace %d (%s) receives again", index, _where(source))
                source.error, source.backoff = None, 0.0
                continue
            if not isinstance(error, ServiceBusError):
                raise error  # a bug, not a namespace's answer
            if source.error is None:
                log.warning("de-duplicating receiver: namespace %d (%s) failed: %s", index, _where(source), error)
            source.error = error
            source.backoff = min(self.max_retry_interval, max(self.retry_interval, source.backoff * 2))
            source.retry_at = now + source.backoff

    def _raise_if_all_failed(self) -> None:
        errors = [s.error for s in self._sources]
        if all(e is not None for e in errors):
            for source in self._sources:
                source.retry_at = 0.0  # the next call tries each namespace again at once
            raise ReplicationError(
                "every namespace failed to receive",
                [e for e in errors if e is not None],
                entity=self._sources[0].receiver.entity_name,
            )

    async def _hand_out(self, out: list[ServiceBusReceivedMessage], count: int) -> None:
        """Move ready messages to ``out``: first copies are handed out, others held or removed."""
        peek_lock = self.receive_mode is ServiceBusReceiveMode.PEEK_LOCK
        removed: list[ServiceBusReceivedMessage] = []
        while self._ready and len(out) < count:
            message = self._ready.popleft()
            key = self._id_of(message)
            if key is None:
                self.without_id += 1
                out.append(message)
            elif not peek_lock:
                if not self.deduplicator.seen(key):
                    out.append(message)
            elif key in self.deduplicator:
                self.deduplicator.seen(key)  # counts the duplicate
                removed.append(message)
            elif (pending := self._pending.get(key)) is not None and not _lapsed(pending.message):
                pending.copies.append(message)
            else:
                self._pending[key] = _Pending(message)
                out.append(message)
        await self._settle_copies(removed, complete=True)
        if len(self._pending) > self._sweep_at:  # amortised: a full sweep per doubling
            self._sweep()
            self._sweep_at = max(_SWEEP_AT, 2 * len(self._pending))

    def _sweep(self) -> None:
        """Forget handed-out messages whose lock lapsed unsettled (their copies come back by themselves)."""
        for key in [k for k, p in self._pending.items() if _lapsed(p.message)]:
            del self._pending[key]

    def _id_of(self, message: ServiceBusReceivedMessage) -> str | None:
        if self.id_property is None:
            value: object = message.message_id
        else:
            props = message._message.application_properties
            value = props.get(self.id_property) if props else None
        if value is None or value == "" or value == b"":
            return None
        return value.hex() if isinstance(value, bytes) else str(value)

    # -- settling (peek-lock) -------------------------------------------------------------

    async def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        """Done: record its id (before completing), complete it and remove its held copies."""
        await self._settle(message, lambda r: r.complete_message(message), record=True)

    async def dead_letter_message(
        self, message: ServiceBusReceivedMessage, reason: str | None = None, error_description: str | None = None
    ) -> None:
        """Dead-letter it (once: its held copies are completed) and record its id."""
        await self._settle(message, lambda r: r.dead_letter_message(message, reason, error_description), record=True)

    async def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        """Defer it in its namespace (its held copies are completed) and record its id."""
        await self._settle(message, lambda r: r.defer_message(message), record=True)

    async def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        """Give it back, and its held copies too: one of them is yielded again later."""
        await self._settle(message, lambda r: r.abandon_message(message), record=False)

    async def renew_message_lock(
        self, message: ServiceBusReceivedMessage, *, timeout: float | None = None
    ) -> dt.datetime:
        """Renew the lock in the namespace it came from (the held copies' locks are not renewed)."""
        return await self._origin(message).renew_message_lock(message, timeout=timeout)

    async def _settle(
        self,
        message: ServiceBusReceivedMessage,
        settle: Callable[[ServiceBusReceiver], Awaitable[None]],
        *,
        record: bool,
    ) -> None:
        receiver = self._origin(message)
        key = self._id_of(message)
        copies: list[ServiceBusReceivedMessage] = []
        if key is not None:
            pending = self._pending.get(key)
            if pending is not None and pending.message is message:
                del self._pending[key]
                copies = pending.copies
            if record and key not in self.deduplicator:
                self.deduplicator.seen(key)
        try:
            await settle(receiver)
        finally:
            if record and key is not None:
                for _ in copies:
                    self.deduplicator.seen(key)  # counts the copies removed
            await self._settle_copies(copies, complete=record)

    async def _settle_copies(self, copies: list[ServiceBusReceivedMessage], *, complete: bool) -> None:
        """Complete (or abandon) copies, all at once; a failure is only logged: an unsettled
        copy comes back when its lock lapses and is removed then."""
        if not copies:
            return
        results = await asyncio.gather(
            *(self._origin(c).complete_message(c) if complete else self._origin(c).abandon_message(c) for c in copies),
            return_exceptions=True,
        )
        for copy, result in zip(copies, results, strict=True):
            if isinstance(result, ServiceBusError | MessageAlreadySettled):
                log.debug("de-duplicating receiver: copy %s not settled (%s); it comes back", copy.message_id, result)
            elif isinstance(result, BaseException):
                raise result

    def _origin(self, message: ServiceBusReceivedMessage) -> ServiceBusReceiver:
        receiver: object = getattr(message, "_receiver", None)
        for source in self._sources:
            if source.receiver is receiver:
                return source.receiver
        raise ValueError("this message was not received by this de-duplicating receiver's receivers")

    # -- closing --------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop receiving and close the receivers (and the deduplicator when it made it).

        In peek-lock mode, messages received but not handed out, and the copies held behind
        handed-out ones, are abandoned first: a closed link does not end its locks on Service
        Bus (they are held until they expire), so without this a restarted consumer would
        wait a lock duration for them. Messages handed out and not settled stay locked until
        their locks expire, as with any receiver. In receive-and-delete mode the messages not
        handed out are lost, as in any receiver.
        """
        if self._closed:
            return
        self._closed = True
        tasks = [s.task for s in self._sources if s.task is not None]
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if self.receive_mode is ServiceBusReceiveMode.PEEK_LOCK:
            arrived = [m for r in results if isinstance(r, list) for m in r]  # finished, not yet collected
            unhanded = [*self._ready, *arrived, *(c for p in self._pending.values() for c in p.copies)]
            await self._settle_copies(unhanded, complete=False)
        await asyncio.gather(*(s.receiver.close() for s in self._sources), return_exceptions=True)
        self._ready.clear()
        self._pending.clear()
        if self._owns_dedup:
            self.deduplicator.close()

    async def __aenter__(self) -> DeduplicatingReceiver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        where = ", ".join(_where(s) for s in self._sources)
        return f"DeduplicatingReceiver([{where}], {self.receive_mode.value}, {self.deduplicator!r})"


def _where(source: _Source) -> str:
    return f"{source.receiver.fully_qualified_namespace}/{source.receiver.entity_name}"


def _lapsed(message: ServiceBusReceivedMessage) -> bool:
    return message._settled or message._lock_expired
