"""A Service Bus namespace without sockets: queues, topics, subscriptions, DLQs, forwarding.

Addresses as the SDK forms them (``amqps://HOST/ENTITY`` or just ``ENTITY``):
``queue``, ``queue/$DeadLetterQueue``, ``topic``, ``topic/Subscriptions/sub``,
``topic/Subscriptions/sub/$DeadLetterQueue``, and ``<any of these>/$management``.
Entity names are case-insensitive, as in Service Bus.

Sending (:meth:`Namespace.send`) takes the transfer payload as it arrived:
a batch (message-format ``0x80013700``, one data section per encoded message) is
unpacked and stored atomically, as is a send to a topic with every copy it makes (its
subscriptions', their forwards': :mod:`.plan`); a ping (content-type
``application/vnd.ms-servicebus-ping``) is accepted and dropped; a message larger
than the entity's maximum is refused with ``amqp:link:message-size-exceeded``.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from amqplink.broker.config import (
    DEFAULT_PARTITION_COUNT,
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace.batches import split_batch
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import Entity, Sent
from amqplink.broker.namespace.envelope import Envelope, body_only, split_message
from amqplink.broker.namespace.errors import (
    INTERNAL_ERROR,
    MESSAGE_NOT_FOUND,
    MESSAGE_SIZE_EXCEEDED,
    NOT_ALLOWED,
    NOT_FOUND,
    RESOURCE_LIMIT_EXCEEDED,
    EntityError,
)
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.partitioned import (
    PartitionedEntity,
    Partitions,
    partitioned_dead_letter_queue,
    partitions_for,
)
from amqplink.broker.namespace.plan import SendPlan
from amqplink.broker.namespace.sql.rules import subscription_copies
from amqplink.broker.namespace.storable import refusal
from amqplink.broker.rights import MAX_ENTITY_RULES, AccessRule
from amqplink.codec.errors import DecodeError
from amqplink.sbwire.annotations import DEADLETTER_SOURCE
from amqplink.sbwire.formats import BATCH_FORMAT

__all__ = [
    "BATCH_FORMAT",
    "MAX_ENTITIES",
    "MAX_FORWARD_HOPS",
    "MAX_RULES",
    "MAX_SUBSCRIPTIONS",
    "AnyQueue",
    "AnySubscription",
    "Namespace",
    "PartitionedQueue",
    "PartitionedSubscription",
    "Queue",
    "Subscription",
    "Topic",
    "entity_path",
]

log = logging.getLogger(__name__)

MAX_ENTITIES = 10_000
"""Queues and topics a namespace holds at most (queues made on first use count too)."""
MAX_FORWARD_HOPS = 4
"""Service Bus: "a message can be forwarded through at most four entities" (see :data:`HOPS_EXCEEDED`)."""
MAX_SUBSCRIPTIONS = 2000
"""Subscriptions one topic holds at most (Service Bus: 2,000 per topic)."""
MAX_RULES = 2000
"""Rules one subscription holds at most (Service Bus: 2,000 filters per topic)."""
DEFAULT_RULE = RuleConfig("$Default", "True")
"""Service Bus: "every newly created topic subscription has an initial default rule" (a TrueFilter)."""
HOPS_EXCEEDED = (
    "MaxTransferHopCountExceeded",
    "The maximum number of allowed hops when forwarding between queues exceeded. This value is set to 4.",
)
"""Dead-letter reason and description of a message the entity at its fifth hop would forward
(Service Bus's dead-letter queue overview: "MaxTransferHopCountExceeded")."""
SESSION_ID_NULL = (
    "Session ID is null.",
    "Session enabled entity doesn't allow a message whose session identifier is null.",
)
"""Dead-letter reason and description of a message without a session id that a topic fans
out (or a queue forwards) into an entity that requires sessions (same table)."""
FORWARD_REFUSED = {RESOURCE_LIMIT_EXCEEDED: "QuotaExceeded", MESSAGE_SIZE_EXCEEDED: "MessageSizeExceeded"}
"""The destination's refusals that dead-letter a forwarded message in the forwarding entity
(the send succeeds), each with its dead-letter reason. Service Bus: "If the destination
entity accumulates too many messages and exceeds the quota, or the destination entity is
disabled, the source entity adds the messages to its dead-letter queue" (auto-forwarding
considerations); it documents no reason text, these are the SDK's failure reasons for the
refusal. A message above the destination's maximum size is the broker's choice: it can
never be forwarded, so it is dead-lettered likewise. Any other refusal refuses the send."""
DEAD_LETTER_SUFFIX = "$deadletterqueue"


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

    def _unscheduled(self, seq: int) -> tuple[float, Envelope] | None:
        item = self._scheduled.pop(seq, None)
        if item is not None:
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
        target = self.entity if self.entity is not None else self.topic
        assert target is not None
        return target


class Namespace:
    """Every entity of one namespace and the routing between them."""

    def __init__(self, config: NamespaceConfig | None = None, *, auto_create: bool | None = None) -> None:
        self.name = config.name if config is not None else "sbemulatorns"
        self.auto_create = config is None if auto_create is None else auto_create
        """Create a queue on first use of an unknown name (default: only without a configuration)."""
        self.first_use_level = logging.INFO
        """The level of the one log line a queue made on first use gets (``amqplink broker``: WARNING)."""
        self.default_properties = EntityProperties()
        self.partition_count = config.partition_count if config is not None else DEFAULT_PARTITION_COUNT
        """Fragments of a partitioned entity that names no ``PartitionCount`` (16; 2 on Premium)."""
        self.partition_all = config is not None and config.partition_all
        """Every queue and topic is partitioned (a Premium namespace)."""
        self.queues: dict[str, AnyQueue] = {}
        self.topics: dict[str, Topic] = {}
        self._timed: set[Entity] = set()
        """Entities with a deadline (locks, schedules, TTL, session locks): what tick visits."""
        self.on_entity_added: Callable[[AnyQueue | Topic | AnySubscription], None] | None = None
        """Told of each queue, topic and subscription made from now on (a durable store
        attaches itself to them)."""
        self.on_definitions_changed: Callable[[], None] | None = None
        """Told after an entity is made, changed or deleted, or a subscription's rules are set
        (a durable store keeps the definitions)."""
        self.access_rules: dict[str, tuple[AccessRule, ...]] = {}
        """Each queue's or topic's own authorization rules, by its lower-cased name (the
        configuration's and those set over the management API; :meth:`set_access_rules`)."""
        self.access_version = 0
        """Counts changes of :attr:`access_rules` (whoever verifies tokens rebuilds its rules then)."""
        self.on_access_rules_changed: Callable[[], None] | None = None
        """Told after :attr:`access_rules` changed (the host revokes what a removed or changed rule granted)."""
        if config is not None:
            for q in config.queues:
                self.add_queue(q)
            for t in config.topics:
                self.add_topic(t)
            by_entity: dict[str, list[AccessRule]] = {}
            for rule in config.authorization_rules:
                if rule.entity:
                    by_entity.setdefault(rule.entity, []).append(rule)
            for entity, rules in by_entity.items():
                self.set_access_rules(entity, rules)

    # -- building -----------------------------------------------------------------
    def _new_name(self, name: str) -> str:
        key = name.lower()
        if key in self.queues or key in self.topics:
            raise ValueError(f"an entity called {name!r} exists already")
        return key

    def _partitions(self, name: str, properties: EntityProperties) -> Partitions | None:
        if not (properties.enable_partitioning or self.partition_all):
            return None
        return partitions_for(name, properties, self.partition_count)

    def add_queue(self, config: QueueConfig) -> AnyQueue:
        """Make a queue (partitioned when its properties say so) with its dead-letter queue."""
        key = self._new_name(config.name)
        partitions = self._partitions(config.name, config.properties)
        queue: AnyQueue
        if partitions is None:
            queue = Queue(config.name, config.properties)
        else:
            queue = PartitionedQueue(config.name, config.properties, partitions)
        self.queues[key] = queue
        self._wire_dead_letters(queue, queue.dead_letter_queue)
        self._added(queue)
        return queue

    def _added(self, entity: AnyQueue | Topic | AnySubscription) -> None:
        if self.on_entity_added is not None:
            self.on_entity_added(entity)
        self._changed()

    def _changed(self) -> None:
        if self.on_definitions_changed is not None:
            self.on_definitions_changed()

    def add_topic(self, config: TopicConfig) -> Topic:
        """Make a topic and the subscriptions its configuration lists."""
        key = self._new_name(config.name)
        topic = Topic(config.name, config.properties)
        topic.partitions = self._partitions(config.name, config.properties)
        if topic.partitions is not None:
            topic.duplicates = None  # per fragment, in topic.partitions
        self.topics[key] = topic
        self._added(topic)
        for sub in config.subscriptions:
            self.add_subscription(topic, sub)
        return topic

    def add_subscription(self, topic: Topic, config: SubscriptionConfig) -> AnySubscription:
        # A message lives no longer than its topic's default time to live either.
        """Make a subscription of ``topic`` (its TTL at most the topic's; the ``$Default`` rule when none is given)."""
        ttl = min(config.properties.default_message_ttl, topic.properties.default_message_ttl)
        properties = dataclasses.replace(config.properties, default_message_ttl=ttl)
        rules = config.rules or (DEFAULT_RULE,)
        sub: AnySubscription
        if topic.partitions is None:
            sub = Subscription(topic.name, config.name, properties, rules)
        else:
            sub = PartitionedSubscription(topic.name, config.name, properties, rules, topic.partitions)
        topic.subscriptions[config.name.lower()] = sub
        self._wire_dead_letters(sub, sub.dead_letter_queue)
        self._added(sub)
        return sub

    def _wire_dead_letters(self, entity: MessagingEntity, dlq: MessagingEntity) -> None:
        entity.on_timed = dlq.on_timed = self._timed.add
        forward = entity.properties.forward_dead_lettered_messages_to

        def sink(envelope: Envelope, now: float) -> None:
            if forward:
                try:
                    self._route(
                        self._send_target(forward),
                        [envelope.with_annotations({DEADLETTER_SOURCE: entity.path})],
                        now,
                        1,
                    )
                    return
                except EntityError as exc:
                    log.warning("%s: forwarding a dead-lettered message to %r failed (%s)", entity.path, forward, exc)
            try:
                dlq.accept(envelope, now)
            except EntityError as exc:
                log.warning("%s: dead-letter queue refused a message, dropped (%s)", entity.path, exc)

        entity.dead_letter_sink = sink

    # -- runtime management (the management REST API) -------------------------------
    def check_room(self) -> None:
        """``amqp:resource-limit-exceeded`` when the namespace holds :data:`MAX_ENTITIES` queues and topics."""
        if len(self.queues) + len(self.topics) >= MAX_ENTITIES:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"the namespace holds {MAX_ENTITIES} entities, its limit: delete one or use an existing one",
            )

    def queue(self, name: str) -> AnyQueue:
        """The queue called ``name`` (any case); ``amqp:not-found`` otherwise."""
        queue = self.queues.get(name.lower())
        if queue is None:
            raise EntityError(NOT_FOUND, f"no queue {name!r} in namespace {self.name!r}")
        return queue

    def topic(self, name: str) -> Topic:
        """The topic called ``name`` (any case); ``amqp:not-found`` otherwise."""
        topic = self.topics.get(name.lower())
        if topic is None:
            raise EntityError(NOT_FOUND, f"no topic {name!r} in namespace {self.name!r}")
        return topic

    def subscription(self, topic: str, name: str) -> AnySubscription:
        """Subscription ``name`` of ``topic``; ``amqp:not-found`` otherwise."""
        sub = self.topic(topic).subscriptions.get(name.lower())
        if sub is None:
            raise EntityError(NOT_FOUND, f"no subscription {name!r} on topic {topic!r}")
        return sub

    def create_subscription(self, topic: Topic, config: SubscriptionConfig) -> AnySubscription:
        """Add a subscription at run time; ``ValueError`` if it exists, bounded by :data:`MAX_SUBSCRIPTIONS`."""
        if config.name.lower() in topic.subscriptions:
            raise ValueError(f"subscription {config.name!r} exists already on topic {topic.name!r}")
        if len(topic.subscriptions) >= MAX_SUBSCRIPTIONS:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED,
                f"topic {topic.name!r} holds {MAX_SUBSCRIPTIONS} subscriptions, its limit: delete one first",
            )
        return self.add_subscription(topic, config)

    def delete_queue(self, name: str) -> AnyQueue:
        """Remove a queue and its messages (links already attached keep the detached object)."""
        queue = self.queue(name)
        del self.queues[name.lower()]
        self._forget(queue, queue.dead_letter_queue)
        self._drop_access_rules(name)
        self._changed()
        log.info("queue %r deleted", queue.name)
        return queue

    def delete_topic(self, name: str) -> Topic:
        """Remove a topic with its subscriptions and their messages."""
        topic = self.topic(name)
        del self.topics[name.lower()]
        for sub in topic.subscriptions.values():
            self._forget(sub, sub.dead_letter_queue)
        topic.cancel_scheduled(list(topic.scheduled_sequence_numbers))
        self._drop_access_rules(name)
        self._changed()
        log.info("topic %r deleted", topic.name)
        return topic

    def delete_subscription(self, topic: str, name: str) -> AnySubscription:
        """Remove a subscription and its messages."""
        sub = self.subscription(topic, name)
        del self.topic(topic).subscriptions[name.lower()]
        self._forget(sub, sub.dead_letter_queue)
        self._changed()
        log.info("subscription %r deleted", sub.path)
        return sub

    def _forget(self, *entities: MessagingEntity) -> None:
        # Its messages leave its store (a durable one records the deletes), so an entity made
        # again under the same name starts empty, as on Service Bus.
        for entity in entities:
            self._timed.difference_update(entity.fragments)  # what the clock visits
            for msg in list(entity.store):
                entity.store.remove(msg.sequence_number)

    def update_queue(self, queue: AnyQueue, properties: EntityProperties) -> None:
        """Apply new settings to a queue (``ValueError`` for one Service Bus does not let change)."""
        _check_unchanged(queue.path, queue.properties, properties)
        self._set_properties(queue, queue.dead_letter_queue, properties)
        _set_window(queue.duplicates, queue.partitions, properties)
        self._changed()

    def update_topic(self, topic: Topic, properties: EntityProperties) -> None:
        """Apply new settings to a topic (``ValueError`` for one Service Bus does not let change)."""
        _check_unchanged(topic.path, topic.properties, properties)
        topic.properties = properties
        _set_window(topic.duplicates, topic.partitions, properties)
        self._changed()

    def update_subscription(self, topic: Topic, sub: AnySubscription, properties: EntityProperties) -> None:
        """Apply new settings to a subscription (its time to live no longer than its topic's)."""
        _check_unchanged(sub.path, sub.properties, properties)
        ttl = min(properties.default_message_ttl, topic.properties.default_message_ttl)
        self._set_properties(sub, sub.dead_letter_queue, dataclasses.replace(properties, default_message_ttl=ttl))
        self._changed()

    def _set_properties(self, entity: MessagingEntity, dlq: MessagingEntity, properties: EntityProperties) -> None:
        for e in (entity, dlq):
            e.properties = properties
            for part in e.fragments:  # (a plain entity is its own one fragment)
                part.properties = properties
                part.sessions.lock_duration = properties.lock_duration
        self._wire_dead_letters(entity, dlq)

    def set_rules(self, sub: AnySubscription, rules: tuple[RuleConfig, ...]) -> None:
        """Replace a subscription's rules (none: it receives nothing), bounded by :data:`MAX_RULES`."""
        if len(rules) > MAX_RULES:
            raise EntityError(
                RESOURCE_LIMIT_EXCEEDED, f"{sub.path!r} would hold {len(rules)} rules, above its limit of {MAX_RULES}"
            )
        sub.rules = rules
        self._changed()

    def set_access_rules(self, name: str, rules: Sequence[AccessRule]) -> None:
        """Replace queue or topic ``name``'s own authorization rules (none: it has none): tokens
        verified from now on see only these. ``amqp:not-found`` for no such entity,
        ``ValueError`` above :data:`~amqplink.broker.rights.MAX_ENTITY_RULES` or for a name
        given twice."""
        key = name.lower()
        if key not in self.queues and key not in self.topics:
            raise EntityError(NOT_FOUND, f"no queue or topic {name!r} in namespace {self.name!r}")
        if len(rules) > MAX_ENTITY_RULES:
            raise ValueError(f"{name!r} would hold {len(rules)} authorization rules, above {MAX_ENTITY_RULES}")
        names = [rule.name for rule in rules]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"{name!r}: authorization rule {twice!r} is given twice")
        if rules:
            self.access_rules[key] = tuple(dataclasses.replace(rule, entity=key) for rule in rules)
        else:
            self.access_rules.pop(key, None)
        self._access_changed()
        self._changed()

    def _drop_access_rules(self, name: str) -> None:
        if self.access_rules.pop(name.lower(), None) is not None:
            self._access_changed()

    def _access_changed(self) -> None:
        self.access_version += 1
        if self.on_access_rules_changed is not None:
            self.on_access_rules_changed()

    def entity_access_rules(self) -> list[AccessRule]:
        """Every queue's and topic's own authorization rules."""
        return [rule for rules in self.access_rules.values() for rule in rules]

    # -- addresses ----------------------------------------------------------------
    def names_entity(self, address: str) -> bool:
        """Whether ``address`` names this namespace, one of its nodes (``$cbs``, ``$control``),
        an entity it holds, or a queue its first use would make (:attr:`auto_create`): what a
        CBS token's audience must name, Service Bus answering a put-token for an entity that
        does not exist with 404. Creates nothing."""
        path = entity_path(address)
        if not path or path.startswith("$"):
            return True
        parts = path.lower().split("/")
        while len(parts) > 1 and parts[-1] in ("$management", DEAD_LETTER_SUFFIX.lower()):
            parts.pop()  # (a queue's own nodes: made with it)
        if self.auto_create and len(parts) == 1 and parts[0] not in self.topics:
            return True  # a plain queue name: its first link makes it
        try:
            self.resolve(address)  # (creates nothing: a name auto_create would make is answered above)
        except EntityError as exc:
            return exc.condition != NOT_FOUND
        return True

    def resolve(self, address: str) -> Node:
        """The node an address names; ``amqp:not-found`` if it names nothing."""
        path = entity_path(address)
        parts = path.split("/")
        management = len(parts) > 1 and parts[-1].lower() == "$management"
        if management:
            parts = parts[:-1]
        dead_letter = len(parts) > 1 and parts[-1].lower() == DEAD_LETTER_SUFFIX
        if dead_letter:
            parts = parts[:-1]
        if not parts or not parts[0]:
            raise EntityError(NOT_FOUND, f"address {address!r} names no entity")
        first = parts[0].lower()
        if len(parts) == 1:
            topic = self.topics.get(first)
            if topic is not None and not dead_letter:
                return Node(None, topic, management)
            queue = self.queues.get(first)
            if queue is None and self.auto_create and topic is None:
                self.check_room()
                queue = self.add_queue(QueueConfig(parts[0], self.default_properties))
                log.log(self.first_use_level, "queue %r created on first use (an unknown name makes a queue)", parts[0])
            if queue is None:
                raise EntityError(NOT_FOUND, f"the messaging entity {path!r} could not be found")
            return Node(queue.dead_letter_queue if dead_letter else queue, None, management)
        if len(parts) == 3 and parts[1].lower() == "subscriptions":
            topic = self.topics.get(first)
            sub = None if topic is None else topic.subscriptions.get(parts[2].lower())
            if sub is None:
                raise EntityError(NOT_FOUND, f"the messaging entity {path!r} could not be found")
            return Node(sub.dead_letter_queue if dead_letter else sub, None, management)
        # a queue or topic whose name has segments (contoso/x-servicebus-transfer/0)
        joined = "/".join(parts)
        topic = self.topics.get(joined.lower())
        if topic is not None and not dead_letter:
            return Node(None, topic, management)
        queue = self.queues.get(joined.lower())
        if queue is None:
            raise EntityError(NOT_FOUND, f"the messaging entity {path!r} could not be found")
        return Node(queue.dead_letter_queue if dead_letter else queue, None, management)

    def _send_target(self, address: str) -> MessagingEntity | Topic:
        node = self.resolve(address)
        target = node.target
        if not isinstance(target, Topic | Queue | PartitionedQueue):
            raise EntityError(NOT_ALLOWED, f"cannot send to {target.path!r}: send to its queue or topic")
        return target

    def sender_target(self, address: str) -> MessagingEntity | Topic:
        """The queue or topic a sending link's target address names."""
        return self._send_target(address)

    def receiver_source(self, address: str) -> MessagingEntity:
        """The queue, subscription or dead-letter queue a receiving link's source address names.

        Not one with ``ForwardTo``: "after you set this property on a queue, messages
        cannot be directly received from that queue" (Service Bus's ``ForwardTo``)."""
        node = self.resolve(address)
        entity = node.entity
        if entity is None:
            raise EntityError(
                NOT_ALLOWED, f"cannot receive from topic {node.target.path!r}: receive from a subscription"
            )
        if entity.properties.forward_to and not entity.is_dead_letter_queue:
            raise EntityError(
                NOT_ALLOWED,
                f"Cannot create a message receiver on an entity with auto-forwarding enabled: {entity.path!r}"
                f" forwards to {entity.properties.forward_to!r}; receive from there (or its dead-letter queue)",
            )
        return entity

    # -- sending ------------------------------------------------------------------
    def unpack(self, payload: bytes, message_format: int, max_size: int, path: str = "") -> list[Envelope]:
        """The messages in one transfer payload (several for a batch) sent to ``path``; size
        and decode checked, and that the broker can keep them (:mod:`.storable`)."""
        if len(payload) > max_size:
            raise EntityError(
                MESSAGE_SIZE_EXCEEDED,
                f"the message is {len(payload)} bytes, above the entity's maximum of {max_size}",
            )
        try:
            if message_format == BATCH_FORMAT:
                return split_batch(payload)
            return [split_message(payload, check=True)]
        except DecodeError as exc:
            raise refusal(exc, path) from None

    def send(self, target: MessagingEntity | Topic, payload: bytes, now: float, message_format: int = 0) -> None:
        """Store one transfer's message(s) in a queue or topic: all of them or none."""
        envelopes = self.unpack(payload, message_format, target.properties.max_message_size, target.path)
        if len(envelopes) == 1:  # the common case: no list to filter
            envelope = envelopes[0]
            if envelope.properties is not None and envelope.is_ping:
                return
            if type(target) is Queue and target.duplicates is None and not target.properties.forward_to:
                target.accept(envelope, now)  # nothing to route: a plain queue stores it
            elif (
                type(target) is PartitionedQueue
                and not target.properties.forward_to
                # no properties, no annotations: no key of any kind (Partitions.key, unasked)
                and (
                    (envelope.properties is None and not envelope.annotations)
                    or target.partitions.key(envelope) is None
                )
            ):
                target.accept_keyless(envelope, now)  # round robin: nothing to admit
            else:
                self.store(target, envelopes, now)
            return
        self.store(target, [e for e in envelopes if not e.is_ping], now)

    def store(self, target: MessagingEntity | Topic, envelopes: list[Envelope], now: float) -> None:
        """Store the messages of one send (:meth:`unpack`'s) in a queue or topic, all or none,
        and then, only then, log their ids for duplicate detection: the one place both happen.

        Those whose id was stored within the window (or that repeat an earlier id of the same
        batch) are dropped, the send still accepted ("the send operation succeeds, but the
        newly sent message is instantly ignored and dropped"). A refusal of any kind raised
        here (quota, sessions, a fragment down, a forward that failed) stores nothing in any
        entity, a topic's subscriptions and forward destinations included (:meth:`_route`
        plans such a send whole first), and records no id, so a retry is stored once. A
        durable store writes the ids with the messages, and forgets them if that write fails
        (:meth:`~amqplink.broker.durable.persistence.Persistence.roll_back`).

        The hook for transactions: a transactional send is unpacked (:meth:`unpack`) when it
        arrives, staged, and handed to :meth:`plan_store` only when its transaction commits;
        one rolled back never comes there, so leaves no id behind."""
        self._route(target, envelopes, now, 0)

    def plan_store(self, sends: Sequence[tuple[MessagingEntity | Topic, list[Envelope]]], now: float) -> SendPlan:
        """The plan of storing several sends (a transaction's, at its commit) all or none, each
        as :meth:`store` stores one (the duplicates of its detector dropped, the partition
        rules, the limits, a topic's copies, forwards), checked counting the others' copies: a
        refusal raises, and nothing is stored, no id recorded. :meth:`SendPlan.apply` stores
        them all and then records their ids (nothing refuses there)."""
        plan = SendPlan(now)
        for target, envelopes in sends:
            self._plan(plan, target, envelopes, 0)
        return plan

    def check_send(self, target: MessagingEntity | Topic, envelopes: list[Envelope]) -> None:
        """Raise what :meth:`send` would refuse of ``envelopes`` (messages sent to ``target``),
        storing nothing: a transaction checks its messages as they come (its commit plans
        them all together: :meth:`plan_store`). Checked: the
        partition rules (a PartitionKey differing from the SessionId, a pinned fragment that
        is down), an entity that requires sessions, the count and byte limits of ``target``
        or of each subscription that takes a copy. Not followed: forwarding, whose
        destination's refusals are dead-lettered in the source, never refused to the sender."""
        groups: dict[Any, list[Envelope]] = {}
        partitions = target.partitions
        for envelope in envelopes:
            key = None if partitions is None else partitions.key(envelope)
            groups.setdefault(key, []).append(envelope)
        if partitions is not None:
            for key in groups:
                if key is not None:
                    partitions.pinned(key)
        if isinstance(target, Topic):
            for sub in target.subscriptions.values():
                if sub.properties.forward_to:
                    continue
                passed = subscription_copies(sub.rules, envelopes)
                if sub.requires_session:
                    passed = [e for e in passed if e.session_id is not None]  # (dead-lettered there instead)
                if passed:
                    sub.check_accept(passed)
            return
        if target.properties.forward_to and not target.is_dead_letter_queue:
            return
        for group in groups.values():  # a partitioned entity checks each key's fragment
            target.check_accept(group)

    def sender(self, target: MessagingEntity | Topic) -> Callable[[bytes, float, int], None]:
        """What does :meth:`send` for the transfers of one run to ``target`` (the same
        checks and outcomes, each message on its own): what depends only on the target (its
        kind, its routing) is looked at once for the run. A message that is only a body
        (most are: no properties, so no ping, no key, no id to check for duplicates) goes
        straight to a plain queue's :meth:`Entity.accept` or a partitioned queue's
        :meth:`PartitionedQueue.accept_keyless`; anything else through :meth:`send`."""
        send = self.send
        accept: Callable[[Envelope, float], int]
        shortcut = _body_target(target)
        if type(shortcut) is Queue:
            accept = shortcut.accept
        elif type(shortcut) is PartitionedQueue:
            accept = shortcut.accept_keyless
        else:
            return lambda payload, now, message_format: send(target, payload, now, message_format)
        max_size = target.properties.max_message_size

        def store(payload: bytes, now: float, message_format: int) -> None:
            envelope = body_only(payload, message_format, max_size)
            if envelope is None:
                send(target, payload, now, message_format)  # unpack names any refusal
            else:
                accept(envelope, now)

        return store

    def body_sender(self, target: MessagingEntity | Topic) -> Callable[[Sequence[Sent], float], int] | None:
        """What stores the transfers of a run to ``target`` that are only a body, as
        :meth:`sender`'s function stores each, until one that it does not (not only a body,
        or refused): it says how many it stored, and the caller sends the rest one at a
        time. None when ``target`` takes no such shortcut (topics, duplicate detection,
        forwarding: :meth:`send` decides for each message)."""
        shortcut = _body_target(target)
        return None if shortcut is None else shortcut.accept_bodies

    def _route(self, target: MessagingEntity | Topic, envelopes: list[Envelope], now: float, hops: int) -> None:
        """Store ``envelopes`` in ``target``, reached after ``hops`` forwards (0: sent to it),
        without the duplicates of its detector; their ids recorded once they are stored.

        A queue sent to directly that does not forward holds them itself: its store checks
        them and takes them all or none. Anything else (a topic, a forward) may put copies in
        several entities, so it is planned first, every copy checked (:class:`SendPlan`), and
        only then stored: a refusal anywhere stores nothing anywhere and logs no id."""
        if not envelopes:
            return
        if hops or isinstance(target, Topic) or _forwards(target):
            plan = SendPlan(now)
            self._plan(plan, target, envelopes, hops)
            plan.apply()
            return
        key, detector, envelopes = _admitted(target, envelopes)
        if detector is None:
            target.accept_all(envelopes, now, key)
            return
        fresh = detector.fresh(envelopes, now)
        if fresh:
            target.accept_all(fresh, now, key)  # a refusal raises: no id recorded
            detector.record_all(fresh, now)
        detector.dropped += len(envelopes) - len(fresh)

    def _plan(self, plan: SendPlan, target: MessagingEntity | Topic, envelopes: list[Envelope], hops: int) -> None:
        """:meth:`_route` into ``plan``: the partition rules, the size (a forward's: the
        destination's maximum), duplicates, then the copies (:meth:`_plan_place`)."""
        if not envelopes:
            return
        if hops:
            _check_size(target, envelopes)
        key, detector, envelopes = _admitted(target, envelopes)
        if detector is None:
            self._plan_place(plan, target, envelopes, hops, key)
            return
        fresh = plan.fresh(detector, envelopes)
        # (logged before the copies are planned: one forwarded back here later in the plan is a duplicate)
        plan.log_ids(detector, fresh, len(envelopes) - len(fresh))
        self._plan_place(plan, target, fresh, hops, key)

    def _plan_place(
        self, plan: SendPlan, target: MessagingEntity | Topic, envelopes: list[Envelope], hops: int, key: Any
    ) -> None:
        """:meth:`_plan`'s copies, once duplicates are dropped: fanned out, forwarded or kept."""
        if not envelopes:
            return
        if isinstance(target, Topic):
            self._plan_fan_out(plan, target, envelopes, hops)
            return
        if _forwards(target):
            self._plan_forward(plan, target, envelopes, hops)
            return
        if hops and target.requires_session:
            # Forwarded in: one without a session id is dead-lettered here, the sender not told.
            sessionless = [e for e in envelopes if e.session_id is None]
            if sessionless:
                plan.dead_letter(target, sessionless, *SESSION_ID_NULL)
                envelopes = [e for e in envelopes if e.session_id is not None]
        plan.store(target, envelopes, key)

    def _plan_forward(self, plan: SendPlan, source: MessagingEntity, envelopes: list[Envelope], hops: int) -> None:
        """Plan handing what reached ``source`` (a queue or subscription with ``ForwardTo``,
        after ``hops`` forwards) to its destination. As Service Bus: at the fifth hop a message
        is dead-lettered in ``source`` (:data:`HOPS_EXCEEDED`); one the destination has no
        room for (its quota, its maximum message size) likewise (:data:`FORWARD_REFUSED`), the
        sender not told; one scheduled for later waits in ``source`` and is forwarded when it
        becomes active (:meth:`tick`). Any other refusal of the destination (a fragment down,
        a destination deleted) refuses the send: nothing is stored anywhere."""
        if not envelopes:
            return
        now = plan.now
        if hops >= MAX_FORWARD_HOPS:
            plan.dead_letter(source, envelopes, *HOPS_EXCEEDED)
            count = len(envelopes)
            plan.then(lambda: log.info("%s: %d message(s) forwarded %d times: dead-lettered", source.path, count, hops))
            return
        if any((e.scheduled_enqueue_time() or 0) > now for e in envelopes):
            # held in the source, forwarded when due
            plan.store(source, [e for e in envelopes if (e.scheduled_enqueue_time() or 0) > now])
            envelopes = [e for e in envelopes if (e.scheduled_enqueue_time() or 0) <= now]
            if not envelopes:
                return
        destination = self._send_target(source.properties.forward_to or "")  # (deleted: the send is refused)
        refused: list[str] = []  # (the descriptions of the refusals)
        for envelope in envelopes:  # one by one, as Service Bus forwards: each fits or not
            forward = plan.child()
            try:
                self._plan(forward, destination, [envelope], hops + 1)
            except EntityError as exc:
                reason = FORWARD_REFUSED.get(exc.condition)
                if reason is None:
                    raise  # nothing stored anywhere: the sender retries all of them
                plan.dead_letter(source, [envelope], reason, exc.description)
                refused.append(exc.description)
            else:
                forward.merge()
        if refused:
            count, last = len(refused), refused[-1]
            what = "%s: its forward destination refused %d message(s): dead-lettered (%s)"
            plan.then(lambda: log.warning(what, source.path, count, last))

    def _plan_fan_out(self, plan: SendPlan, topic: Topic, envelopes: list[Envelope], hops: int) -> None:
        """Plan a topic's copies: the messages scheduled for later held on the topic (every
        subscription gets them when they come due), the others in each subscription whose
        rules pass them (:meth:`_plan_copy`)."""
        now = plan.now
        later = False
        for envelope in envelopes:
            at = envelope.scheduled_enqueue_time()
            if at is not None and at > now:
                plan.schedule(topic, envelope, at)
                later = True
        for sub in topic.subscriptions.values():
            self._plan_copy(plan, sub, envelopes, hops, later)

    def _plan_copy(
        self, plan: SendPlan, sub: AnySubscription, envelopes: list[Envelope], hops: int, later: bool = True
    ) -> None:
        """Plan ``sub``'s copies of what its topic was sent (those its rules pass and that are
        due now): forwarded, or kept (one without a session id in a subscription that requires
        sessions: dead-lettered there, as Service Bus does). A subscription that keeps them
        must have room for the ones scheduled for later as well (``later``: whether any may be)."""
        passed = subscription_copies(sub.rules, envelopes)
        if not passed:
            return
        now = plan.now
        due = [e for e in passed if (e.scheduled_enqueue_time() or 0) <= now] if later else passed
        if sub.properties.forward_to:  # (_forwards: a subscription is no dead-letter queue)
            self._plan_forward(plan, sub, due, hops)
            return
        if sub.requires_session and any(e.session_id is None for e in passed):
            plan.dead_letter(sub, [e for e in due if e.session_id is None], *SESSION_ID_NULL)
            passed = [e for e in passed if e.session_id is not None]
            due = [e for e in due if e.session_id is not None]
        if len(due) != len(passed):
            plan.check(sub, passed)
        plan.store(sub, due)

    def schedule(self, target: MessagingEntity | Topic, envelope: Envelope, at: float, now: float) -> int:
        """Schedule one message on a queue or topic: :meth:`schedule_all` of one."""
        return self.schedule_all(target, [(envelope, at)], now)[0]

    def schedule_all(
        self, target: MessagingEntity | Topic, items: Sequence[tuple[Envelope, float]], now: float
    ) -> list[int]:
        """Schedule messages on a queue or topic (one ``schedule-message`` request: each message
        at its time); their sequence numbers. A queue's limits are checked for them all first.

        For duplicate detection a scheduled message is a send, counted when it is scheduled
        (not when it comes due): one whose id was stored within the window, or that repeats an
        earlier id of the request, is dropped and answered with a sequence number that names
        no message, as Service Bus answers ("I received two sequence numbers. The second
        message is ignored, the first message survives", Azure/azure-service-bus#265); the
        others' ids are recorded once each is scheduled (so a refusal records none)."""
        plan = [(envelope, at, *self._detection(target, envelope)) for envelope, at in items]
        groups: dict[int, tuple[DuplicateDetector, list[Envelope]]] = {}
        for envelope, _, _, detector in plan:
            if detector is not None:
                groups.setdefault(id(detector), (detector, []))[1].append(envelope)
        kept = {id(e) for detector, group in groups.values() for e in detector.fresh(group, now)}
        stored = [envelope for envelope, _, _, detector in plan if detector is None or id(envelope) in kept]
        if stored:
            if isinstance(target, Topic):
                target.check_schedule(stored)
            else:
                target.check_accept(stored)
        seqs = []
        for envelope, at, key, detector in plan:
            if detector is None:
                seqs.append(_scheduled(target, envelope, at, now, key))
            elif id(envelope) not in kept:
                seqs.append(_unused_sequence(target, key))
                detector.dropped += 1
            else:
                seqs.append(_scheduled(target, envelope, at, now, key))
                detector.record(envelope.message_id, now)
        return seqs

    def _detection(self, target: MessagingEntity | Topic, envelope: Envelope) -> tuple[Any, DuplicateDetector | None]:
        """The partition key of a message sent to ``target`` (None: none, or not partitioned)
        and the duplicate detector it is checked against (None: no duplicate detection); a
        key pinned to a fragment that is down is refused (``amqp:internal-error``)."""
        partitions = target.partitions
        if partitions is None:
            return None, getattr(target, "duplicates", None)
        key = partitions.key(envelope)  # the key rules hold for a scheduled send too
        if key is not None:
            partitions.pinned(key)
        return key, partitions.detector(key)

    # -- faults -------------------------------------------------------------------
    def set_fragment_down(self, path: str, index: int, down: bool = True, *, condition: str = INTERNAL_ERROR) -> None:
        """Take fragment ``index`` of the partitioned queue or topic at ``path`` down (or up again).

        A topic's subscriptions and a queue's dead-letter queue share its fragments, so they
        follow. While down, requests that need the fragment get ``condition``
        (``amqp:internal-error``, as Service Bus, or ``com.microsoft:server-busy``).
        ``amqp:not-found`` for an unknown path, ``amqp:not-allowed`` if it is not
        partitioned; ``IndexError`` for a fragment it does not have.
        """
        partitions = self.resolve(path).target.partitions
        if partitions is None:
            raise EntityError(NOT_ALLOWED, f"{path!r} is not partitioned: it has no fragments to take down")
        partitions.set_down(index, down, condition=condition)

    # -- time ---------------------------------------------------------------------
    def entities(self) -> list[MessagingEntity]:
        """Every queue and subscription, each with its dead-letter queue."""
        out: list[MessagingEntity] = []
        for q in self.queues.values():
            out += (q, q.dead_letter_queue)
        for t in self.topics.values():
            for s in t.subscriptions.values():
                out += (s, s.dead_letter_queue)
        return out

    def tick(self, now: float) -> None:
        """Apply time to every entity: lock expiry, scheduled messages, TTL."""
        for topic in self.topics.values():
            due = topic.due(now)
            if due:
                self._activate(topic, due, now)
        for entity in list(self._timed):
            deadline = entity.next_deadline()
            if deadline <= now:
                entity.tick(now)
                if entity.properties.forward_to and not entity.is_dead_letter_queue:
                    self._forward_held(entity, now)
                deadline = entity.next_deadline()
            if deadline == math.inf:
                self._timed.discard(entity)

    def _activate(self, topic: Topic, due: list[Envelope], now: float) -> None:
        """Fan out the topic's scheduled messages come due. No sender waits for them (their
        send was acknowledged when they were scheduled), so each copy is placed on its own: one
        a subscription refuses (full; its forward refused for anything but quota) is
        dead-lettered there, and the other subscriptions still get theirs."""
        for envelope in due:
            for sub in topic.subscriptions.values():
                plan = SendPlan(now)
                try:
                    self._plan_copy(plan, sub, [envelope], 0)
                    plan.apply()
                except EntityError as exc:
                    log.warning("%s: a scheduled message come due was refused: dead-lettered (%s)", sub.path, exc)
                    copies = subscription_copies(sub.rules, [envelope])
                    self._dead_letter_refused(sub, copies, now, exc)

    def _forward_held(self, entity: Entity, now: float) -> None:
        """Forward what became active in ``entity`` (a scheduled message now due); what its
        destination refuses is dead-lettered in ``entity`` (a tick raises nothing)."""
        held = entity.receive_many(now, len(entity.store), lock=False)
        if not held:
            return
        envelopes = [msg.envelope for msg in held]
        plan = SendPlan(now)
        try:
            self._plan_forward(plan, entity, envelopes, 0)
            plan.apply()
        except EntityError as exc:
            log.warning("%s: forwarding %d message(s) failed: dead-lettered (%s)", entity.path, len(held), exc)
            self._dead_letter_refused(entity, envelopes, now, exc)

    def _dead_letter_refused(
        self, entity: MessagingEntity, envelopes: list[Envelope], now: float, exc: EntityError
    ) -> None:
        """The clock's last resort for messages ``entity`` could not place: its dead-letter
        queue, the refusal as reason (:data:`FORWARD_REFUSED`'s, else its condition) and
        description; when that refuses too, they are dropped, logged as an error."""
        try:
            _dead_letter_all(entity, envelopes, now, FORWARD_REFUSED.get(exc.condition, exc.condition), exc.description)
        except EntityError as refused:
            log.error(
                "%s: %d message(s) could not be placed (%s) nor dead-lettered (%s): dropped",
                entity.path, len(envelopes), exc.description, refused.description,
            )  # fmt: skip

    def next_deadline(self) -> float:
        """When the clock next has something to do: the earliest deadline of an entity or a topic's schedule."""
        heads = [e.next_deadline() for e in self._timed] + [t.next_deadline() for t in self.topics.values()]
        return min(heads, default=math.inf)


