"""Active and passive replication senders over two namespaces (seed 003), asyncio.

Both take two ``ServiceBusSender`` objects for the same queue or topic in two
namespaces (two clients), give every message a ``message_id`` when it has none (a
random UUID, assigned before the first send so that every copy of a message carries
the same id), and leave the duplicates to a de-duplicating receiver
(:class:`~amqplink.servicebus.replication.receiver.DeduplicatingReceiver`).

Give the two clients a short retry policy (e.g. ``retry_total=0`` or ``1`` and a
``timeout`` of a few seconds): while a namespace is down, each send waits for that
client's retries to run out before the other namespace's answer counts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from amqplink.message import Message
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch, iter_outgoing, new_message_id
from amqplink.servicebus.replication.breaker import DEFAULT_BREAK_FOR, BreakerState, Circuit, CircuitBreaker
from amqplink.servicebus.replication.outage import ReplicationError, suggests_outage
from amqplink.servicebus.sender import ServiceBusSender

__all__ = [
    "ActiveReplicationSender",
    "PassiveReplicationSender",
    "ReplicationCounters",
    "prepare_messages",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ReplicationCounters:
    """What a replication sender did since it was made."""

    sends: int = 0
    """Calls of ``send_messages`` that succeeded."""
    sent_to_one: int = 0
    """Active: successful sends that only one namespace accepted (no second copy exists)."""
    failed: int = 0
    """Sends that raised because both namespaces refused them."""
    swaps: int = 0
    """Passive: role swaps (active and backup exchanged)."""


SendInput = ServiceBusMessage | Message | Iterable[ServiceBusMessage | Message]


def prepare_messages(message: SendInput) -> list[ServiceBusMessage]:
    """The messages to send, each with a ``message_id``: a ``ServiceBusMessage`` has one
    from its construction; one whose id was set to None, or a plain
    :class:`amqplink.message.Message` without one, gets one (``new_message_id``).

    A :class:`ServiceBusMessageBatch` is refused: it is encoded already, so ids cannot be
    added to its messages; send a list (each sender batches it itself).
    """
    if type(message) is ServiceBusMessage:  # the common case first
        messages = [message]
    elif isinstance(message, ServiceBusMessageBatch):
        raise TypeError(
            "a replication sender takes a message or a list of messages, not a ServiceBusMessageBatch"
            " (its messages are encoded already: ids cannot be given to them); send a list instead"
        )
    elif isinstance(message, ServiceBusMessage | Message | Iterable):
        messages = list(iter_outgoing(message))
    else:
        raise TypeError(f"a replication sender sends a message or a list of messages, not {type(message).__name__}")
    for outgoing in messages:
        if outgoing.message_id is None:
            outgoing.message_id = new_message_id()
    return messages


def _release(waiter: asyncio.Future[None], *_: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _accepted(copy: asyncio.Future[None]) -> bool:
    return copy.done() and not copy.cancelled() and copy.exception() is None


def _payload(messages: list[ServiceBusMessage]) -> ServiceBusMessage | list[ServiceBusMessage]:
    return messages[0] if len(messages) == 1 else messages


class _Logged:
    """Logs a namespace's failures once per outage (when it starts failing, and when it is back)."""

    def __init__(self) -> None:
        self.failing: set[int] = set()

    def failed(self, index: int, sender: ServiceBusSender, error: BaseException) -> None:
        if index not in self.failing:
            self.failing.add(index)
            log.warning("replication: namespace %d (%s) refused a send: %s", index, _where(sender), error)

    def succeeded(self, index: int, sender: ServiceBusSender) -> None:
        if index in self.failing:
            self.failing.discard(index)
            log.warning("replication: namespace %d (%s) accepts sends again", index, _where(sender))


def _where(sender: ServiceBusSender) -> str:
    return f"{sender.fully_qualified_namespace}/{sender.entity_name}"


