"""Hypothesis state machine: sends, credit, drains, settlements and frame splits in any order.

Invariants checked after every step: nothing lost, nothing duplicated, nothing out of
order; link credit and session windows never exceeded (the receiver counts every
delivery past the credit it granted, and ends the session on a transfer past its
window); no protocol error. At the end every unsettled delivery reaches a terminal,
settled state on both sides, and every drain has completed.

Bytes move in chunks of random size in either direction, so frames are split across
reads, and flows cross transfers on the wire.
"""

from __future__ import annotations

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.errors import EngineStateError
from amqplink.engine.events import (
    ConnectionClosed,
    DeliveriesReceived,
    DeliveryAborted,
    Event,
    LinkAttachRequested,
    LinkDetached,
    LinkDrained,
    SessionEnded,
)
from amqplink.engine.link import (
    RCV_FIRST,
    RCV_SECOND,
    SND_MIXED,
    SND_SETTLED,
    SND_UNSETTLED,
    Delivery,
    ReceiverLink,
)
from amqplink.engine.serial import serial_diff
from amqplink.engine.states import LinkState
from amqplink.protocol.definitions import Accepted, Detach, End, Flow, Released, Target, Transfer

from .pairs import frames_in, updates_in


class LinkMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ready = False

    @initialize(
        frame_size=st.sampled_from([512, 700, 1024]),
        # session windows are uints (2.5.6): small ones, and up to 2**32-1 ("unlimited")
        window=st.integers(min_value=1, max_value=6) | st.sampled_from([2**31 - 1, 2**31, 2**32 - 1]),
        snd=st.sampled_from([SND_UNSETTLED, SND_SETTLED, SND_MIXED]),
        rcv=st.sampled_from([RCV_FIRST, RCV_SECOND]),
        # delivery-count is a serial number: start at 0 or just below the wrap (RabbitMQ 4: 2**32-5)
        initial=st.just(0) | st.integers(min_value=2**32 - 12, max_value=2**32 - 1),
    )
    def setup(self, frame_size: int, window: int, snd: int, rcv: int, initial: int) -> None:
        if window > 6:
            event("a window of 2**31 or more")
        if initial:
            event("delivery-count starts near 2**32")
        self.initial = initial
        self.client = Connection(ConnectionConfig(container_id="c", max_frame_size=frame_size, incoming_window=window))
        self.server = Connection(
            ConnectionConfig(container_id="s", max_frame_size=frame_size, incoming_window=window), server=True
        )
        self.c2s = bytearray()
        self.s2c = bytearray()
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.client.open()
        session = self.client.begin_session()
        self.sender = session.attach_sender(
            "link", target=Target(address="q"), snd_settle_mode=snd, rcv_settle_mode=rcv,
            initial_delivery_count=initial,
        )
        self._flush_all()
        receivers = [e.link for e in self.server_events if isinstance(e, LinkAttachRequested)]
        assert len(receivers) == 1
        receiver = receivers[0]
        assert isinstance(receiver, ReceiverLink)
        self.receiver = receiver
        self.sent: list[bytes] = []
        self.sent_deliveries: list[Delivery] = []
        self.presettled: list[bool] = []
        self.received: list[Delivery] = []
        self.aborted: set[bytes] = set()
        self.drains = 0
        self.next_id = 0
        self.ready = True

    # -- the wire ------------------------------------------------------------------
    def _collect(self) -> None:
        self.c2s += self.client.data_to_send()
        self.s2c += self.server.data_to_send()

    def _deliver(self, to_server: bool, n: int) -> None:
        buf = self.c2s if to_server else self.s2c
        chunk = bytes(buf[:n])
        del buf[:n]
        if not chunk:
            return
        if to_server:
            events = self.server.receive_data(chunk)
            self.server_events += events
            for ev in events:
                if isinstance(ev, LinkAttachRequested):
                    ev.link.attach()
                if isinstance(ev, DeliveriesReceived):
                    self.received += ev.deliveries
                    if any(len(d.payload) > self.server.config.max_frame_size for d in ev.deliveries):
                        event("a split delivery arrived")
                if isinstance(ev, DeliveryAborted):
                    assert ev.delivery.tag in self.aborted, ev
                    event("an aborted delivery arrived")
                if isinstance(ev, LinkDrained):
                    self.drains += 1
                    event("a drain completed")
        else:
            self.client_events += self.client.receive_data(chunk)

    def _flush_all(self) -> None:
        for _ in range(10_000):
            self._collect()
            if not self.c2s and not self.s2c:
                return
            self._deliver(True, len(self.c2s))
            self._deliver(False, len(self.s2c))
        raise AssertionError("never quiet")

    # -- rules -------------------------------------------------------------------
    @rule(size=st.integers(min_value=0, max_value=3000), presettled=st.booleans())
    @precondition(lambda self: len(self.sender.queue) < 40)
    def send(self, size: int, presettled: bool) -> None:
        body = self.next_id.to_bytes(4, "big") + bytes([self.next_id % 251]) * size
        self.next_id += 1
        settled = presettled if self.sender.snd_settle_mode == SND_MIXED else None
        delivery = self.sender.send(body, settled=settled)
        self.sent_deliveries.append(delivery)
        self.presettled.append(delivery.settled)
        self.sent.append(body)

    @rule(credit=st.integers(min_value=0, max_value=10), drain=st.booleans())
    def grant(self, credit: int, drain: bool) -> None:
        self.receiver.flow(credit, drain=drain)
        self.drains += sum(isinstance(ev, LinkDrained) for ev in self.server.take_events())

    @rule(which=st.integers(min_value=0, max_value=3))
    @precondition(lambda self: any(not d.aborted for d in self.sender.queue))
    def abort(self, which: int) -> None:
        """Abort a queued delivery: the head may be part-way out, the others are unsent."""
        live = [d for d in self.sender.queue if not d.aborted]
        delivery = live[min(which, len(live) - 1)]
        if delivery.offset > 0:
            event("abort part-way through a delivery")
        index = next(i for i, d in enumerate(self.sent_deliveries) if d is delivery)
        self.sender.abort(delivery)
        self.aborted.add(delivery.tag)
        del self.sent[index], self.sent_deliveries[index], self.presettled[index]

    @rule(count=st.integers(min_value=1, max_value=10), release=st.booleans())
    def settle(self, count: int, release: bool) -> None:
        pending = [d for d in self.received if not d.settled and not d.remote_settled][:count]
        for delivery in pending:
            self.receiver.settle(delivery, Released() if release else Accepted())

    @rule(to_server=st.booleans(), n=st.integers(min_value=1, max_value=2000))
    def transmit(self, to_server: bool, n: int) -> None:
        self._collect()
        self._deliver(to_server, n)

    @rule()
    def pump(self) -> None:
        """Move everything both ways until both engines are quiet."""
        self._flush_all()

    # -- invariants ------------------------------------------------------------------
    @invariant()
    def no_protocol_error(self) -> None:
        if not self.ready:
            return
        for ev in self.client_events + self.server_events:
            assert not isinstance(ev, ConnectionClosed | LinkDetached | SessionEnded), ev

    @invariant()
    def nothing_lost_duplicated_or_reordered(self) -> None:
        if not self.ready:
            return
        got = [bytes(d.payload) for d in self.received]
        assert got == self.sent[: len(got)]

    @invariant()
    def credit_and_windows_respected(self) -> None:
        if not self.ready:
            return
        assert self.sender.link_credit >= 0
        assert self.receiver.link_credit >= 0
        assert self.server.sessions[0].incoming_window >= 0
        assert self.client.sessions[0].remote_incoming_window >= 0
        # delivery-count only moves ahead of what arrived by a drain, never behind
        # (counted from the initial-delivery-count, as a serial number)
        assert serial_diff(self.receiver.delivery_count, self.initial) >= len(self.received)
        assert serial_diff(self.sender.delivery_count, self.initial) >= len(self.sent) - len(self.sender.queue)
        # 2.6.7: the sender never went past the credit the receiver granted (a transfer
        # beyond it would be counted here), not even by a drain's advance
        assert self.receiver.excess_transfers == 0
        assert serial_diff(self.sender.delivery_count, self.receiver._delivery_limit) <= 0

    def teardown(self) -> None:
        if not self.ready:
            return
        self._flush_all()
        assert not self.receiver.drain, "a drain never completed"
        for _ in range(3):  # a grant may cross a drain answer on the wire: grant again
            if len(self.received) == len(self.sent):
                break
            self.receiver.flow(len(self.sent) - len(self.received))
            self._flush_all()
        for delivery in self.received:
            if not delivery.settled and not delivery.remote_settled:
                self.receiver.settle(delivery, Accepted())
        self._flush_all()
        assert [bytes(d.payload) for d in self.received] == self.sent
        assert not self.sender.queue
        assert not self.sender.unsettled, "every unsettled delivery reached a terminal state"
        assert not self.receiver.unsettled
        assert not self.sender.session.outgoing_unsettled and not self.receiver.session.incoming_unsettled
        unsettled_sends = [d for d, pre in zip(self.sent_deliveries, self.presettled, strict=True) if not pre]
        for delivery in self.sent_deliveries:
            assert delivery.settled
        for delivery in unsettled_sends:
            assert isinstance(delivery.remote_state, Accepted | Released), f"{delivery} never got an outcome"
        updated = {id(d) for d, _ in updates_in(self.client_events)}
        assert updated == {id(d) for d in unsettled_sends}
        self.no_protocol_error()


