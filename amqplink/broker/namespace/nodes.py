"""What a namespace's addresses name: its queues, topics and subscriptions (partitioned or
not), and :class:`Node`, the node one address resolves to.

A topic holds its scheduled messages itself (:meth:`Topic.schedule`) until the clock fans
them out (:mod:`.clock`); a copy that a subscription could take neither in itself nor in its
dead-letter queue then is held back on the topic's schedule for that subscription alone
(:meth:`Topic.hold_back`), so a message the topic acknowledged is never dropped.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

from amqplink.broker.config import EntityProperties, RuleConfig
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import MESSAGE_NOT_FOUND, RESOURCE_LIMIT_EXCEEDED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.partitioned import PartitionedEntity, Partitions, partitioned_dead_letter_queue
from amqplink.codec.types import Symbol

__all__ = [
    "HELD_FOR",
    "HELD_SINCE",
    "AnyQueue",
    "AnySubscription",
    "Node",
    "PartitionedQueue",
    "PartitionedSubscription",
    "Queue",
    "Subscription",
    "Topic",
    "entity_path",
    "unheld",
]


HELD_FOR = Symbol("x-amqplink-held-for")
"""Annotates a copy held back on a topic's schedule (:meth:`Topic.hold_back`): the key of
the subscription it is for (a durable store keeps it with the message; taken off before
the copy is placed)."""
HELD_SINCE = Symbol("x-amqplink-held-since")
"""Annotates a copy held back: when it was first held back, in seconds (the clock backs off from it)."""


def entity_path(address: str) -> str:
    """The entity path in an address: ``amqps://host/q/$management`` -> ``q/$management``."""
    if "://" in address:
        rest = address.split("://", 1)[1]
        address = rest.split("/", 1)[1] if "/" in rest else ""
    return address.strip("/")


class Queue(Entity):
    """A queue: an entity with duplicate detection and its dead-letter queue."""

    def __init__(self, name: str, properties: EntityProperties) -> None:
        super().__init__(name, properties)
        self.name = name
        self.duplicates = (
            DuplicateDetector(properties.duplicate_detection_window)
            if properties.requires_duplicate_detection
            else None
        )
        self.dead_letter_queue = Entity(f"{name}/$DeadLetterQueue", properties, is_dead_letter_queue=True)


class Subscription(Entity):
    """A topic subscription: an entity with rules and its dead-letter queue."""

    def __init__(self, topic: str, name: str, properties: EntityProperties, rules: tuple[RuleConfig, ...]) -> None:
        super().__init__(f"{topic}/Subscriptions/{name}", properties)
        self.name = name
        self.rules = rules
        self.dead_letter_queue = Entity(f"{self.path}/$DeadLetterQueue", properties, is_dead_letter_queue=True)


class PartitionedQueue(PartitionedEntity):
    """A queue made of fragments (``EnablePartitioning``): what :class:`Queue` adds to its
    messages, for a :class:`PartitionedEntity`. Duplicates are detected per fragment
    (:attr:`Partitions.duplicates`), so the queue itself has no detector."""

    def __init__(self, name: str, properties: EntityProperties, partitions: Partitions) -> None:
        super().__init__(name, properties, partitions)
        self.name = name
        self.duplicates: DuplicateDetector | None = None
        self.dead_letter_queue = partitioned_dead_letter_queue(name, properties, partitions)
        for fragment in self.fragments:  # (a fragment has none of its own)
            fragment.owner_dead_letter_queue = self.dead_letter_queue


class PartitionedSubscription(PartitionedEntity):
    """A subscription of a partitioned topic (what :class:`Subscription` adds to its
    messages, for a :class:`PartitionedEntity`): fragments sharing the topic's."""

    def __init__(
        self, topic: str, name: str, properties: EntityProperties, rules: tuple[RuleConfig, ...], partitions: Partitions
    ) -> None:
        super().__init__(f"{topic}/Subscriptions/{name}", properties, partitions)
        self.name = name
        self.rules = rules
        self.dead_letter_queue = partitioned_dead_letter_queue(self.path, properties, partitions)
        for fragment in self.fragments:  # (a fragment has none of its own)
            fragment.owner_dead_letter_queue = self.dead_letter_queue