class _TwoSenders:
    """What both replication senders share: two senders, closed together."""

    def __init__(self, first: ServiceBusSender, second: ServiceBusSender, kind: str) -> None:
        if first is second:
            raise ValueError(f"{kind} replication needs two different senders (one per namespace)")
        self.counters = ReplicationCounters()

    def _pair(self) -> tuple[ServiceBusSender, ServiceBusSender]:
        raise NotImplementedError

    async def close(self) -> None:
        """Close both senders."""
        await asyncio.gather(*(sender.close() for sender in self._pair()))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class ActiveReplicationSender(_TwoSenders):
    """Send every message to both namespaces, with the same message id (seed 003: "Any
    client that sends a message sends two copies of the same message").

    Semantics chosen: ``send_messages`` succeeds when **at least one** namespace accepted
    the message(s), and raises :class:`ReplicationError` (both errors attached) when
    neither did. Why: replication is there to keep sending while one namespace is down;
    requiring both would make the sender fail whenever either namespace fails, less
    available than one namespace alone. The cost: a message accepted by one namespace has
    one copy only (:attr:`counters` ``.sent_to_one`` counts them; :attr:`degraded` names
    the namespaces whose last send failed), so a disaster in that namespace before it is
    received loses it. A list is sent to each namespace with that sender's own batching;
    it succeeds when one namespace accepted all of it (a list both namespaces accepted
    only in part raises: some of its messages may be in neither).

    Both copies are sent at once (latency: the slower namespace's, cost: twice the
    operations, as the seed notes). A namespace whose send failed with an outage error is
    skipped for ``break_for`` seconds (:mod:`.breaker`; 0: never skipped), then probed in
    the background; while one is skipped every send waits on the other only. The two
    senders are used, not owned: :meth:`close` closes both.
    """

    def __init__(
        self, primary: ServiceBusSender, secondary: ServiceBusSender, *, break_for: float = DEFAULT_BREAK_FOR
    ) -> None:
        super().__init__(primary, secondary, "active")
        self.senders = (primary, secondary)
        self._log = _Logged()
        self._breakers = (CircuitBreaker(break_for), CircuitBreaker(break_for))
        self._probes: dict[int, asyncio.Task[None]] = {}
        self._waiters: tuple[set[asyncio.Future[None]], set[asyncio.Future[None]]] = (set(), set())
        """Sends waiting for a copy to the namespace, released when its breaker opens."""
        self._background: set[asyncio.Future[None]] = set()
        """Copies no send waits for any more (their namespace's breaker opened while they ran)."""
        if break_for:
            for index, sender in enumerate(self.senders):
                sender.attempt_watcher = functools.partial(self._attempt_failed, index)

    def _pair(self) -> tuple[ServiceBusSender, ServiceBusSender]:
        return self.senders

    @property
    def degraded(self) -> tuple[int, ...]:
        """Indexes (0 = primary, 1 = secondary) of the namespaces whose last send failed."""
        return tuple(sorted(self._log.failing))

    @property
    def breakers(self) -> tuple[BreakerState, BreakerState]:
        """Each namespace's circuit breaker: ``closed`` (sent to) or ``open`` (skipped)."""
        first, second = self._breakers
        return first.snapshot(), second.snapshot()

    async def send_messages(self, message: SendInput, *, timeout: float | None = None) -> None:
        """Send to both namespaces at once (only to the one whose breaker is closed while the
        other's is open); return once one accepted and the other answered, or its breaker
        opened (its copy goes on in the background); :class:`ReplicationError` if none did."""
        payload = _payload(prepare_messages(message))
        chosen = [i for i, breaker in enumerate(self._breakers) if breaker.allows] or [0, 1]  # all open: try all
        for index in {0, 1} - set(chosen):
            self._breakers[index].skipped += 1
        copies = {i: asyncio.ensure_future(self.senders[i].send_messages(payload, timeout=timeout)) for i in chosen}
        try:
            for index, copy in copies.items():
                await self._answer_or_open(index, copy)
            running = [copy for copy in copies.values() if not copy.done()]
            if running and not any(_accepted(copy) for copy in copies.values()):  # nothing accepted yet: wait
                await asyncio.wait(running)
        except BaseException:  # cancelled: the copies too
            for copy in copies.values():
                copy.cancel()
            raise
        errors: list[BaseException] = []
        for index, copy in copies.items():
            if not copy.done():
                self._in_background(index, copy)
                continue
            result = copy.exception() if not copy.cancelled() else asyncio.CancelledError()
            if result is not None and not isinstance(result, ServiceBusError):
                raise result  # bad input or a bug: not a namespace's answer
            self._answered(index, result)
            if result is not None:
                errors.append(result)
        if len(errors) == len(copies):
            self.counters.failed += 1
            raise ReplicationError(
                "neither namespace accepted the send", errors, entity=self.senders[0].entity_name
            ) from errors[-1]
        self.counters.sends += 1
        if len(copies) - len(errors) == 1:
            self.counters.sent_to_one += 1

    async def _answer_or_open(self, index: int, copy: asyncio.Future[None]) -> None:
        """Wait for ``copy``'s answer, or until namespace ``index``'s breaker opens."""
        if copy.done() or not self._breakers[index].allows:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        copy.add_done_callback(functools.partial(_release, waiter))
        waiters = self._waiters[index]
        waiters.add(waiter)
        try:
            await waiter
        finally:
            waiters.discard(waiter)

    def _answered(self, index: int, result: BaseException | None) -> None:
        sender = self.senders[index]
        if isinstance(result, ServiceBusError):
            self._log.failed(index, sender, result)
            self._attempt_failed(index, result)
        elif result is None:
            self._log.succeeded(index, sender)
            self._breakers[index].reset()

    def _attempt_failed(self, index: int, error: BaseException) -> None:
        """An attempt (or a send) to namespace ``index`` failed: an outage error opens its
        breaker at once, and the sends waiting on it stop waiting."""
        breaker = self._breakers[index]
        if not suggests_outage(error) or not breaker.trip(error):
            return
        self._probe_later(index)
        for waiter in list(self._waiters[index]):
            _release(waiter)

    def _in_background(self, index: int, copy: asyncio.Future[None]) -> None:
        """A copy no send waits for: its answer, when it comes, is noted (never lost)."""
        self._background.add(copy)

        def late(done: asyncio.Future[None]) -> None:
            self._background.discard(done)
            result = asyncio.CancelledError() if done.cancelled() else done.exception()
            if result is None or isinstance(result, ServiceBusError):
                self._answered(index, result)

        copy.add_done_callback(late)

    def _probe_later(self, index: int) -> None:
        """After ``break_for``, attach to the namespace (no message: a probe must not reach a
        receiver) until that works; then its breaker closes."""
        breaker = self._breakers[index]
        sender = self.senders[index]

        async def probe() -> None:
            try:
                while breaker.state is Circuit.OPEN:
                    await asyncio.sleep(breaker.break_for)
                    try:
                        await sender.create_message_batch()  # attaches the link (again) if need be
                    except (ServiceBusError, OSError, ValueError) as exc:
                        breaker.last_error = f"{type(exc).__name__}: {exc}"
                        continue
                    if breaker.reset():
                        log.warning("replication: namespace %d (%s) answers again; sending to it again", index,
                                    _where(sender))  # fmt: skip
            finally:
                self._probes.pop(index, None)

        if index not in self._probes:
            log.warning("replication: namespace %d (%s) skipped for %.1f s after: %s", index, _where(sender),
                        breaker.break_for, breaker.last_error)  # fmt: skip
            self._probes[index] = asyncio.get_running_loop().create_task(probe())

    async def close(self) -> None:
        """Stop the probes and the copies still trying in the background; close both senders."""
        pending = [*self._probes.values(), *self._background]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await super().close()

    def __repr__(self) -> str:
        return f"ActiveReplicationSender({_where(self.senders[0])!r}, {_where(self.senders[1])!r})"


