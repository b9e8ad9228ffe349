"""Queues of the embedded broker: stored messages, consumers, dispatch by credit.

A queue holds encoded messages (the transfer payloads, unchanged) and hands them
to consumer links as their credit allows, round robin. A message sent unsettled
stays the queue's until the consumer's outcome: ``accepted`` removes it,
``released`` puts it back at the head, ``modified`` puts it back unless
``undeliverable-here``, ``rejected`` moves it to the dead-letter list. A consumer
that goes away gives its unsettled messages back.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amqplink.engine.link import Delivery, SenderLink
from amqplink.protocol.definitions import Accepted, Modified, Rejected, Released

__all__ = ["Consumer", "Queue"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Consumer:
    """A sending link of the broker attached to a queue, and how to flush its socket."""

    link: SenderLink
    flush: Callable[[], None]


@dataclass(eq=False)
class Queue:
    """One queue: FIFO of payloads, its consumers, and what they hold unsettled."""

    name: str
    messages: deque[bytes] = field(default_factory=deque)
    consumers: list[Consumer] = field(default_factory=list)
    dead_letters: list[tuple[bytes, Any]] = field(default_factory=list)
    _next: int = 0

    def __len__(self) -> int:
        return len(self.messages)

    def put(self, payload: bytes) -> None:
        """Store a message and offer it to a consumer with credit."""
        self.messages.append(payload)
        self.dispatch()

    def add_consumer(self, consumer: Consumer) -> None:
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
        """Send messages to consumers while any has credit (round robin)."""
        messages = self.messages
        while messages:
            consumers = [c for c in self.consumers if c.link.is_attached and c.link.credit > 0]
            if not consumers:
                return
            for consumer in consumers:
                if not messages:
                    break
                self._send(consumer, messages.popleft())

    def _send(self, consumer: Consumer, payload: bytes) -> None:
        link = consumer.link
        delivery = link.send(payload)
        if not delivery.settled:
            delivery.context = payload
        consumer.flush()

    def on_outcome(self, delivery: Delivery, state: Any) -> None:
        """A consumer's disposition: apply the outcome (3.4) to the message it held."""
        payload = delivery.context
        if payload is None:
            return
        if isinstance(state, Accepted):
            delivery.context = None
        elif isinstance(state, Released) or (isinstance(state, Modified) and not state.undeliverable_here):
            delivery.context = None
            self.messages.appendleft(payload)
            self.dispatch()
        elif isinstance(state, Modified | Rejected):
            delivery.context = None
            self.dead_letters.append((payload, state))
            log.info("queue %r: message dead-lettered (%s)", self.name, type(state).__name__.lower())