AnyQueue = Queue | PartitionedQueue
"""A queue of the namespace, partitioned or not."""
AnySubscription = Subscription | PartitionedSubscription
"""A topic's subscription, partitioned or not."""


class Topic:
    """A topic: fans every message out to the subscriptions whose rules pass it."""

    partitions: Partitions | None = None
    """Set on a partitioned topic: the fragments its subscriptions share."""

    def __init__(self, name: str, properties: EntityProperties) -> None:
        self.name = name
        self.path = name
        self.properties = properties
        self.subscriptions: dict[str, AnySubscription] = {}
        self.duplicates = (
            DuplicateDetector(properties.duplicate_detection_window)
            if properties.requires_duplicate_detection
            else None
        )
        self._next_sequence = 1
        self._scheduled: dict[int, tuple[float, Envelope]] = {}
        self.scheduled_bytes = 0
        self._schedule_heap: list[tuple[float, int]] = []
        self._held: dict[int, str] = {}
        """The scheduled messages that are copies held back, by sequence number: the key of their subscription."""
        self.on_scheduled: Callable[[int, float, Envelope | None], None] | None = None
        """Told of each scheduled message (sequence number, time, envelope) and of each
        that leaves the schedule (envelope ``None``): a durable store keeps them."""

    def __repr__(self) -> str:
        return f"Topic({self.name!r}, subscriptions={list(self.subscriptions)})"

    @property
    def scheduled_count(self) -> int:
        """Messages scheduled on the topic, not yet fanned out."""
        return len(self._scheduled)

    @property
    def scheduled_sequence_numbers(self) -> list[int]:
        """Sequence numbers of the messages scheduled on the topic."""
        return list(self._scheduled)

    def check_schedule(self, envelopes: list[Envelope], coming: int = 0, coming_bytes: int = 0) -> None:
        """``amqp:resource-limit-exceeded`` if holding ``envelopes`` as well would take the
        topic's schedule past its limits (its message count, its bytes); changes nothing.
        ``coming``, ``coming_bytes``: scheduled messages on their way besides these (a send's plan)."""
        count = len(self._scheduled) + coming + len(envelopes)
        size = self.scheduled_bytes + coming_bytes + sum(e.size for e in envelopes)
        if count > self.properties.max_messages or size > self.properties.max_bytes:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"topic {self.name!r} holds {len(self._scheduled)} scheduled messages ({self.scheduled_bytes} bytes),"
                " its limit; cancel some first",
            )

    def schedule(self, envelope: Envelope, at: float) -> int:
        """Hold a message for the topic's subscriptions until ``at``; its sequence number
        (``amqp:resource-limit-exceeded`` past the topic's limits)."""
        self.check_schedule([envelope])
        seq = self._next_sequence
        self._next_sequence += 1
        self.load_scheduled(seq, at, envelope)
        if self.on_scheduled is not None:
            self.on_scheduled(seq, at, envelope)
        return seq

    @property
    def next_sequence(self) -> int:
        """The sequence number the next scheduled message gets."""
        return self._next_sequence

    @next_sequence.setter
    def next_sequence(self, value: int) -> None:
        self._next_sequence = max(self._next_sequence, value)

    def load_scheduled(self, seq: int, at: float, envelope: Envelope) -> None:
        """Hold a scheduled message under a known sequence number (also: taken back from a store)."""
        self._next_sequence = max(self._next_sequence, seq + 1)
        self._scheduled[seq] = (at, envelope)
        self.scheduled_bytes += envelope.size
        heapq.heappush(self._schedule_heap, (at, seq))
        held = envelope.annotations.get(HELD_FOR) if envelope.annotations else None
        if held is not None:
            self._held[seq] = str(held)

    def hold_back(self, subscription: str, envelope: Envelope, at: float, since: float) -> int:
        """Hold a copy that subscription ``subscription`` (its key) could take neither in
        itself nor in its dead-letter queue on the schedule, for it alone, until ``at``
        (``since``: when it was first held back); its sequence number. Its message was
        acknowledged when it was scheduled: it stays counted in the schedule's limits until
        placed, so nothing is refused here (the schedule may be above its limits a while:
        new scheduled messages are refused then). A durable store keeps it as it keeps any
        scheduled message (:attr:`on_scheduled`)."""
        seq = self._next_sequence
        self._next_sequence += 1
        envelope = envelope.with_annotations({HELD_FOR: subscription, HELD_SINCE: float(since)})
        self.load_scheduled(seq, at, envelope)
        if self.on_scheduled is not None:
            self.on_scheduled(seq, at, envelope)
        return seq

    def held_for(self, subscription: str) -> list[int]:
        """The sequence numbers of the copies held back for subscription ``subscription`` (its key)."""
        return [seq for seq, key in self._held.items() if key == subscription]

    def _unscheduled(self, seq: int) -> tuple[float, Envelope] | None:
        item = self._scheduled.pop(seq, None)
        if item is not None:
            if self._held:
                self._held.pop(seq, None)
            self.scheduled_bytes -= item[1].size
            if self.on_scheduled is not None:
                self.on_scheduled(seq, item[0], None)
        return item

    def roll_back_scheduled(self, seq: int, kept: tuple[float, Envelope] | None) -> None:
        """Make scheduled message ``seq`` what the durable store holds (``kept``: when and what;
        None: nothing), without telling :attr:`on_scheduled` (a failed write taken back)."""
        item = self._scheduled.pop(seq, None)
        if item is not None:
            self.scheduled_bytes -= item[1].size
            self._held.pop(seq, None)
        if kept is not None:
            self.load_scheduled(seq, *kept)

    def cancel_scheduled(self, sequence_numbers: list[int]) -> None:
        """Drop scheduled messages; ``message-not-found`` if any is not scheduled here (none dropped)."""
        for seq in sequence_numbers:
            if seq not in self._scheduled:
                raise EntityError(
                    MESSAGE_NOT_FOUND, f"no scheduled message with sequence number {seq} in {self.name!r}"
                )
        for seq in sequence_numbers:
            self._unscheduled(seq)

    def due(self, now: float) -> list[Envelope]:
        """The scheduled messages whose time has come by ``now``, taken off the schedule in time order."""
        out = []
        heap = self._schedule_heap
        while heap and heap[0][0] <= now:
            _, seq = heapq.heappop(heap)
            item = self._unscheduled(seq)
            if item is not None:
                out.append(item[1])
        return out

    def next_deadline(self) -> float:
        """When the next scheduled message is due (infinity: none)."""
        return self._schedule_heap[0][0] if self._schedule_heap else math.inf


@dataclass(frozen=True)
class Node:
    """What an address names: an entity to receive from, a topic or queue to send to, or a management node."""

    entity: MessagingEntity | None
    topic: Topic | None
    management: bool = False

    @property
    def target(self) -> MessagingEntity | Topic:
        """What a send to this address goes to: its entity, else its topic."""
        target = self.entity if self.entity is not None else self.topic
        assert target is not None
        return target


def unheld(envelope: Envelope) -> Envelope:
    """A copy held back (:meth:`Topic.hold_back`) as it is placed: without the annotations that held it."""
    annotations = {k: v for k, v in envelope.annotations.items() if k != HELD_FOR and k != HELD_SINCE}
    e = envelope
    return Envelope(e.header, annotations, e.properties, e.application_properties, e.props_raw, e.body)
