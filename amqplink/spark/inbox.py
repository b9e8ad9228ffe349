"""The streaming source's peek-lock state: messages taken for micro-batches, held until
Spark commits them, then completed; redelivered copies recognised by sequence number.

One :class:`Inbox` lives in the Python process Spark runs a stream reader in (on the
driver's side, for the query's lifetime), on :mod:`amqplink.sync`'s event loop, which the
keeper thread runs between Spark's calls, so the lock renewal (:meth:`Inbox.renew_due`,
every few seconds) goes on while Spark runs a micro-batch.

- :meth:`Inbox.take` receives up to ``limit`` messages for batch ``n``. A message whose
  sequence number is in a batch not yet settled (written by this process or by one that
  died) is that batch's redelivered copy: held for it, not emitted again. One whose
  sequence number was emitted in a settled batch and not completed (``pending``) is
  completed at once. The rest are new: the batch's rows.
- :meth:`Inbox.settle` (Spark committed batches through ``n``) completes the held
  messages of those batches; a message that could not be completed, or whose copy has not
  come back yet, stays ``pending`` (saved), so its next delivery is completed, not emitted.

What is kept per batch is its sequence numbers (from the staged file after a restart), so
the state is bounded by the batches in flight plus the pending set (:mod:`.staging`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from amqplink.sbwire.annotations import ENQUEUED_TIME, SEQUENCE_NUMBER
from amqplink.sbwire.conditions import TIMEOUT
from amqplink.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from amqplink.servicebus.constants import NEXT_AVAILABLE_SESSION, ServiceBusSubQueue
from amqplink.servicebus.exceptions import MessageLockLostError, OperationTimeoutError, ServiceBusError
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.spark.rows import utc_ms
from amqplink.spark.source_options import SourceConfig
from amqplink.spark.staging import PENDING_SECONDS, Staging, StagingState

__all__ = ["RENEW_BATCH", "Counters", "Inbox"]

log = logging.getLogger(__name__)

RENEW_BATCH = 1000
"""Lock tokens per renew-lock request."""
RECEIVE_BATCH = 5000
"""Messages asked for per receive call."""
GATHER_WAIT = 0.05
"""Seconds a receive waits once a micro-batch has its first message (or for a further session)."""


@dataclass
class Counters:
    """What the source did since the reader started (shown in Spark's query progress)."""

    received: int = 0
    emitted: int = 0
    redelivered: int = 0
    completed: int = 0
    pending: int = 0
    renewed: int = 0
    locks_lost: int = 0
    receive_failures: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name (JSON-ready)."""
        return dict(self.__dict__)


@dataclass(slots=True)
class _Held:
    receiver: ServiceBusReceiver
    message: ServiceBusReceivedMessage
    seq: int
    """The message's sequence number (read once)."""


@dataclass
class _Sessions:
    """Open session receivers (``sessions=true``), at most ``maxConcurrentSessions``."""

    open: list[ServiceBusReceiver] = field(default_factory=list)


def _no_session_free(error: BaseException) -> bool:
    """Whether ``error`` is the broker's answer to a next-available-session receiver that
    no session came free for in its wait (``com.microsoft:timeout``), not a failure."""
    return isinstance(error, OperationTimeoutError) and error.condition == TIMEOUT


class Inbox:
    """One entity's peek-lock messages for the micro-batches of one query (see the module)."""

    def __init__(self, config: SourceConfig, staging: Staging, client: ServiceBusClient) -> None:
        self.config = config
        self.staging = staging
        self.client = client
        self.state = StagingState()
        self.batches: dict[int, list[int]] = {}
        """Batch -> its sequence numbers, for the batches not settled."""
        self.known: dict[int, int] = {}
        """Sequence number -> its unsettled batch."""
        self.held: dict[int, _Held] = {}
        """Sequence number -> the locked message (this process's delivery of it)."""
        self.counters = Counters()
        self.until: dt.datetime | None = None
        """Trigger.AvailableNow: messages enqueued after this are left for a later query."""
        self.exhausted = False
        self._receiver: ServiceBusReceiver | None = None
        self._sessions = _Sessions()
        self._renewer: asyncio.Task[None] | None = None
        self._lock_seconds: float | None = None

    # -- state ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the saved state and the staged batches (a restart: their messages come back)."""
        self.state = self.staging.load()
        stale = [b for b in self.staging.ids() if b <= self.state.settled]
        self.staging.remove(stale)
        for batch in self.staging.ids():
            self._note(batch, self.staging.sequence_numbers(batch))

    def _note(self, batch: int, sequence_numbers: list[int]) -> None:
        self.batches[batch] = sequence_numbers
        for seq in sequence_numbers:
            self.known[seq] = batch

    def staged_after(self, batch: int) -> int | None:
        """The first batch after ``batch`` already staged (by a process that died before Spark
        logged its offset), or None."""
        later = [b for b in self.batches if b > batch]
        return min(later) if later else None

    def record(self, batch: int, messages: list[_Held]) -> None:
        """``messages`` are batch ``batch``'s rows, now staged: hold them until it is settled."""
        self._note(batch, [h.seq for h in messages])
        for held in messages:
            self.held[held.seq] = held
        self.counters.emitted += len(messages)
        self._start_renewer()

    # -- receiving ----------------------------------------------------------------------
    def _entity_receiver(self, **kwargs: Any) -> ServiceBusReceiver:
        path = self.config.path
        sub_queue = ServiceBusSubQueue.DEAD_LETTER if path.dead_letter else None
        if path.queue is not None:
            return self.client.get_queue_receiver(path.queue, sub_queue=sub_queue, **kwargs)
        assert path.topic is not None and path.subscription is not None
        return self.client.get_subscription_receiver(path.topic, path.subscription, sub_queue=sub_queue, **kwargs)

    async def take(self, batch: int, limit: int) -> list[_Held]:
        """Up to ``limit`` new messages for batch ``batch`` (redelivered copies held or completed,
        not returned); waits up to ``receiveWait`` seconds for the first."""
        new: dict[int, _Held] = {}
        deadline = time.monotonic() + self.config.receive_wait
        while len(new) < limit and not self.exhausted:
            got = 0
            for receiver in self._open_receivers():
                got += await self._receive_into(receiver, new, limit, deadline)
            if self.config.sessions:
                got += await self._accept_sessions(new, limit, deadline)
            if not got and (new or time.monotonic() >= deadline):
                break
        self.counters.received += len(new)
        return list(new.values())

    def _open_receivers(self) -> list[ServiceBusReceiver]:
        if self.config.sessions:
            return list(self._sessions.open)
        if self._receiver is None:
            # no prefetch: a receive that finds nothing drains the link's credit (_receive_into)
            self._receiver = self._entity_receiver(prefetch_count=0)
        return [self._receiver]

    async def _receive_into(
        self, receiver: ServiceBusReceiver, new: dict[int, _Held], limit: int, deadline: float
    ) -> int:
        """Receive what ``receiver`` has (up to what the batch still takes) into ``new``; how many came.
        A session receiver that had nothing and holds nothing is closed (its session freed)."""
        count = min(RECEIVE_BATCH, limit - len(new))
        if count <= 0:
            return 0
        available_now = self.until is not None and not self.config.sessions
        short = new or self.config.sessions or available_now
        wait = GATHER_WAIT if short else max(GATHER_WAIT, deadline - time.monotonic())
        try:
            messages = await receiver.receive_messages(max_message_count=count, max_wait_time=wait)
        except (ServiceBusError, OSError) as exc:
            if isinstance(exc, ServiceBusError) and not exc.retryable:
                raise  # a wrong key, a missing entity: the query fails, naming it
            await self._lost(receiver, exc)
            return 0
        if messages:
            await self._sort(receiver, messages, new)
        elif available_now:
            # Without prefetch a receive that found nothing drained the link's credit: "the
            # sender ... MUST either use all the available credit or ... advance the
            # delivery-count" (2.6.7), so the entity had nothing to deliver: the input
            # Trigger.AvailableNow asked for is all taken, without waiting receiveWait.
            self.exhausted = True
        elif self.config.sessions and not self._holds(receiver, new):
            self._sessions.open.remove(receiver)
            await receiver.close()
        return len(messages)

    async def _lost(self, receiver: ServiceBusReceiver, exc: BaseException) -> None:
        """The namespace cannot be reached now (its own retries spent): this trigger ends with what
        it has, and the next one connects again; what the receiver held comes back, recognised."""
        self.counters.receive_failures += 1
        log.warning("servicebus source: receiving from %s failed (%s: %s); trying again at the next trigger",
                    self.config.path.path, type(exc).__name__, exc)  # fmt: skip
        if receiver is self._receiver:
            self._receiver = None
        elif receiver in self._sessions.open:
            self._sessions.open.remove(receiver)
        await receiver.close()

    def _holds(self, receiver: ServiceBusReceiver, new: dict[int, _Held]) -> bool:
        return any(h.receiver is receiver for h in (*self.held.values(), *new.values()))

    async def _accept_sessions(self, new: dict[int, _Held], limit: int, deadline: float) -> int:
        """Lock further sessions (next available) while fewer than ``maxConcurrentSessions`` are
        open; how many messages they gave."""
        got = 0
        while len(self._sessions.open) < self.config.max_concurrent_sessions and len(new) < limit:
            first = not new and not got
            wait = max(GATHER_WAIT * 4, deadline - time.monotonic()) if first else GATHER_WAIT * 4
            receiver = self._entity_receiver(session_id=NEXT_AVAILABLE_SESSION, max_wait_time=wait)
            count = min(RECEIVE_BATCH, limit - len(new))
            try:
                messages = await receiver.receive_messages(max_message_count=count, max_wait_time=wait)
            except (ServiceBusError, OSError) as exc:
                if _no_session_free(exc):
                    await receiver.close()  # the broker's wait for a session ran out: none to take now
                    break
                if isinstance(exc, ServiceBusError) and not exc.retryable:
                    raise
                await self._lost(receiver, exc)
                break
            if not messages:
                await receiver.close()  # no session came free (or it was empty): none to wait for now
                break
            self._sessions.open.append(receiver)
            await self._sort(receiver, messages, new)
            got += len(messages)
        return got

    async def _sort(self, receiver: ServiceBusReceiver, messages: list[ServiceBusReceivedMessage],
                    new: dict[int, _Held]) -> None:  # fmt: skip
        late: list[ServiceBusReceivedMessage] = []
        done: list[_Held] = []
        until = None if self.until is None else utc_ms(self.until)  # as x-opt-enqueued-time
        for message in messages:
            if self._lock_seconds is None and message.locked_until_utc is not None:
                self._lock_seconds = max(1.0, (message.locked_until_utc - dt.datetime.now(dt.UTC)).total_seconds())
            anns = message.amqplink_message.message_annotations or {}  # read once, not per getter
            seq = int(anns.get(SEQUENCE_NUMBER) or 0)
            enqueued = anns.get(ENQUEUED_TIME)
            if seq in self.known:  # a copy of a message of a batch in flight
                self.held[seq] = _Held(receiver, message, seq)
                self.counters.redelivered += 1
            elif seq in self.state.pending:  # emitted in a settled batch, not completed then
                done.append(_Held(receiver, message, seq))
                self.counters.redelivered += 1
            elif until is not None and enqueued is not None and int(enqueued) > until:
                late.append(message)
            else:  # new (a second copy within one batch, its first lock lost, takes its place)
                new[seq] = _Held(receiver, message, seq)
        if done:
            for seq in await self._complete(done):
                self.state.pending.pop(seq, None)
        if late:  # Trigger.AvailableNow: not this query's; back to the entity at once
            self.exhausted = True
            await asyncio.gather(*(receiver.abandon_message(m) for m in late), return_exceptions=True)

    # -- settling -------------------------------------------------------------------------
    async def _complete(self, held: list[_Held]) -> set[int]:
        """Complete ``held`` (each receiver's together: one disposition per run of
        deliveries); the sequence numbers that were."""
        by_receiver: dict[ServiceBusReceiver, list[_Held]] = {}
        for h in held:
            by_receiver.setdefault(h.receiver, []).append(h)
        settled = await asyncio.gather(
            *(receiver.complete_messages([h.message for h in group]) for receiver, group in by_receiver.items())
        )
        done = set()
        for group, outcomes in zip(by_receiver.values(), settled, strict=True):
            for h, outcome in zip(group, outcomes, strict=True):
                if outcome is None:
                    done.add(h.seq)
                elif not isinstance(outcome, ServiceBusError | ValueError | OSError):
                    raise outcome
        self.counters.completed += len(done)
        return done

    async def settle(self, through: int) -> None:
        """Spark committed every batch through ``through``: complete their messages, remember
        the ones that could not be (``pending``), save, forget the batches."""
        if through <= self.state.settled and not any(b <= through for b in self.batches):
            return
        batches = sorted(b for b in self.batches if b <= through)
        sequence_numbers = [seq for b in batches for seq in self.batches[b]]
        held = [self.held[seq] for seq in sequence_numbers if seq in self.held]
        completed = await self._complete(held) if held else set()
        forget_after = time.time() + PENDING_SECONDS
        for seq in sequence_numbers:
            self.held.pop(seq, None)
            self.known.pop(seq, None)
            if seq not in completed:
                self.state.pending[seq] = forget_after
        self.counters.pending = len(self.state.pending)
        self.state.settled = max(self.state.settled, through)
        self.staging.save(self.state)
        self.staging.remove(batches)
        for b in batches:
            del self.batches[b]
        if len(completed) < len(sequence_numbers):
            log.info(
                "servicebus source: %d of the %d messages of batches through %d were not completed (their lock "
                "was lost or they have not come back yet): their next delivery is completed, not emitted",
                len(sequence_numbers) - len(completed), len(sequence_numbers), through,
            )  # fmt: skip

    # -- locks --------------------------------------------------------------------------
    def _start_renewer(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        failing = False
        while self.held or self._sessions.open:
            period = min(10.0, (self._lock_seconds or 30.0) / 4)
            await asyncio.sleep(period)
            try:
                await self.renew_due((self._lock_seconds or 30.0) / 2)
                failing = False
            except (ServiceBusError, OSError) as exc:  # a renewal round that failed: the next one tries again
                level = logging.DEBUG if failing else logging.WARNING  # once per run of failures
                log.log(level, "servicebus source: renewing locks failed: %s: %s", type(exc).__name__, exc)
                failing = True

    async def renew_due(self, margin: float) -> None:
        """Renew every held lock (and open session) that expires within ``margin`` seconds."""
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=margin)
        if self.config.sessions:
            for receiver in list(self._sessions.open):
                session = receiver.session
                if session is not None and (session.locked_until_utc is None or session.locked_until_utc < soon):
                    await session.renew_lock()
                    self.counters.renewed += 1
            return
        due: dict[int, list[_Held]] = {}
        for held in self.held.values():
            until = held.message.locked_until_utc
            if until is None or until < soon:
                due.setdefault(id(held.receiver), []).append(held)
        for group in due.values():
            for start in range(0, len(group), RENEW_BATCH):
                await self._renew(group[start : start + RENEW_BATCH])

    async def _renew(self, group: list[_Held]) -> None:
        receiver = group[0].receiver
        try:
            await receiver.renew_message_locks([h.message for h in group])
            self.counters.renewed += len(group)
            return
        except MessageLockLostError:
            pass
        for held in group:  # one of them is lost: find which, keep renewing the others
            try:
                await receiver.renew_message_lock(held.message)
                self.counters.renewed += 1
            except (MessageLockLostError, ValueError):
                self.counters.locks_lost += 1
                self.held.pop(held.seq, None)  # its next copy is held instead

    async def close(self) -> None:
        """Stop renewing and close the receivers (held locks are let go: those messages come
        back and are recognised by the next reader)."""
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        for receiver in [*self._sessions.open, *([self._receiver] if self._receiver else [])]:
            await receiver.close()
        self._sessions.open.clear()
        self._receiver = None
        await self.client.close()
