"""A Service Bus namespace without sockets: queues, topics, subscriptions, DLQs, forwarding.

Addresses as the SDK forms them (``amqps://HOST/ENTITY`` or just ``ENTITY``):
``queue``, ``queue/$DeadLetterQueue``, ``topic``, ``topic/Subscriptions/sub``,
``topic/Subscriptions/sub/$DeadLetterQueue``, and ``<any of these>/$management``.
Entity names are case-insensitive, as in Service Bus.

The namespace is the public face of three parts: what its addresses name (:mod:`.nodes`),
the sending and routing of messages (:class:`~.routing.Router`, whose methods it offers
bound: :meth:`send`, :meth:`store`, ...) and the clock (:class:`~.clock.Clock`:
:meth:`tick`). It builds, changes and deletes the entities, and resolves addresses.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from amqplink.broker.config import (
    DEFAULT_PARTITION_COUNT,
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from amqplink.broker.namespace.clock import Clock
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import (
    INTERNAL_ERROR,
    NOT_ALLOWED,
    NOT_FOUND,
    RESOURCE_LIMIT_EXCEEDED,
    EntityError,
)
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import (
    AnyQueue,
    AnySubscription,
    Node,
    PartitionedQueue,
    PartitionedSubscription,
    Queue,
    Subscription,
    Topic,
    entity_path,
)
from amqplink.broker.namespace.partitioned import Partitions, partitions_for
from amqplink.broker.namespace.routing import MAX_FORWARD_HOPS, Router
from amqplink.broker.rights import MAX_ENTITY_RULES, AccessRule
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
    "Node",
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
MAX_SUBSCRIPTIONS = 2000
"""Subscriptions one topic holds at most (Service Bus: 2,000 per topic)."""
MAX_RULES = 2000
"""Rules one subscription holds at most (Service Bus: 2,000 filters per topic)."""
DEFAULT_RULE = RuleConfig("$Default", "True")
"""Service Bus: "every newly created topic subscription has an initial default rule" (a TrueFilter)."""
DEAD_LETTER_SUFFIX = "$deadletterqueue"


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
        self.router = Router(self._send_target)
        """Sends and routes messages (the broker's connections call it directly)."""
        self.clock = Clock(self.topics, self.router)
        """Applies time: locks, TTL, scheduled messages come due."""
        self._timed = self.clock.timed
        # The public face of sending and time: the router's and the clock's methods, bound
        # once here, so that a call through the namespace costs no call more.
        router, clock = self.router, self.clock
        self.unpack = router.unpack
        self.send = router.send
        self.store = router.store
        self.plan_store = router.plan_store
        self.check_send = router.check_send
        self.sender = router.sender
        self.body_sender = router.body_sender
        self.schedule = router.schedule
        self.schedule_all = router.schedule_all
        self.tick = clock.tick
        self.next_deadline = clock.next_deadline
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
            """Dead-letter ``envelope``: to ``forward`` if set, else (or if that refuses) into
            ``dlq``. A refusal of both is raised, naming both (the caller keeps the message
            and warns of it once); a forward refused, the dead-letter queue taking it, is
            warned of here."""
            forward_refused: EntityError | None = None
            if forward:
                try:
                    self.router.route(
                        self._send_target(forward),
                        [envelope.with_annotations({DEADLETTER_SOURCE: entity.path})],
                        now,
                        1,
                    )
                    return
                except EntityError as exc:
                    forward_refused = exc
            try:
                dlq.accept(envelope, now)
            except EntityError as refused:
                if forward_refused is None:
                    raise
                description = f"{refused.description}; forwarding it to {forward!r} failed too ({forward_refused})"
                raise EntityError(refused.condition, description) from refused
            if forward_refused is not None:
                what = "%s: forwarding a dead-lettered message to %r failed (%s): kept in its dead-letter queue"
                log.warning(what, entity.path, forward, forward_refused)

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
        owner = self.topic(topic)
        del owner.subscriptions[name.lower()]
        owner.cancel_scheduled(owner.held_for(name.lower()))  # (its copies held back go with it)
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
