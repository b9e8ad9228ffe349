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

from amqplink.broker.namespace.entity import RETRY_FIRST, RETRY_LAST, Entity, retry_wait
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import HELD_FOR, HELD_SINCE, Topic, unheld
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
        dead-lettered there, and the other subscriptions still get theirs; one its dead-letter
        queue refuses as well is held back for that subscription alone (:meth:`Topic.hold_back`)."""
        for envelope in due:
            held_for = envelope.annotations.get(HELD_FOR) if envelope.annotations else None
            if held_for is not None:
                self._place_held(topic, str(held_for), envelope, now)
                continue
            for key, sub in topic.subscriptions.items():
                plan = SendPlan(now)
                try:
                    self.router.plan_copy(plan, sub, [envelope], 0)
                    plan.apply()
                except EntityError as exc:
                    copies = subscription_copies(sub.rules, [envelope])
                    if self._dead_letter_refused(sub, copies, now, exc):
                        log.warning("%s: a scheduled message come due was refused: dead-lettered (%s)", sub.path, exc)
                        continue
                    for copy in copies:
                        topic.hold_back(key, copy, now + RETRY_FIRST, now)
                    log.warning(
                        "%s: a scheduled message come due was refused (%s), and by the dead-letter queue too:"
                        " held back, tried again from %s s on, backing off to %s s",
                        sub.path, exc, RETRY_FIRST, RETRY_LAST,
                    )  # fmt: skip

    def _place_held(self, topic: Topic, key: str, envelope: Envelope, now: float) -> None:
        """Try again to place a copy held back for subscription ``key`` of ``topic``: in it,
        else in its dead-letter queue, else held back again, the wait doubling (from
        :data:`RETRY_FIRST` to :data:`RETRY_LAST` seconds) and logged once, when placed."""
        sub = topic.subscriptions.get(key)
        if sub is None:  # (deleted with its messages: delete_subscription drops its copies held back too)
            return
        since = envelope.annotations.get(HELD_SINCE)
        since = now if since is None else float(since)
        copy = unheld(envelope)
        plan = SendPlan(now)
        try:
            self.router.plan_copy(plan, sub, [copy], 0, filtered=True)
            plan.apply()
            where = "placed"
        except EntityError as exc:
            if not self._dead_letter_refused(sub, [copy], now, exc):
                topic.hold_back(key, copy, now + retry_wait(now - since), since)
                return
            where = "dead-lettered"
        log.info("%s: a scheduled message held back for %.0f s was %s", sub.path, now - since, where)

    def _forward_held(self, entity: Entity, now: float) -> None:
        """Forward what became active in ``entity`` (a scheduled message now due); what its
        destination refuses is dead-lettered in ``entity`` (a tick raises nothing); what the
        dead-letter queue refuses as well stays in ``entity``, scheduled for another try, the
        wait doubling (its delivery count counts the tries: :meth:`Entity.hold`). In an entity
        that requires sessions they are each in their session (a forwarding entity has no
        receiver to hold one): every session's are taken."""
        held = entity.receive_many(now, len(entity.store), lock=False)
        if entity.requires_session:  # (receive_many took the sessionless ones: none, routing dead-letters them)
            for session_id in entity.available_sessions(now):
                held += entity.pick(now, len(entity.store), False, session_id)
        if not held:
            return
        envelopes = [msg.envelope for msg in held]
        first = sum(1 for msg in held if msg.delivery_count <= 1)  # (the others: held back before)
        plan = SendPlan(now)
        try:
            self.router.plan_forward(plan, entity, envelopes, 0)
            plan.apply()
        except EntityError as exc:
            if self._dead_letter_refused(entity, envelopes, now, exc):
                if first:
                    log.warning("%s: forwarding %d message(s) failed: dead-lettered (%s)", entity.path, first, exc)
                if first < len(held):
                    log.info("%s: %d message(s) held back were dead-lettered", entity.path, len(held) - first)
                return
            for msg in held:  # (receive-and-delete took them: put back, not lost)
                entity.hold(msg, now + retry_wait(RETRY_FIRST * 2 ** min(msg.delivery_count - 1, 16)))
            if first:
                log.warning(
                    "%s: forwarding %d message(s) failed (%s), and the dead-letter queue refused them too: held"
                    " back, tried again from %s s on, backing off to %s s",
                    entity.path, first, exc, RETRY_FIRST, RETRY_LAST,
                )  # fmt: skip
            return
        if first < len(held):
            log.info("%s: %d message(s) held back were forwarded", entity.path, len(held) - first)

    def _dead_letter_refused(
        self, entity: MessagingEntity, envelopes: list[Envelope], now: float, exc: EntityError
    ) -> bool:
        """The clock's last resort for messages ``entity`` could not place: its dead-letter
        queue, the refusal as reason (:data:`FORWARD_REFUSED`'s, else its condition) and
        description. False when that refuses too (nothing stored: the caller holds them back)."""
        try:
            _dead_letter_all(entity, envelopes, now, FORWARD_REFUSED.get(exc.condition, exc.condition), exc.description)
        except EntityError as refused:
            log.debug("%s: the dead-letter queue refused %d message(s) too (%s)", entity.path, len(envelopes), refused)
            return False
        return True

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
