"""A hypothesis state machine over peek-lock settlement: no message is lost or duplicated.

Every message sent ends completed, dead-lettered, or still in the entity (available,
locked, deferred); a stale lock token is always refused with message-lock-lost.
"""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.namespace import EntityError, MessageState, Namespace
from amqplink.broker.namespace.store import lock_key
from tests.broker.nsutil import T0, payload

SETTLEMENTS = ["complete", "abandon", "released", "defer", "dead_letter", "renew", "release"]


class LockMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        props = EntityProperties(lock_duration=10.0, max_delivery_count=3)
        self.ns = Namespace(NamespaceConfig(queues=(QueueConfig("q", props),)))
        self.q = self.ns.receiver_source("q")
        self.dlq = self.ns.receiver_source("q/$DeadLetterQueue")
        self.now = T0
        self.sent: set[str] = set()
        self.completed: list[str] = []
        self.held: dict[uuid.UUID, str] = {}
        self.until: dict[uuid.UUID, float] = {}
        """The model's own view of when each lock runs out."""
        self.deferred: dict[int, str] = {}
        self.attempts: dict[str, int] = {}
        """The model's delivery count: locked deliveries, less the releases (not attempts)."""
        self.n = 0

    def _live(self) -> set[str]:
        return {mid for token, mid in self.held.items() if self.until[token] > self.now}

    @rule()
    def send(self) -> None:
        mid = f"m{self.n}"
        self.n += 1
        self.ns.send(self.q, payload(message_id=mid), self.now)
        self.sent.add(mid)

    @rule(lock=st.booleans())
    def receive(self, lock: bool) -> None:
        msg = self.q.receive(self.now, lock=lock)
        if msg is None:
            return
        mid = msg.envelope.message_id
        assert mid not in self._live(), "a locked message was delivered again"
        if lock:
            assert msg.lock_token is not None
            self.attempts[mid] = self.attempts.get(mid, 0) + 1
            self.held[msg.lock_token] = mid
            self.until[msg.lock_token] = self.now + 10.0
        else:
            self.completed.append(mid)

    @rule(seconds=st.sampled_from([1.0, 5.0, 10.0, 11.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.ns.tick(self.now)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), action=st.sampled_from(SETTLEMENTS))
    def settle(self, data: st.DataObject, action: str) -> None:
        token = data.draw(st.sampled_from(list(self.held)))  # insertion order: uuid4s differ per run
        mid = self.held[token]
        seq = self.q._locks.get(lock_key(token))  # the broker keys locks by the token's bytes
        live = self.until[token] > self.now
        try:
            if action == "complete":
                self.q.complete(token, self.now)
                self.completed.append(mid)
            elif action == "abandon":
                self.q.abandon(token, self.now)
            elif action == "released":  # a released outcome: no attempt counted
                self.q.abandon(token, self.now, counted=False)
                self.attempts[mid] -= 1
            elif action == "defer":
                self.q.defer(token, self.now)
                assert seq is not None
                self.deferred[seq] = mid
            elif action == "dead_letter":
                self.q.dead_letter(token, self.now, "r", "d")
            elif action == "renew":
                self.q.renew_lock(token, self.now)
                self.until[token] = self.now + 10.0
                return
            else:
                self.q.release([token], self.now)
        except EntityError as exc:
            assert not live, f"a live lock was refused: {exc}"
            assert exc.condition == "com.microsoft:message-lock-lost"
        else:
            assert live or action == "release", "a stale lock token was honoured"
        del self.held[token]

    @precondition(lambda self: bool(self.deferred))
    @rule(data=st.data())
    def receive_deferred(self, data: st.DataObject) -> None:
        seq = data.draw(st.sampled_from(sorted(self.deferred)))
        msg = self.q.store.get(seq)
        if msg is None or msg.state is not MessageState.DEFERRED:
            try:
                self.q.receive_deferred([seq], self.now)
            except EntityError as exc:
                assert exc.status == 404
            else:
                raise AssertionError("a message that is not deferred was returned by sequence number")
            if msg is None:
                del self.deferred[seq]
            return
        (got,) = self.q.receive_deferred([seq], self.now)
        assert got.lock_token is not None
        self.attempts[self.deferred[seq]] = self.attempts.get(self.deferred[seq], 0) + 1
        self.held[got.lock_token] = self.deferred[seq]
        self.until[got.lock_token] = self.now + 10.0

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        in_queue = [m.envelope.message_id for m in self.q.store]
        in_dlq = [m.envelope.message_id for m in self.dlq.store]
        everywhere = in_queue + in_dlq + self.completed
        assert len(everywhere) == len(set(everywhere)), "a message is in two places"
        assert set(everywhere) == self.sent, "a message was lost"
        assert self.q.bytes == sum(m.envelope.size for m in self.q.store), "byte count drifted"
        assert self.dlq.bytes == sum(m.envelope.size for m in self.dlq.store), "byte count drifted"
        for m in self.dlq.store:
            assert m.envelope.application_properties is not None
            assert m.envelope.application_properties["DeadLetterReason"] in ("r", "MaxDeliveryCountExceeded")

    @invariant()
    def locked_means_a_live_lock(self) -> None:
        self.q.tick(self.now)
        for m in self.q.store:
            if m.state is MessageState.LOCKED:
                assert m.lock_token is not None and m.locked_until > self.now, "a message is stuck locked"
            else:
                assert m.lock_token is None

    @invariant()
    def delivery_count_counts_attempts_not_releases(self) -> None:
        for m in self.q.store:
            mid = m.envelope.message_id
            assert m.delivery_count == self.attempts.get(mid, 0), f"{mid}: delivery count off"

    @invariant()
    def delivery_count_bounded(self) -> None:
        # An unsettled message comes back only while it has delivery attempts left (defer settles).
        for m in self.q.store:
            if m.state is MessageState.AVAILABLE:
                assert m.delivery_count < 3


TestLocks = LockMachine.TestCase
TestLocks.settings = settings(stateful_step_count=40, deadline=None)
