"""The syphon: moves parked messages from the backlog queues to their real destinations.

Seed 001: "At least one executable program in the application should be actively running
the syphon. The syphon performs a long poll receive"; "the syphon delivers the messages
from all the various backlog queues to the proper destination entities". Here, per
backlog queue of the client (several processes may run it at once: peek-lock makes each
message theirs alone), a peek-lock receiver long-polls; each message is restored
(:func:`.parking.restore`) and sent to the primary; it is completed only once the primary
accepted it, abandoned otherwise (at least once: a message forwarded and then not
completed is forwarded again, with the same message id, so duplicate detection on the
destination removes the repeat). Locks are renewed while a batch is being forwarded.

"Once the primary or secondary MessagingFactory faults or is closed without its partner
also being faulted/closed [...] if the other MessagingFactory is not closed within 5
seconds, the syphon will fault the still open MessagingFactory": :meth:`Syphon._coordinate`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import math
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

from amqplink.aio.connection import Connection
from amqplink.aio.errors import AMQPError
from amqplink.codec.types import Symbol
from amqplink.protocol.definitions import Error
from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.lock_renewer import renew_ahead
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusReceivedMessage
from amqplink.servicebus.paired.parking import NotParkedError, restore
from amqplink.servicebus.receiver import ServiceBusReceiver
from amqplink.servicebus.retry import RetryError, RetryHooks, RetryPolicy, run_with_retry
from amqplink.servicebus.sender import ServiceBusSender

if TYPE_CHECKING:
    from amqplink.servicebus.paired.pairing import Pairing

__all__ = ["COORDINATION_GRACE", "Syphon"]

log = logging.getLogger(__name__)

SYPHON_BATCH = 256
"""Messages one receive takes at most."""
COORDINATION_GRACE = 5.0
"""Seconds the partner connection may stay open after one side faulted (seed 001: 5 s)."""
MAX_DESTINATIONS = 64
"""Destination senders the syphon keeps open at most (x-ms-path comes from the messages)."""
MAX_BACKOFF = 5.0
"""Seconds at most between two attempts after a failed forward or receive."""

_Errors = (ServiceBusError, AMQPError, OSError, TimeoutError)
_UNBOUNDED = RetryPolicy(timeout=math.inf)
"""The syphon's receives and connections are tried again until it stops (:class:`_Steady`)."""


class _Steady(RetryHooks):
    """The syphon's retries (through the one retry loop): any failure is tried again after
    its ``backoff``, until the syphon stops; each is logged at ``level``."""

    __slots__ = ("level", "syphon", "what")

    def __init__(self, syphon: Syphon, what: str, level: int) -> None:
        self.syphon, self.what, self.level = syphon, what, level

    def delay(
        self, policy: RetryPolicy, retried_times: int, error: RetryError, *, now: float, deadline: float
    ) -> float | None:
        syphon = self.syphon
        return None if syphon._stopping else syphon.backoff

    def retrying(
        self, entity: str | None, error: RetryError, retried_times: int, policy: RetryPolicy, delay: float
    ) -> None:
        log.log(self.level, "syphon: %s failed (%s); again in %.1f s", self.what, error, delay)


