"""The plan of one send that makes several copies: each checked before any is stored.

A send to a topic stores a copy in every subscription whose rules pass it; a queue or
subscription that forwards hands it on, up to four times, and what a destination has no
room for is dead-lettered in the forwarding entity. So one send can touch many entities,
and a refusal met at the last of them (a fragment down, a full dead-letter queue, a
destination deleted) must leave the others untouched: otherwise the sender, told its send
failed, retries it and the subscriptions handled first hold two copies (issue 30, item 1:
"a refusal of any kind leaves no trace").

The namespace therefore routes such a send into a :class:`SendPlan` first. Each copy is
checked against its entity's limits counting what the plan put there already (two
subscriptions forwarding into one queue, a subscription and its dead-letter queue), and a
message id against its duplicate detector counting the ids the plan logs there already;
a refusal raises, nothing stored. A forward is planned in a :meth:`SendPlan.child`, which
is merged when the destination takes it and dropped when it is dead-lettered instead.
Only once the whole send is planned does :meth:`SendPlan.apply` store every copy and then
log the ids: nothing there can refuse, each step being one the plan checked, and it runs
in one go on the event loop, so a durable store writes the send in one batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import DEAD_LETTER_DESCRIPTION, DEAD_LETTER_REASON, KEY_UNKNOWN, Entity
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import INTERNAL_ERROR, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import Topic
from amqplink.broker.namespace.partitioned import PartitionedEntity, Partitions

__all__ = ["SendPlan"]

_NONE = (0, 0)
"""Nothing reserved: no message, no byte."""


class SendPlan:
    """What one send will store, where, and which ids it will log; :meth:`apply` does it.

    ``now``: the time of the send. A plan made by :meth:`child` sees what its parent
    reserved, and reserves for itself until :meth:`merge` hands its steps to the parent."""

    def __init__(self, now: float, parent: SendPlan | None = None) -> None:
        self.now = now
        self._parent = parent
        self._coming: dict[int, list[int]] = {}
        """Per entity that stores messages itself (a plain entity, a fragment) and per topic
        schedule: the messages and bytes the plan puts there, ``[count, bytes]``."""
        self._logged: dict[int, tuple[DuplicateDetector, DuplicateDetector, list[Envelope]]] = {}
        """Per duplicate detector: it, a detector of the ids the plan logs there (no window), their messages."""
        self._next: dict[int, int] = {}
        """Per :class:`Partitions`: where its round robin stands once the plan's keyless copies are placed."""
        self._steps: list[Callable[[], None]] = []
        self._records: list[Callable[[], None]] = []

    # -- what the plan holds so far (a child: its parents' too) ----------------------------
    def _reserved(self, key: int) -> tuple[int, int] | list[int]:
        if self._parent is None:  # (the usual: a fan-out with no forward)
            return self._coming.get(key, _NONE)
        count = size = 0
        plan: SendPlan | None = self
        while plan is not None:
            held = plan._coming.get(key)
            if held is not None:
                count += held[0]
                size += held[1]
            plan = plan._parent
        return count, size

    def _reserve(self, key: int, envelopes: list[Envelope]) -> None:
        size = envelopes[0].size if len(envelopes) == 1 else sum(e.size for e in envelopes)
        held = self._coming.get(key)
        if held is None:
            self._coming[key] = [len(envelopes), size]
        else:
            held[0] += len(envelopes)
            held[1] += size

    def _round_robin(self, partitions: Partitions) -> int:
        key = id(partitions)
        plan: SendPlan | None = self
        while plan is not None:
            if key in plan._next:
                return plan._next[key]
            plan = plan._parent
        return partitions.round_robin_start

    # -- planning ---------------------------------------------------------------------
    def check(self, entity: MessagingEntity, envelopes: list[Envelope], key: Any = KEY_UNKNOWN) -> None:
        """Raise what storing ``envelopes`` in ``entity`` would raise after the plan's copies
        (sessions, count, bytes; for a partitioned entity, no fragment to take them), reserving nothing."""
        if envelopes:
            self._leaf(entity, envelopes, key)

    def store(self, entity: MessagingEntity, envelopes: list[Envelope], key: Any = KEY_UNKNOWN) -> None:
        """Plan storing ``envelopes`` in ``entity`` (as its ``accept_all`` would, ``key``: their
        partition key when known), checked against its limits after the plan's other copies."""
        if not envelopes:
            return
        now = self.now
        if isinstance(entity, Entity):  # (_leaf, inline: a plain entity holds them itself)
            entity.check_accept(envelopes, *self._reserved(id(entity)))
            self._reserve(id(entity), envelopes)
            self._steps.append(partial(entity.accept_all, envelopes, now))
            return
        leaf, partitions, index = self._leaf(entity, envelopes, key)
        self._reserve(id(leaf), envelopes)
        if partitions is None:
            self._steps.append(partial(leaf.accept_all, envelopes, now))
            return
        self._next[id(partitions)] = (index + 1) % partitions.count

        def stored() -> None:
            partitions.round_robin_start = index + 1  # (the round robin goes on after it, as for accept)
            leaf.accept_all(envelopes, now)

        self._steps.append(stored)

    def _leaf(
        self, entity: MessagingEntity, envelopes: list[Envelope], key: Any
    ) -> tuple[Entity, Partitions | None, int]:
        """The entity that will hold ``envelopes`` (``entity``, or the fragment of it chosen
        now), checked; with the partitions whose round robin chose it (None: no choice made)."""
        if not isinstance(entity, PartitionedEntity):
            assert isinstance(entity, Entity)
            entity.check_accept(envelopes, *self._reserved(id(entity)))
            return entity, None, 0
        partitions = entity.partitions
        if key is KEY_UNKNOWN:
            key = partitions.key(envelopes[0])

        def check(fragment: Entity, envelopes: list[Envelope]) -> None:
            fragment.check_accept(envelopes, *self._reserved(id(fragment)))

        index = entity.fragment_for(envelopes, key, start=self._round_robin(partitions), check=check)
        return entity.fragments[index], None if key is not None else partitions, index

    def dead_letter(self, entity: MessagingEntity, envelopes: list[Envelope], reason: str, description: str) -> None:
        """Plan putting ``envelopes`` (not stored in ``entity``) in ``entity``'s own dead-letter
        queue with a dead-letter reason and description (a full one refuses: nothing is
        dropped). A fragment of a partitioned entity (a scheduled message come due, on the
        clock) has none of its own: its entity's takes them, checked likewise."""
        if not envelopes:
            return
        updates = {DEAD_LETTER_REASON: reason, DEAD_LETTER_DESCRIPTION: description}
        dead = [envelope.with_application_properties(updates) for envelope in envelopes]
        dlq: MessagingEntity | None = getattr(entity, "dead_letter_queue", None)
        if dlq is None and isinstance(entity, Entity):
            dlq = entity.owner_dead_letter_queue
        if dlq is None:
            raise EntityError(INTERNAL_ERROR, f"{entity.path!r} has no dead-letter queue")
        self.store(dlq, dead)

    def schedule(self, topic: Topic, envelope: Envelope, at: float) -> None:
        """Plan holding ``envelope`` on ``topic``'s schedule until ``at``, checked against the
        schedule's limits after the plan's other scheduled messages there."""
        topic.check_schedule([envelope], *self._reserved(id(topic)))
        self._reserve(id(topic), [envelope])

        def scheduled() -> None:
            topic.schedule(envelope, at)

        self._steps.append(scheduled)

    def fresh(self, detector: DuplicateDetector, envelopes: list[Envelope]) -> list[Envelope]:
        """Those of ``envelopes`` that are no duplicates for ``detector``: their id neither
        stored within the window nor logged there by the plan already, nor given by an earlier
        one of them (:meth:`DuplicateDetector.fresh`). Nothing is recorded."""
        fresh = detector.fresh(envelopes, self.now)
        key = id(detector)
        plan: SendPlan | None = self
        while plan is not None and fresh:
            logged = plan._logged.get(key)
            if logged is not None:
                fresh = [e for e in fresh if not logged[1].seen(e.message_id, self.now)]
            plan = plan._parent
        return fresh

    def log_ids(self, detector: DuplicateDetector, envelopes: list[Envelope], dropped: int) -> None:
        """Plan logging the ids of ``envelopes`` in ``detector`` once every copy is stored, and
        counting ``dropped`` duplicates (the send accepted). The plan's later copies meet them
        at once (:meth:`fresh`)."""
        if envelopes:
            self._log(detector, envelopes)
        now = self.now

        def logged() -> None:
            if envelopes:
                detector.record_all(envelopes, now)
            detector.dropped += dropped

        self._records.append(logged)

    def _log(self, detector: DuplicateDetector, envelopes: list[Envelope]) -> None:
        logged = self._logged.get(id(detector))
        if logged is None:
            logged = self._logged[id(detector)] = (detector, DuplicateDetector(math.inf), [])
        logged[1].record_all(envelopes, self.now)
        logged[2].extend(envelopes)

    def then(self, step: Callable[[], None]) -> None:
        """Run ``step`` when the plan is applied, after the copies planned before it (a log line
        about what the send did: written only if it is done)."""
        self._steps.append(step)

    # -- children ---------------------------------------------------------------------
    def child(self) -> SendPlan:
        """A plan for part of this send (a forward) that this one takes (:meth:`merge`) or drops."""
        return SendPlan(self.now, self)

    def merge(self) -> None:
        """Hand this child's copies, ids and steps to its parent."""
        parent = self._parent
        assert parent is not None, "only a child plan merges"
        for key, (count, size) in self._coming.items():
            held = parent._coming.setdefault(key, [0, 0])
            held[0] += count
            held[1] += size
        for detector, _, envelopes in self._logged.values():
            parent._log(detector, envelopes)
        parent._next.update(self._next)
        parent._steps += self._steps
        parent._records += self._records

    # -- doing it ---------------------------------------------------------------------
    def apply(self) -> None:
        """Store every copy planned, then log the ids (nothing here refuses: each step was checked)."""
        assert self._parent is None, "a child plan is merged, not applied"
        for step in self._steps:
            step()
        for record in self._records:
            record()
