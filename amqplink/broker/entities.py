"""Queues of the embedded broker: stored messages, consumers, dispatch by credit.

A queue holds encoded messages (the transfer payloads, unchanged) and hands them
to consumer links as their credit allows, round robin. A message sent unsettled
stays the queue's until the consumer's outcome: ``accepted`` removes it,
``released`` puts it back at the head, ``modified`` puts it back unless
``undeliverable-here``, ``rejected`` moves it to the dead-letter list. A consumer
that goes away gives its unsettled messages back.

A queue is bounded: ``max_bytes`` counts the messages it stores, those its consumers
hold unsettled and its dead letters; a message that would pass it is refused
(:meth:`PlainQueue.put` returns ``False``). Above half of it (the high-water mark)
producers are stopped by credit until the queue falls below a quarter of it. A
consumer whose socket cannot take more (``writable()`` false) gets nothing until it
can.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amqplink.engine import errors
from amqplink.engine.link import Delivery, SenderLink
from amqplink.protocol.definitions import Accepted, Error, Modified, Rejected, Released

__all__ = ["DEFAULT_MAX_QUEUE_BYTES", "Consumer", "PlainQueue", "Queue"]

log = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_BYTES = 256 << 20
"""A queue's size limit in bytes (stored, held unsettled by consumers, dead-lettered)."""
# Bytes handed to one consumer between two writes to its socket: a socket that cannot
# keep up pauses the dispatch after at most this much more.
FLUSH_EVERY = 256 << 10


def _always() -> bool:
    """A consumer's ``writable`` when its socket is not watched: always room."""
    return True


def _nothing() -> None:
    """A consumer's ``flush_now`` when there is nothing to flush."""
    return None


@dataclass(eq=False)
class Consumer:
    """A sending link of the broker attached to a queue, and how to flush its socket."""

    link: SenderLink
    flush: Callable[[], None]
    """Write what the link holds at the end of this loop turn (coalescing)."""
    flush_now: Callable[[], None] = _nothing
    """Write what the link holds now, so that a slow socket can push back."""
    writable: Callable[[], bool] = _always
    """False while the consumer's socket cannot take more."""
    unflushed: int = 0


@dataclass(eq=False)
class PlainQueue:
    """One queue of the plain broker (``Broker()``): FIFO of payloads, its consumers, and
    what they hold unsettled. (A Service Bus queue is :class:`amqplink.broker.namespace.Queue`.)"""

    name: str
    messages: deque[bytes] = field(default_factory=deque)
    consumers: list[Consumer] = field(default_factory=list)
    dead_letters: list[tuple[bytes, Any]] = field(default_factory=list)
    max_bytes: int = DEFAULT_MAX_QUEUE_BYTES
    size: int = 0
    """Bytes counted against ``max_bytes``."""
    _starved: dict[object, Callable[[], None]] = field(default_factory=dict)
    _full: bool = False

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def above_high_water(self) -> bool:
        """True from half of ``max_bytes``: producers get no more credit."""
        return self.size >= self.max_bytes // 2

    def put(self, payload: bytes) -> bool:
        """Store a message and offer it to a consumer with credit; ``False`` (and the
        message is not stored) when it would take the queue past ``max_bytes``."""
        if self.size + len(payload) > self.max_bytes:
            if not self._full:  # one report per episode, not one per refused message
                self._full = True
                log.warning("%s", self.refusal(len(payload)))
            return False
        self.size += len(payload)
        self.messages.append(payload)
        self.dispatch()
        return True

    def refusal(self, payload_size: int) -> str:
        """Why a message of ``payload_size`` bytes was refused, and what to do."""
        return (
            f"queue {self.name!r} is full: {self.size} of {self.max_bytes} bytes used, the message has"
            f" {payload_size}; receive (or purge) messages, or start the broker with a larger max_queue_bytes"
        )

    def wait_for_space(self, producer: object, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the queue is below its low-water mark (a quarter of
        ``max_bytes``); ``producer`` identifies it for :meth:`forget_producer`."""
        self._starved[producer] = resume

    def forget_producer(self, producer: object) -> None:
        """Forget a producer waiting for room (its link is gone)."""
        self._starved.pop(producer, None)

    def _release(self, size: int) -> None:
        self.size -= size
        if self.size < self.max_bytes // 4:
            self._full = False
            if self._starved:
                starved, self._starved = self._starved, {}
                for resume in starved.values():
                    resume()

    def add_consumer(self, consumer: Consumer) -> None:
        """Add a consumer and deliver to it what it has credit for."""
        self.consumers.append(consumer)
        self.dispatch()

    def remove_consumer(self, link: SenderLink) -> None:
        """Forget a consumer; its unsettled messages go back to the head, in order."""
        self.consumers = [c for c in self.consumers if c.link is not link]
        held = [d for d in link.unsettled.values() if d.context is not None]
        held += [d for d in link.queue if d.context is not None and not d.settled]
        for delivery in sorted(held, key=lambda d: d.delivery_id or 0, reverse=True):
            self.messages.appendleft(delivery.context)
            delivery.context = None
        self.dispatch()

    def dispatch(self) -> None:
        """Send messages to consumers while any has credit and a writable socket (round robin)."""
        messages = self.messages
        while messages:
            consumers = [c for c in self.consumers if c.link.is_attached and c.link.credit > 0 and c.writable()]
            if not consumers:
                return
            for consumer in consumers:
                if not messages:
                    break
                self._send(consumer, messages.popleft())

    def _send(self, consumer: Consumer, payload: bytes) -> None:
        link = consumer.link
        try:
            delivery = link.send(payload)
        except errors.MessageSizeExceededError as exc:
            # "Any attempt to deliver a message larger than this results in a
            # message-size-exceeded link-error." (2.7.3): the consumer's link ends, the
            # message stays at the head for the others.
            self.messages.appendleft(payload)
            log.info("queue %r: detaching consumer %r: %s", self.name, link.name, exc)
            link.detach(Error(condition=exc.condition, description=str(exc)))
            consumer.flush()
            return
        if delivery.settled:
            self._release(len(payload))
        else:
            delivery.context = payload
        consumer.unflushed += len(payload)
        if consumer.unflushed >= FLUSH_EVERY:
            consumer.unflushed = 0
            consumer.flush_now()
        else:
            consumer.flush()

    def on_outcome(self, delivery: Delivery, state: Any) -> None:
        """A consumer's disposition: apply the outcome (3.4) to the message it held."""
        payload = delivery.context
        if payload is None:
            return
        if isinstance(state, Accepted):
            delivery.context = None
            self._release(len(payload))
        elif isinstance(state, Released) or (isinstance(state, Modified) and not state.undeliverable_here):
            delivery.context = None
            self.messages.appendleft(payload)
            self.dispatch()
        elif isinstance(state, Modified | Rejected):
            delivery.context = None
            self.dead_letters.append((payload, state))
            log.info("queue %r: message dead-lettered (%s)", self.name, type(state).__name__.lower())


Queue = PlainQueue
"""The old name of :class:`PlainQueue` (``amqplink.broker.Queue``), kept for existing imports."""
