"""amqplink.engine.flow against a model that counts with unbounded integers.

The engine's flow-control rules work on 32-bit serial numbers (2.8.9) that wrap; the
model counts deliveries and frames from zero without wrapping, so a rule that mishandles
the wrap, an off-by-one or a sign disagrees with it. The state machines play both ends
of a link (credit, delivery-count, drain) and of a session (windows) with an initial
count or id drawn anywhere, near the wrap included.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from amqplink.engine import flow
from amqplink.engine.serial import SERIAL_MOD

serials = st.one_of(st.integers(0, SERIAL_MOD - 1), st.integers(SERIAL_MOD - 300, SERIAL_MOD - 1))
credits = st.integers(0, 500)


@given(serials, st.integers(0, 2**30), credits, st.integers(0, 2**30))
def test_sender_credit_is_the_grant_less_what_was_sent_since(initial: int, seen: int, credit: int, more: int) -> None:
    # the receiver granted `credit` having seen `seen` deliveries; the sender has sent `more` since
    rcv_count = (initial + seen) % SERIAL_MOD
    snd_count = (initial + seen + more) % SERIAL_MOD
    assert flow.sender_credit(rcv_count, credit, snd_count) == max(0, credit - more)


@given(serials, credits, st.data())
def test_sending_and_draining_move_credit_and_count(initial: int, credit: int, data: st.DataObject) -> None:
    sent = data.draw(st.integers(0, credit))
    assert flow.sender_sent(credit, initial, sent) == (credit - sent, (initial + sent) % SERIAL_MOD)
    assert flow.drain(credit - sent, (initial + sent) % SERIAL_MOD) == (0, (initial + credit) % SERIAL_MOD)


@given(serials, credits, st.integers(0, 600))
def test_receiver_counts_and_never_goes_below_zero(initial: int, credit: int, arrived: int) -> None:
    assert flow.receiver_counted(credit, initial, arrived) == (
        max(0, credit - arrived),
        (initial + arrived) % SERIAL_MOD,
    )


@given(serials, st.integers(0, 2**30), st.integers(0, 2**30), st.integers(0, 2**30))
def test_grant_limits_and_room(initial: int, a: int, b: int, count: int) -> None:
    limit_a, limit_b = (initial + a) % SERIAL_MOD, (initial + b) % SERIAL_MOD
    assert flow.later_limit(limit_a, limit_b) == (initial + max(a, b)) % SERIAL_MOD
    delivery_count = (initial + count) % SERIAL_MOD
    assert flow.credit_room(limit_a, delivery_count) == a - count
    assert flow.credit_left(limit_a, delivery_count) == max(0, a - count)
    assert flow.grant_limit(delivery_count, a) == (initial + count + a) % SERIAL_MOD


@given(serials, st.integers(0, 2**30), st.integers(0, 2**32 - 1), st.integers(0, 2**30))
def test_remote_incoming_window(initial: int, received: int, window: int, ahead: int) -> None:
    # the peer has received `received` frames and advertises `window`; this side has sent `ahead` more
    next_incoming = (initial + received) % SERIAL_MOD
    next_outgoing = (initial + received + ahead) % SERIAL_MOD
    assert flow.remote_incoming_window(next_incoming, window, next_outgoing) == window - ahead


class LinkCredit(RuleBasedStateMachine):
    """A sender and a receiver end of one link, each moved only by amqplink.engine.flow,
    and the model: deliveries counted from zero (sent, received), grants as plain sums."""

    @initialize(initial=serials)
    def start(self, initial: int) -> None:
        self.initial = initial
        # the sender's end
        self.snd_credit, self.snd_count = 0, initial
        # the receiver's end
        self.rcv_credit, self.rcv_count = 0, initial
        self.grant, self.limit = initial, initial
        # the model
        self.sent = self.received = 0
        self.model_grant = self.model_limit = 0  # in deliveries from the start

    def _at(self, n: int) -> int:
        return (self.initial + n) % SERIAL_MOD

    @rule(credit=credits)
    def receiver_grants(self, credit: int) -> None:
        # the receiver's flow reaches the sender at once; transfers in flight may follow it
        self.rcv_credit = credit
        self.grant = flow.grant_limit(self.rcv_count, credit)
        self.limit = flow.later_limit(self.limit, self.grant)
        self.snd_credit = flow.sender_credit(self.rcv_count, credit, self.snd_count)
        self.model_grant = self.received + credit
        self.model_limit = max(self.model_limit, self.model_grant)
        assert self.snd_credit == max(0, self.model_grant - self.sent)

    @rule(data=st.data())
    def sender_sends(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(0, self.snd_credit))
        self.snd_credit, self.snd_count = flow.sender_sent(self.snd_credit, self.snd_count, count)
        self.sent += count

    @precondition(lambda self: self.received < self.sent)
    @rule(data=st.data())
    def receiver_takes(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(1, self.sent - self.received))
        room = flow.credit_room(self.limit, self.rcv_count)
        assert room == self.model_limit - self.received
        assert room >= count  # the sender kept to its credit: nothing is excess
        self.rcv_credit, self.rcv_count = flow.receiver_counted(self.rcv_credit, self.rcv_count, count)
        self.received += count

    @rule()
    def sender_drains(self) -> None:
        # the sender answers a drain; its flow follows the transfers already sent
        self.snd_credit, self.snd_count = flow.drain(self.snd_credit, self.snd_count)
        self.sent = max(self.sent, self.model_grant)
        self.rcv_count = self.snd_count
        self.received = self.sent
        self.rcv_credit = flow.credit_left(self.grant, self.rcv_count)

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert self.snd_count == self._at(self.sent)
        assert self.rcv_count == self._at(self.received)
        assert self.snd_credit == max(0, self.model_grant - self.sent)
        assert self.rcv_credit == max(0, self.model_grant - self.received)
        assert flow.credit_room(self.limit, self.rcv_count) == self.model_limit - self.received


class SessionWindows(RuleBasedStateMachine):
    """One direction of a session: this side sends transfer frames, the peer receives them
    and reopens its window with a flow; both ends moved only by amqplink.engine.flow."""

    @initialize(first_id=serials, window=st.integers(1, 300))
    def start(self, first_id: int, window: int) -> None:
        self.first_id, self.max_window = first_id, window
        # the sender's end (this side), after the peer's begin
        self.next_outgoing = first_id
        self.remote_incoming = window
        # the receiver's end (the peer): next-incoming-id from this side's begin
        self.next_incoming, self.incoming, self.remote_outgoing = first_id, window, 2**31
        # the model
        self.sent = self.received = 0
        self.advertised = 0 + window  # frames the peer's latest window lets this side reach

    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        frames = data.draw(st.integers(0, max(0, self.remote_incoming)))
        self.next_outgoing, self.remote_incoming = flow.session_sent(self.next_outgoing, self.remote_incoming, frames)
        self.sent += frames

    @precondition(lambda self: self.received < self.sent)
    @rule(data=st.data())
    def receive(self, data: st.DataObject) -> None:
        frames = data.draw(st.integers(1, self.sent - self.received))
        assert flow.window_admits(self.incoming, frames)
        assert not flow.window_admits(self.incoming, self.advertised - self.received + 1)
        self.next_incoming, self.incoming, self.remote_outgoing = flow.session_received(
            self.next_incoming, self.incoming, self.remote_outgoing, frames
        )
        self.received += frames

    @rule()
    def peer_reopens(self) -> None:
        if not flow.window_to_reopen(self.incoming, self.max_window):
            assert self.advertised - self.received > self.max_window // 2
            return
        self.incoming = self.max_window
        self.remote_incoming = flow.remote_incoming_window(self.next_incoming, self.incoming, self.next_outgoing)
        self.advertised = self.received + self.max_window

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert self.next_outgoing == (self.first_id + self.sent) % SERIAL_MOD
        assert self.next_incoming == (self.first_id + self.received) % SERIAL_MOD
        assert self.remote_incoming == self.advertised - self.sent
        assert self.incoming == self.advertised - self.received
        assert self.remote_outgoing == 2**31 - self.received


TestLinkCredit = LinkCredit.TestCase
TestSessionWindows = SessionWindows.TestCase
