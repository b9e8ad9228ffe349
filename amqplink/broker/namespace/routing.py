"""Sending: where the messages of one send go, and what stores them (:class:`Router`).

:meth:`Router.send` takes the transfer payload as it arrived: a batch (message-format
``0x80013700``, one data section per encoded message) is unpacked and stored atomically,
as is a send to a topic with every copy it makes (its subscriptions', their forwards':
:mod:`.plan`); a ping (content-type ``application/vnd.ms-servicebus-ping``) is accepted
and dropped; a message larger than the entity's maximum is refused with
``amqp:link:message-size-exceeded``. The broker's connections call the router directly
(:meth:`Router.sender`); :class:`~.namespace.Namespace` offers the same methods, bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from amqplink.broker.namespace.batches import split_batch
from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.entity import Sent
from amqplink.broker.namespace.envelope import Envelope, body_only, split_message
from amqplink.broker.namespace.errors import MESSAGE_SIZE_EXCEEDED, RESOURCE_LIMIT_EXCEEDED, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.nodes import AnyQueue, AnySubscription, PartitionedQueue, Queue, Topic
from amqplink.broker.namespace.plan import SendPlan
from amqplink.broker.namespace.sql.rules import subscription_copies
from amqplink.broker.namespace.storable import refusal
from amqplink.codec.errors import DecodeError
from amqplink.sbwire.formats import BATCH_FORMAT

__all__ = ["FORWARD_REFUSED", "HOPS_EXCEEDED", "MAX_FORWARD_HOPS", "SESSION_ID_NULL", "Router"]

log = logging.getLogger("amqplink.broker.namespace.namespace")

MAX_FORWARD_HOPS = 4
"""Service Bus: "a message can be forwarded through at most four entities" (see :data:`HOPS_EXCEEDED`)."""
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


class Router:
    """Stores what is sent to a queue or topic, and routes it: a topic's copies, forwards,
    duplicate detection, the partition rules, all or none of one send.

    ``send_target``: the queue or topic an address names (a forward's destination, looked up
    when it is used: one deleted refuses the send)."""

    def __init__(self, send_target: Callable[[str], MessagingEntity | Topic]) -> None:
        self.send_target = send_target

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
        entity, a topic's subscriptions and forward destinations included (:meth:`route`
        plans such a send whole first), and records no id, so a retry is stored once. A
        durable store writes the ids with the messages, and forgets them if that write fails
        (:meth:`~amqplink.broker.durable.persistence.Persistence.roll_back`).

        The hook for transactions: a transactional send is unpacked (:meth:`unpack`) when it
        arrives, staged, and handed to :meth:`plan_store` only when its transaction commits;
        one rolled back never comes there, so leaves no id behind."""
        self.route(target, envelopes, now, 0)

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

    def route(self, target: MessagingEntity | Topic, envelopes: list[Envelope], now: float, hops: int) -> None:
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
        """:meth:`route` into ``plan``: the partition rules, the size (a forward's: the
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
            self.plan_forward(plan, target, envelopes, hops)
            return
        if hops and target.requires_session:
            # Forwarded in: one without a session id is dead-lettered here, the sender not told.
            sessionless = [e for e in envelopes if e.session_id is None]
            if sessionless:
                plan.dead_letter(target, sessionless, *SESSION_ID_NULL)
                envelopes = [e for e in envelopes if e.session_id is not None]
        plan.store(target, envelopes, key)

    def plan_forward(self, plan: SendPlan, source: MessagingEntity, envelopes: list[Envelope], hops: int) -> None:
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
        destination = self.send_target(source.properties.forward_to or "")  # (deleted: the send is refused)
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
        rules pass them (:meth:`plan_copy`)."""
        now = plan.now
        later = False
        for envelope in envelopes:
            at = envelope.scheduled_enqueue_time()
            if at is not None and at > now:
                plan.schedule(topic, envelope, at)
                later = True
        for sub in topic.subscriptions.values():
            self.plan_copy(plan, sub, envelopes, hops, later)

    def plan_copy(
        self,
        plan: SendPlan,
        sub: AnySubscription,
        envelopes: list[Envelope],
        hops: int,
        later: bool = True,
        *,
        filtered: bool = False,
    ) -> None:
        """Plan ``sub``'s copies of what its topic was sent (those its rules pass and that are
        due now): forwarded, or kept (one without a session id in a subscription that requires
        sessions: dead-lettered there, as Service Bus does). A subscription that keeps them
        must have room for the ones scheduled for later as well (``later``: whether any may be).
        ``filtered``: ``envelopes`` are ``sub``'s copies already (its rules applied: a copy held back)."""
        passed = envelopes if filtered else subscription_copies(sub.rules, envelopes)
        if not passed:
            return
        now = plan.now
        due = [e for e in passed if (e.scheduled_enqueue_time() or 0) <= now] if later else passed
        if sub.properties.forward_to:  # (_forwards: a subscription is no dead-letter queue)
            self.plan_forward(plan, sub, due, hops)
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