def _scheduled(target: MessagingEntity | Topic, envelope: Envelope, at: float, now: float, key: Any) -> int:
    """Schedule ``envelope`` on ``target`` (``key``: its partition key, pinned already); its sequence number."""
    if isinstance(target, Topic):
        if key is not None and target.partitions is not None:
            envelope = target.partitions.stamp(envelope)
        return target.schedule(envelope, at)
    return target.schedule(envelope, at, now)


def _unused_sequence(target: MessagingEntity | Topic, key: Any) -> int:
    """A sequence number of ``target`` that no message gets (the answer to a duplicate's
    schedule-message), from the fragment ``key`` pins to when it is partitioned."""
    if isinstance(target, Topic):
        seq = target.next_sequence
        target.next_sequence = seq + 1
        return seq
    partitions = target.partitions
    fragment = target.fragments[0 if partitions is None else partitions.index(key)]
    return fragment.skip_sequence()


def _check_unchanged(path: str, old: EntityProperties, new: EntityProperties) -> None:
    # Service Bus: "The value for the RequiresSession property of an existing Queue cannot be changed";
    # duplicate detection likewise is chosen at creation only.
    for attr, name in (
        ("requires_session", "RequiresSession"),
        ("requires_duplicate_detection", "RequiresDuplicateDetection"),
        ("enable_partitioning", "EnablePartitioning"),
        ("partition_count", "PartitionCount"),
    ):
        if getattr(old, attr) != getattr(new, attr):
            raise ValueError(f"the value for the {name} property of an existing entity {path!r} cannot be changed")


