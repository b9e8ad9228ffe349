"""The namespace's clock: what time does to its entities (lock expiry, TTL, scheduled
messages come due), and the placing of scheduled messages come due (:class:`Clock`).

A scheduled message was acknowledged to its sender when it was scheduled, so when it comes
due no one is there to be told of a refusal: each copy is placed on its own, in its
subscription (or forward destination), else in that entity's dead-letter queue, else held
back (:meth:`Clock.tick` tries it again later, backing off), never dropped.
"""

from __future__ import annotations

import logging
import math

from amqplink.broker.namespace.entity import Entity
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import Topic
from amqplink.broker.namespace.plan import SendPlan
from amqplink.broker.namespace.routing import FORWARD_REFUSED, Router
from amqplink.broker.namespace.sql.rules import subscription_copies

__all__ = ["Clock"]

log = logging.getLogger("amqplink.broker.namespace.namespace")


class Clock:
    """Applies time to a namespace's entities and topics (:meth:`tick`)."""

    def __init__(self, topics: dict[str, Topic], router: Router) -> None:
        self.topics = topics
        self.router = router
        self.timed: set[Entity] = set()
        """Entities with a deadline (locks, schedules, TTL, session locks): what tick visits."""

    def tick(self, now: float) -> None:
        """Apply time to every entity: lock expiry, scheduled messages, TTL."""
        for topic in self.topics.values():
            due = topic.due(now)
            if due:
                self._activate(topic, due, now)
        for entity in list(self.timed):
            deadline = entity.next_deadline()
            if deadline <= now:
                entity.tick(now)
                if entity.properties.forward_to and not entity.is_dead_letter_queue:
                    self._forward_held(entity, now)
                deadline = entity.next_deadline()
            if deadline == math.inf:
                self.timed.discard(entity)

    def _activate(self, topic: Topic, due: list[Envelope], now: float) -> None:
        """Fan out the topic's scheduled messages come due. No sender waits for them (their
        send was acknowledged when they were scheduled), so each copy is placed on its own: one
        a subscription refuses (full; its forward refused for anything but quota) is
        dead-lettered there, and the other subscriptions still get theirs."""
        for envelope in due:
            for sub in topic.subscriptions.values():
                plan = SendPlan(now)
                try:
                    self.router.plan_copy(plan, sub, [envelope], 0)
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
            self.router.plan_forward(plan, entity, envelopes, 0)
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
        heads = [e.next_deadline() for e in self.timed] + [t.next_deadline() for t in self.topics.values()]
        return min(heads, default=math.inf)


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
