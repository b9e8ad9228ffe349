"""A hypothesis state machine over sessions: exclusive session locks, per-session order,
nothing lost or duplicated while owners come, go and time passes."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from amqplink.broker.config import EntityProperties, NamespaceConfig, QueueConfig
from amqplink.broker.namespace import EntityError, MessageState, Namespace
from tests.broker.nsutil import T0, payload

SESSIONS = ["A", "B", "C"]
OWNERS = ["o1", "o2"]


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        props = EntityProperties(requires_session=True, lock_duration=10.0, max_delivery_count=100)
        self.ns = Namespace(NamespaceConfig(queues=(QueueConfig("s", props),)))
        self.q = self.ns.receiver_source("s")
        self.now = T0
        self.n = 0
        self.sent: dict[str, list[str]] = {s: [] for s in SESSIONS}
        self.completed: list[str] = []
        self.owners = {name: object() for name in OWNERS}
        self.holding: dict[str, str] = {}  # owner -> session the model thinks it holds
        self.until: dict[str, float] = {}  # owner -> when its session lock runs out

    def _live(self, owner: str) -> bool:
        return owner in self.holding and self.until[owner] > self.now

    @rule(session=st.sampled_from(SESSIONS))
    def send(self, session: str) -> None:
        mid = f"{session}{self.n}"
        self.n += 1
        self.ns.send(self.q, payload(message_id=mid, session_id=session), self.now)
        self.sent[session].append(mid)

    @rule(owner=st.sampled_from(OWNERS), session=st.sampled_from([None, *SESSIONS]))
    def accept(self, owner: str, session: str | None) -> None:
        if self._live(owner):
            return  # one session per receiver
        taken = {s for o, s in self.holding.items() if o != owner and self._live(o)}
        try:
            got = self.q.accept_session(session, self.owners[owner], self.now)
        except EntityError as exc:
            assert exc.condition == "com.microsoft:session-cannot-be-locked"
            assert session in taken, "a free session was refused"
            return
        if got is None:
            assert session is None
            return
        sid, until = got
        assert sid not in taken, f"session {sid} locked twice"
        self.holding[owner], self.until[owner] = sid, until

    @precondition(lambda self: bool(self.holding))
    @rule(data=st.data(), complete=st.booleans())
    def receive(self, data: st.DataObject, complete: bool) -> None:
        owner = data.draw(st.sampled_from(sorted(self.holding)))
        sid = self.holding[owner]
        try:
            msg = self.q.receive(self.now, session_id=sid, owner=self.owners[owner])
        except EntityError as exc:
            assert not self._live(owner) and exc.condition == "com.microsoft:session-lock-lost"
            return
        assert self._live(owner)
        if msg is None:
            return
        assert msg.session_id == sid
        earlier = [
            m for m in self.q.store
            if m.session_id == sid and m.sequence_number < msg.sequence_number and m.state is MessageState.AVAILABLE
        ]  # fmt: skip
        assert not earlier, "a session's messages came out of order"
        assert msg.lock_token is not None
        if complete:
            self.q.complete(msg.lock_token, self.now)
            self.completed.append(msg.envelope.message_id)
        else:
            self.q.abandon(msg.lock_token, self.now)

    @precondition(lambda self: bool(self.holding))
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        owner = data.draw(st.sampled_from(sorted(self.holding)))
        self.q.close_session(self.holding.pop(owner), self.owners[owner], self.now)

    @precondition(lambda self: bool(self.holding))
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        owner = data.draw(st.sampled_from(sorted(self.holding)))
        try:
            self.until[owner] = self.q.sessions.renew(self.holding[owner], self.now, self.owners[owner])
        except EntityError:
            assert not self._live(owner)

    @rule(seconds=st.sampled_from([1.0, 5.0, 10.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.ns.tick(self.now)

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        stored = [m.envelope.message_id for m in self.q.store]
        everywhere = stored + self.completed
        assert len(everywhere) == len(set(everywhere))
        assert set(everywhere) == {mid for mids in self.sent.values() for mid in mids}

    @invariant()
    def locked_only_under_a_live_session_lock(self) -> None:
        self.q.tick(self.now)
        for m in self.q.store:
            if m.state is MessageState.LOCKED:
                assert m.session_id is not None and self.q.sessions.is_locked(m.session_id, self.now)


TestSessions = SessionMachine.TestCase
TestSessions.settings = settings(stateful_step_count=40, deadline=None)