class Syphon:
    """The syphon of one paired client (started by ``enable_syphon=True``)."""

    def __init__(self, pairing: Pairing) -> None:
        assert pairing.secondary is not None
        self.pairing = pairing
        self.secondary: ConnectionHolder = pairing.secondary._holder
        self.primary: ConnectionHolder = pairing.primary
        self.policy = pairing.secondary._policy
        self.wait = pairing.options.syphon_wait_seconds
        self.backoff = min(MAX_BACKOFF, pairing.ping_seconds)
        self.forwarded = 0
        self.moved: Counter[str] = Counter()
        """Messages moved to their destination, per backlog queue."""
        self.oldest: dict[str, float] = {}
        """Per backlog queue, when the oldest message of the last batch received was parked (Unix
        seconds): a batch the destination keeps refusing is received again, so its age grows."""
        self.faulted = 0
        """Times a partner connection was faulted by the close/fault coordination."""
        self._senders: OrderedDict[str, ServiceBusSender] = OrderedDict()
        """Senders to the destinations, least recently used first (at most :data:`MAX_DESTINATIONS`)."""
        self._in_use: Counter[str] = Counter()
        """Forwards in flight per destination (their senders are not closed under them)."""
        self._closing: set[asyncio.Task[None]] = set()
        self._receivers: list[ServiceBusReceiver] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    @property
    def running(self) -> bool:
        """Whether a drain or the coordination task still runs."""
        return any(not task.done() for task in self._tasks)

    def start(self) -> None:
        """Start a drain task per backlog queue and the coordination task, on the running loop."""
        loop = asyncio.get_running_loop()
        for name in self.pairing.names:
            self._tasks.append(loop.create_task(self._drain(name), name=f"syphon {name}"))
        self._tasks.append(loop.create_task(self._coordinate(), name="syphon coordination"))

    async def close(self) -> None:
        """Stop the tasks, wait for them and for the senders being closed, then close the links."""
        self._stopping = True  # (a cancellation that asyncio.wait_for swallowed still ends the loops)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._closing, return_exceptions=True)
        for handler in [*self._receivers, *self._senders.values()]:
            await handler.close()
        self._senders.clear()
        self._receivers.clear()

    # -- draining -----------------------------------------------------------------------
    async def _drain(self, name: str) -> None:
        receiver = ServiceBusReceiver(self.secondary, name, policy=self.policy, queue_name=name)
        self._receivers.append(receiver)
        again = _Steady(self, f"receiving from {name!r}", logging.INFO)

        async def receive(_remaining: float) -> list[ServiceBusReceivedMessage]:
            return await receiver.receive_messages(max_message_count=SYPHON_BATCH, max_wait_time=self.wait)

        while not self._stopping:
            try:
                batch = await run_with_retry(receive, _UNBOUNDED, entity=name, hooks=again)
            except _Errors:  # (given up: the syphon stops)
                continue
            times = [m.enqueued_time_utc for m in batch if m.enqueued_time_utc is not None]
            if times:
                self.oldest[name] = min(times).timestamp()
            elif not batch:
                self.oldest.pop(name, None)  # (nothing came within the wait: the queue is empty)
            if batch and not await self._forward(receiver, batch):
                await asyncio.sleep(self.backoff)  # the destination refused: give it time

    async def _forward(self, receiver: ServiceBusReceiver, batch: list[ServiceBusReceivedMessage]) -> bool:
        """Forward ``batch``, each message completed as soon as the primary accepted its forward
        (so a crash repeats at most the forwards in flight, not the batch), abandoned if the
        forward failed. True if all went."""
        renewing = asyncio.get_running_loop().create_task(self._renew(receiver, batch))
        try:
            moves: list[tuple[ServiceBusReceivedMessage, str, ServiceBusMessage]] = []
            for message in batch:
                try:
                    destination, restored = restore(message.amqplink_message)
                except NotParkedError as exc:
                    log.warning("syphon: %s in %r; dead-lettered", exc, receiver.entity_name)
                    await _settle(receiver.dead_letter_message(message, "NotParked", str(exc)))
                    continue
                moves.append((message, destination, restored))
            moved = await asyncio.gather(*(self._move(receiver, *move) for move in moves))
            return all(ok is not None for ok in moved)
        finally:
            renewing.cancel()

    async def _move(
        self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage, destination: str,
        restored: ServiceBusMessage,
    ) -> bool | None:  # fmt: skip
        """One parked message: forwarded, then completed at once. True: moved; False: forwarded,
        its completion failed (it comes again); None: the forward failed (abandoned)."""
        try:
            await self._send(destination, restored)
        except (*_Errors, ValueError) as exc:  # (ValueError: a sender closed by the client's close)
            log.info("syphon: forwarding to %r failed (%s); abandoned", destination, exc)
            await _settle(receiver.abandon_message(message))
            return None
        if not await _settle(receiver.complete_message(message)):
            return False  # forwarded, not completed: it comes again (at least once)
        self.forwarded += 1
        self.moved[receiver.entity_name] += 1
        self.pairing.syphoned += 1
        return True

    async def _send(self, destination: str, message: ServiceBusMessage) -> None:
        sender = self._senders.get(destination)
        if sender is None or sender._closed:
            policy = dataclasses.replace(self.policy, retry_total=0)
            sender = self._senders[destination] = ServiceBusSender(self.primary, destination, policy=policy)
        else:
            self._senders.move_to_end(destination)
        self._in_use[destination] += 1
        try:
            self._evict()
            await sender.send_messages(message)
        finally:
            self._in_use[destination] -= 1
            if not self._in_use[destination]:
                del self._in_use[destination]
                self._evict()  # (the ones kept while in use beyond the bound go once idle)

    def _evict(self) -> None:
        """Close the least recently used senders beyond :data:`MAX_DESTINATIONS`, never one that
        a forward still uses (closing it under a send made it fail)."""
        idle = [name for name in self._senders if name not in self._in_use]
        for name in idle[: max(0, len(self._senders) - MAX_DESTINATIONS)]:
            closing = asyncio.get_running_loop().create_task(self._senders.pop(name).close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    async def _renew(self, receiver: ServiceBusReceiver, batch: list[ServiceBusReceivedMessage]) -> None:
        """Keep the batch's locks while it is being forwarded (one task per batch)."""
        while True:
            until = min((m.locked_until_utc for m in batch if m.locked_until_utc is not None), default=None)
            if until is None:
                return
            now = dt.datetime.now(dt.UTC)
            span = (until - now).total_seconds()
            await asyncio.sleep(max(0.0, span - renew_ahead(span)))
            for message in batch:
                if not message._settled:
                    try:
                        await receiver.renew_message_lock(message)
                    except _Errors as exc:
                        log.info("syphon: renewing a lock failed (%s)", exc)

    # -- close/fault coordination ------------------------------------------------------------
    async def _coordinate(self) -> None:
        """When one side's connection ends and the other's has not within 5 s, end it too."""
        again = _Steady(self, "reaching a namespace", logging.DEBUG)

        async def connections(_remaining: float) -> tuple[Connection, Connection]:
            return await self.primary.connection(), await self.secondary.connection()

        while not self._stopping:
            try:
                primary, secondary = await run_with_retry(connections, _UNBOUNDED, hooks=again)
            except _Errors:  # (given up: the syphon stops)
                continue
            await self._pair_closed(primary, secondary)

    async def _pair_closed(self, primary: Connection, secondary: Connection) -> None:
        waits = {
            asyncio.ensure_future(primary.wait_closed()): secondary,
            asyncio.ensure_future(secondary.wait_closed()): primary,
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        ended = next(iter(done))
        partner = waits[ended]
        closed = primary if partner is secondary else secondary
        try:
            await asyncio.wait_for(partner.wait_closed(), COORDINATION_GRACE)
            return
        except TimeoutError:
            pass
        self.faulted += 1
        log.warning(
            "syphon: the connection to %s ended (%s) and its partner %s did not within %.0f s; faulting it too",
            closed.endpoint.url, closed.error, partner.endpoint.url, COORDINATION_GRACE,
        )  # fmt: skip
        reason = f"its paired connection to {closed.endpoint.url} ended"
        await partner.close(Error(Symbol("amqp:connection:forced"), reason))


async def _settle(settlement: Any) -> bool:
    try:
        await settlement
    except _Errors as exc:
        log.info("syphon: settling failed (%s); the message will be received again", exc)
        return False
    return True