def _set_window(
    duplicates: DuplicateDetector | None, partitions: Partitions | None, properties: EntityProperties
) -> None:
    detectors = [duplicates] if duplicates is not None else []
    if partitions is not None and partitions.duplicates is not None:
        detectors += partitions.duplicates
    for detector in detectors:
        detector.window = properties.duplicate_detection_window


def _body_target(target: MessagingEntity | Topic) -> AnyQueue | None:
    """``target`` when a message that is only a body goes straight to it (a plain queue
    with nothing to route: no duplicate detection, no forwarding; a partitioned queue that
    does not forward, where such a message has no key), else None (:meth:`Namespace.send`
    decides for each message)."""
    if type(target) is Queue and target.duplicates is None and not target.properties.forward_to:
        return target
    if type(target) is PartitionedQueue and not target.properties.forward_to:
        return target
    return None


def _forwards(entity: MessagingEntity) -> bool:
    """Whether ``entity`` hands what reaches it on (``ForwardTo``; a dead-letter queue's
    forwarding is its entity's ``ForwardDeadLetteredMessagesTo``, done by its sink)."""
    return bool(entity.properties.forward_to) and not entity.is_dead_letter_queue


def _admitted(
    target: MessagingEntity | Topic, envelopes: list[Envelope]
) -> tuple[Any, DuplicateDetector | None, list[Envelope]]:
    """The partition key of a send to ``target`` (None: none, or not partitioned), the
    duplicate detector its ids meet (None: no duplicate detection) and the messages to store
    (stamped: :meth:`Partitions.admit`, which refuses a batch of distinct keys or a key whose
    fragment is down)."""
    partitions = target.partitions
    if partitions is None:
        return None, getattr(target, "duplicates", None), envelopes
    return partitions.admit(envelopes)


def _check_size(target: MessagingEntity | Topic, envelopes: list[Envelope]) -> None:
    """``amqp:link:message-size-exceeded`` for a message forwarded to ``target`` above its
    maximum message size (a send is checked as it arrives: :meth:`Namespace.unpack`)."""
    limit = target.properties.max_message_size
    for envelope in envelopes:
        if envelope.size > limit:
            raise EntityError(
                MESSAGE_SIZE_EXCEEDED,
                f"a forwarded message of {envelope.size} bytes is above {target.path!r}'s maximum of {limit}",
            )


def _dead_letter_all(
    entity: MessagingEntity, envelopes: list[Envelope], now: float, reason: str, description: str
) -> None:
    """Put ``envelopes`` (not stored in ``entity``) in ``entity``'s own dead-letter queue with a
    dead-letter reason and description, at once (:meth:`SendPlan.dead_letter`): not where it
    forwards its dead letters (what routing dead-letters is not routed again, so that
    forwarding loops end; Service Bus does not forward the dead letters of a hop count
    exceeded either). A refusal of the dead-letter queue (full) is raised."""
    plan = SendPlan(now)
    plan.dead_letter(entity, envelopes, reason, description)
    plan.apply()