LinkMachine.TestCase.settings = settings(stateful_step_count=50, deadline=None)
TestLinkMachine = LinkMachine.TestCase


class LifecycleMachine(LinkMachine):
    """The same traffic, with the link detached or the session ended from either side at
    a random point (2.5.5, 2.6.6). Checked after every step: a send on a link this side
    has ended raises at once; no side writes a frame on its session after its end, nor
    a transfer or flow on a link after its detach; the peer never sees a frame it cannot
    place (no end or detach with an error, no close). At the end both sides agree the
    link (and, after an end, the session) is gone."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: str | None = None
        self.log_c2s = bytearray()
        self.log_s2c = bytearray()

    def _collect(self) -> None:
        c2s, s2c = self.client.data_to_send(), self.server.data_to_send()
        self.c2s += c2s
        self.s2c += s2c
        self.log_c2s += c2s
        self.log_s2c += s2c

    @rule(how=st.sampled_from(["client-end", "server-end", "client-detach", "server-detach"]))
    @precondition(lambda self: self.ready and self.finished is None)
    def finish(self, how: str) -> None:
        side, what = how.split("-")
        if what == "end":
            (self.client if side == "client" else self.server).sessions[0].end()
        else:
            (self.sender if side == "client" else self.receiver).detach()
        self.finished = how
        event(f"finish: {how}")

    @rule(size=st.integers(min_value=0, max_value=3000), presettled=st.booleans())
    @precondition(lambda self: len(self.sender.queue) < 40)
    def send(self, size: int, presettled: bool) -> None:
        if self.sender.is_detached:
            with pytest.raises(EngineStateError, match="'link'"):
                self.sender.send(b"late")
            event("a send on an ended link raised")
            return
        super().send(size, presettled)

    @invariant()
    def no_protocol_error(self) -> None:
        if not self.ready:
            return
        for ev in self.client_events + self.server_events:
            if self.finished is None or isinstance(ev, ConnectionClosed):
                assert not isinstance(ev, ConnectionClosed | LinkDetached | SessionEnded), ev
            elif isinstance(ev, LinkDetached | SessionEnded):
                assert ev.error is None, ev  # e.g. amqp:session:unattached-handle

    @invariant()
    def credit_and_windows_respected(self) -> None:
        if self.ready and self.finished is None:
            super().credit_and_windows_respected()

    @invariant()
    def nothing_written_after_end_or_detach(self) -> None:
        if not self.ready or self.finished is None:
            return
        for log in (self.log_c2s, self.log_s2c):
            ended = detached = False
            for _, performative, _ in frames_in([bytes(log)]):
                assert not ended, f"{performative!r} written after end"
                if isinstance(performative, End):
                    ended = True
                elif isinstance(performative, Detach):
                    detached = True
                elif detached and isinstance(performative, Transfer | Flow) and performative.handle is not None:
                    raise AssertionError(f"{performative!r} written after detach")

    def teardown(self) -> None:
        if not self.ready:
            return
        if self.finished is None:
            super().teardown()
            return
        self._flush_all()
        self.no_protocol_error()
        self.nothing_written_after_end_or_detach()
        assert self.sender.state is LinkState.ENDED and self.receiver.state is LinkState.ENDED
        with pytest.raises(EngineStateError):
            self.sender.send(b"after")
        if self.finished.endswith("end"):
            assert not self.client.sessions and not self.server.sessions
        else:
            assert self.client.sessions[0].is_mapped and not self.client.sessions[0].links
            assert self.server.sessions[0].is_mapped and not self.server.sessions[0].links
        assert self.client.is_open and self.server.is_open


LifecycleMachine.TestCase.settings = settings(stateful_step_count=40, deadline=None)
TestLifecycleMachine = LifecycleMachine.TestCase