class PassiveReplicationSender(_TwoSenders):
    """Send to the active namespace; on a failure that suggests it is down, send to the
    backup and swap roles (seed 003).

    "If the operation on the active entity fails with an error code that indicates the
    datacenter that hosts the active entity might be unavailable, the client sends a copy
    of the message to the backup entity. At that point the active and the backup entities
    switch roles [...]. If both send operations fail, the roles of the two entities
    remain unchanged and an error is returned." Which errors count is
    :func:`suggests_outage` (server-busy and authorisation errors do not: they are raised
    as they are, and the roles stay). Both failing raises :class:`ReplicationError`.

    In the fault-free case one operation per send, as without replication. What it
    cannot avoid (seed 003), and why receivers must read both namespaces and
    de-duplicate: a message accepted by the old active namespace just before it went
    down stays there until it is back (delayed), or forever after a disaster (lost); a
    send that timed out but was stored is sent again to the backup (a duplicate, same
    message id). :attr:`active` is the sender in use; :attr:`counters` ``.swaps`` counts
    swaps.
    """

    def __init__(self, active: ServiceBusSender, backup: ServiceBusSender) -> None:
        super().__init__(active, backup, "passive")
        self._roles = (active, backup)

    def _pair(self) -> tuple[ServiceBusSender, ServiceBusSender]:
        return self._roles

    @property
    def active(self) -> ServiceBusSender:
        """The sender every send goes to first."""
        return self._roles[0]

    @property
    def backup(self) -> ServiceBusSender:
        """The sender a send goes to when the active namespace seems down."""
        return self._roles[1]

    async def send_messages(self, message: SendInput, *, timeout: float | None = None) -> None:
        """Send to the active namespace, or to the backup (then swapping roles) when it seems down."""
        payload = _payload(prepare_messages(message))
        active, backup = self._roles
        try:
            await active.send_messages(payload, timeout=timeout)
        except ServiceBusError as exc:
            if not suggests_outage(exc):
                raise
            first = exc
        else:
            self.counters.sends += 1
            return
        try:
            await backup.send_messages(payload, timeout=timeout)
        except ServiceBusError as exc:
            self.counters.failed += 1
            raise ReplicationError(
                "the active namespace seems down and the backup refused the send too; roles unchanged",
                (first, exc),
                entity=active.entity_name,
            ) from exc
        self.counters.sends += 1
        if self._roles == (active, backup):  # concurrent sends that failed over swap once
            self._roles = (backup, active)
            self.counters.swaps += 1
            log.warning(
                "passive replication: %s seems down (%s); %s is now the active namespace",
                _where(active),
                first,
                _where(backup),
            )

    def __repr__(self) -> str:
        return f"PassiveReplicationSender(active={_where(self.active)!r}, backup={_where(self.backup)!r})"
