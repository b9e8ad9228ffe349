"""Two engines back to back: every performative and every settle-mode pair."""

from __future__ import annotations

import itertools

import pytest

from amqplink.codec.types import Symbol
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.errors import EngineStateError
from amqplink.engine.events import (
    ConnectionClosed,
    ConnectionOpened,
    DeliveryAborted,
    LinkAttached,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    LinkDrained,
    SaslCompleted,
    SessionBegun,
    SessionEnded,
)
from amqplink.engine.link import (
    RCV_FIRST,
    RCV_SECOND,
    SND_MIXED,
    SND_SETTLED,
    SND_UNSETTLED,
    ReceiverLink,
    SenderLink,
)
from amqplink.engine.sasl import SaslClient, SaslServer
from amqplink.protocol.definitions import (
    Accepted,
    Begin,
    Disposition,
    Error,
    Modified,
    Open,
    Rejected,
    Released,
    Source,
    Target,
    Transfer,
)

from .pairs import Pair, performatives


def _link_pair(
    pair: Pair,
    name: str = "q",
    *,
    snd: int = SND_UNSETTLED,
    rcv: int = RCV_FIRST,
) -> tuple[SenderLink, ReceiverLink]:
    session = pair.open()
    sender = session.attach_sender(name, target=Target(address="queue"), snd_settle_mode=snd, rcv_settle_mode=rcv)
    pair.pump()
    receiver = pair.server_link(name, sender=False)
    assert isinstance(receiver, ReceiverLink)
    return sender, receiver


def test_open_begin_end_close_handshake() -> None:
    pair = Pair()
    pair.client.open()
    session = pair.client.begin_session()
    pair.pump()
    assert [type(e) for e in pair.take("client")] == [ConnectionOpened, SessionBegun]
    assert [type(e) for e in pair.take("server")] == [ConnectionOpened, SessionBegun]
    assert pair.client.remote_open is not None and pair.client.remote_open.container_id == "server"
    session.end()
    pair.pump()
    ended = pair.of(SessionEnded)
    assert len(ended) == 1 and not ended[0].by_peer and ended[0].error is None
    assert pair.of(SessionEnded, "server")[0].by_peer
    assert not pair.client.sessions and not pair.server.sessions
    pair.client.close()
    pair.pump()
    assert pair.client.closed and pair.server.closed
    closed = pair.of(ConnectionClosed, "server")
    assert closed == [ConnectionClosed(None, True)]


def test_frames_pipelined_before_the_peer_answers() -> None:
    pair = Pair()
    pair.client.open()
    session = pair.client.begin_session()
    session.attach_sender("s", target=Target(address="x"))
    first_flight = pair.client.data_to_send()
    # header, open, begin and attach leave in one write before any answer
    assert first_flight.startswith(b"AMQP\x00\x01\x00\x00")
    events = pair.server.receive_data(first_flight)
    kinds = [type(e) for e in events]
    assert kinds == [ConnectionOpened, SessionBegun, LinkAttachRequested]


@pytest.mark.parametrize(
    ("sasl_client", "expect_mechanism", "expect_identity"),
    [
        (SaslClient(), "ANONYMOUS", None),
        (SaslClient(username="alice", password="s3cret"), "PLAIN", "alice"),
        (SaslClient(mechanism="EXTERNAL"), "EXTERNAL", None),
        (SaslClient(mechanism="MSSBCBS"), "MSSBCBS", None),
    ],
)
def test_sasl_mechanisms(sasl_client: SaslClient, expect_mechanism: str, expect_identity: str | None) -> None:
    checked: list[tuple[str, str | None, str | None]] = []

    def authenticate(mechanism: str, user: str | None, password: str | None) -> bool:
        checked.append((mechanism, user, password))
        return mechanism != "PLAIN" or (user, password) == ("alice", "s3cret")

    server = SaslServer(mechanisms=("PLAIN", "ANONYMOUS", "EXTERNAL", "MSSBCBS"), authenticate=authenticate)
    pair = Pair(sasl_client=sasl_client, sasl_server=server)
    pair.open()
    done = pair.of(SaslCompleted, "server")
    assert done == [SaslCompleted(expect_mechanism, expect_identity)]
    assert checked[0][0] == expect_mechanism
    assert pair.of(SaslCompleted)[0].mechanism == expect_mechanism


def test_sasl_plain_wrong_password_closes_with_unauthorized_access() -> None:
    server = SaslServer(mechanisms=("PLAIN",), authenticate=lambda m, u, p: p == "right")
    pair = Pair(sasl_client=SaslClient(username="bob", password="wrong"), sasl_server=server)
    pair.client.open()
    pair.pump()
    closed = pair.of(ConnectionClosed)
    assert len(closed) == 1 and closed[0].error is not None
    assert closed[0].error.condition == "amqp:unauthorized-access"
    assert not pair.client.is_open
    assert "wrong" not in repr(pair.client.sasl)


def test_sasl_client_against_server_without_sasl_fails_cleanly() -> None:
    pair = Pair(sasl_client=SaslClient())
    pair.client.open()
    pair.pump()
    closed = pair.of(ConnectionClosed)
    assert closed and closed[0].error is not None
    assert closed[0].error.condition == "amqp:connection:framing-error"
    assert pair.server.closed


SETTLE_MODES = list(itertools.product([SND_UNSETTLED, SND_SETTLED, SND_MIXED], [RCV_FIRST, RCV_SECOND]))


@pytest.mark.parametrize(("snd", "rcv"), SETTLE_MODES)
def test_transfer_and_settlement_for_every_settle_mode_pair(snd: int, rcv: int) -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair, snd=snd, rcv=rcv)
    assert pair.of(LinkAttached) and sender.is_attached
    receiver.flow(10)
    pair.pump()
    assert sender.link_credit == 10
    presettled = snd == SND_SETTLED
    deliveries = [sender.send(f"m{i}".encode(), settled=presettled if snd == SND_MIXED else None) for i in range(5)]
    pair.pump()
    received = pair.deliveries("server")
    assert [bytes(d.payload) for d in received] == [f"m{i}".encode() for i in range(5)]
    assert sender.link_credit == 5 and receiver.link_credit == 5
    assert receiver.delivery_count == sender.delivery_count == 5
    for delivery in received:
        assert delivery.remote_settled is presettled
        receiver.settle(delivery, Accepted())
    pair.pump()
    if presettled:
        assert not pair.updated()
        assert all(d.settled for d in deliveries)
        assert not performatives(pair.wire_s2c, Disposition)
    else:
        updates = [event for _, event in pair.updated()]
        assert len(updates) == 5
        assert all(isinstance(u.state, Accepted) for u in updates)
        assert all(d.settled for d in deliveries)
        assert all(d.settled for d in received)
        assert not sender.unsettled and not receiver.unsettled
        assert not sender.session.outgoing_unsettled and not receiver.session.incoming_unsettled
        if rcv == RCV_SECOND:
            # receiver: unsettled outcome, sender settles, receiver forgets
            assert [u.settled for u in updates] == [False] * 5
            assert pair.updated("server") and all(u.settled for _, u in pair.updated("server"))
        else:
            assert [u.settled for u in updates] == [True] * 5


@pytest.mark.parametrize(
    "outcome",
    [
        Accepted(),
        Rejected(error=Error(condition=Symbol("com.microsoft:dead-letter"), description="bad")),
        Released(),
        Modified(delivery_failed=True, undeliverable_here=False, message_annotations={Symbol("x"): 1}),
    ],
)
def test_every_outcome_reaches_the_sender(outcome: object) -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair)
    receiver.flow(1)
    pair.pump()
    sender.send(b"x")
    pair.pump()
    receiver.settle(pair.deliveries("server")[0], outcome)
    pair.pump()
    _, update = pair.updated()[0]
    assert update.state == outcome and type(update.state) is type(outcome)


def test_sender_never_sends_past_credit() -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair)
    for i in range(10):
        sender.send(bytes([i]))
    receiver.flow(3)
    pair.pump()
    assert len(pair.deliveries("server")) == 3
    assert len(sender.queue) == 7 and sender.link_credit == 0
    assert len(performatives(pair.wire_c2s, Transfer)) == 3
    receiver.add_credit(4)
    pair.pump()
    assert len(pair.deliveries("server")) == 7


def test_drain_with_nothing_to_send_returns_all_credit() -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair)
    sender.send(b"one")
    receiver.flow(5, drain=True)
    pair.pump()
    assert len(pair.deliveries("server")) == 1
    assert pair.of(LinkDrained, "server") == [LinkDrained(receiver)]
    assert sender.link_credit == 0 and receiver.link_credit == 0
    assert sender.delivery_count == receiver.delivery_count == 5
    drain_events = [e for e in pair.of(LinkCreditChanged) if e.drain]
    assert drain_events and drain_events[0].credit == 5


def test_echo_flow_is_answered_with_link_state() -> None:
    pair = Pair()
    _, receiver = _link_pair(pair)
    receiver.link_credit = 2
    receiver._send_flow(echo=True)
    pair.pump()
    flows = performatives(pair.wire_c2s, type(receiver._flow_frame()))
    assert flows and int(flows[-1].link_credit) == 2 and int(flows[-1].delivery_count) == 0


def test_multi_frame_transfer_is_split_and_reassembled() -> None:
    small = ConnectionConfig(container_id="server", max_frame_size=512)
    pair = Pair(server_config=small)
    sender, receiver = _link_pair(pair)
    receiver.flow(2)
    pair.pump()
    big = bytes(range(256)) * 40  # 10 KiB
    sender.send(big)
    sender.send(b"after")
    pair.pump()
    transfers = performatives(pair.wire_c2s, Transfer)
    assert len(transfers) > 20
    assert all(t.more for t in transfers[:-2]) and not transfers[-1].more
    assert max(len(c) for c in pair.wire_c2s) > 0
    got = [bytes(d.payload) for d in pair.deliveries("server")]
    assert got == [big, b"after"]
    # every frame respected the server's max-frame-size
    from .pairs import frames_in

    for _, perf, payload in frames_in(pair.wire_c2s):
        if isinstance(perf, Transfer):
            assert len(payload) < 512


def test_abort_mid_delivery_reaches_the_receiver() -> None:
    small = ConnectionConfig(container_id="server", max_frame_size=512, incoming_window=4)
    pair = Pair(server_config=small)
    sender, receiver = _link_pair(pair)
    receiver.flow(2)
    pair.pump()
    delivery = sender.send(b"z" * 5000)
    # the server's window of 4 frames stops the delivery part-way
    assert 0 < delivery.offset < 5000
    sender.abort(delivery)
    sender.send(b"next")
    pair.pump()
    assert [e.delivery.aborted for e in pair.of(DeliveryAborted, "server")] == [True]
    received = pair.deliveries("server")
    assert [bytes(d.payload) for d in received] == [b"next"]
    assert list(receiver.unsettled) == [received[0].delivery_id]
    assert delivery.delivery_id not in sender.unsettled


def test_session_window_blocks_then_resumes() -> None:
    server_cfg = ConnectionConfig(container_id="server", incoming_window=4)
    pair = Pair(server_config=server_cfg)
    sender, receiver = _link_pair(pair)
    receiver.flow(100)
    pair.pump()
    for i in range(50):
        sender.send(i.to_bytes(2, "big"))
    pair.pump()
    got = [int.from_bytes(bytes(d.payload), "big") for d in pair.deliveries("server")]
    assert got == list(range(50))
    # the server never let its incoming window go below zero
    assert receiver.session.incoming_window >= 0


def test_dispositions_are_sent_as_ranges() -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair)
    pair.grant_and_send(sender, receiver, 100, 100)
    before = len(performatives(pair.wire_s2c, Disposition))
    for delivery in pair.deliveries("server"):
        receiver.settle(delivery, Accepted())
    pair.pump()
    dispositions = performatives(pair.wire_s2c, Disposition)[before:]
    assert len(dispositions) == 1
    assert int(dispositions[0].first) == 0 and int(dispositions[0].last) == 99
    assert len(pair.updated()) == 100


def test_batchable_hint_travels_both_ways_and_splits_ranges() -> None:
    # "If true, then the issuer is hinting that there is no need for the peer to
    # urgently communicate updated delivery state." (2.7.6)
    pair = Pair()
    sender, receiver = _link_pair(pair)
    pair.grant_and_send(sender, receiver, 10, 10)
    before = len(performatives(pair.wire_s2c, Disposition))
    for delivery in pair.deliveries("server"):
        receiver.settle(delivery, Accepted(), batchable=int(delivery.delivery_id) < 6)
    pair.pump()
    dispositions = performatives(pair.wire_s2c, Disposition)[before:]
    ranges = sorted((int(d.first), int(d.last or d.first), bool(d.batchable)) for d in dispositions)
    assert ranges == [(0, 5, True), (6, 9, False)]
    updates = {int(d.delivery_id): e.batchable for d, e in pair.updated()}
    assert updates == {i: i < 6 for i in range(10)}


def test_detach_and_refusal_with_null_terminus() -> None:
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    sender = session.attach_sender("nope", target=Target(address="missing"))
    pair.pump()
    requested = pair.of(LinkAttachRequested, "server")[0]
    requested.link.attach(None, None, keep=False)
    requested.link.detach(Error(condition=Symbol("amqp:not-found"), description="no such queue"))
    pair.pump()
    detached = pair.of(LinkDetached)
    assert len(detached) == 1 and detached[0].by_peer and detached[0].closed
    assert detached[0].error is not None and detached[0].error.condition == "amqp:not-found"
    assert sender.is_detached and not session.links
    with pytest.raises(EngineStateError):
        sender.send(b"x")


def test_receiver_link_attached_by_client() -> None:
    pair = Pair()
    session = pair.open()
    receiver = session.attach_receiver("r", source=Source(address="queue"), rcv_settle_mode=RCV_SECOND)
    pair.pump()
    server_sender = pair.server_link("r", sender=True)
    assert isinstance(server_sender, SenderLink)
    assert server_sender.rcv_settle_mode == RCV_SECOND
    receiver.flow(1)
    pair.pump()
    server_sender.send(b"from-server")
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries()] == [b"from-server"]


def test_two_sessions_are_independent() -> None:
    pair = Pair()
    s1 = pair.open()
    s2 = pair.client.begin_session()
    pair.pump()
    assert s1.channel != s2.channel and s2.is_mapped
    s1.end()
    pair.pump()
    assert s2.is_mapped and not s1.is_mapped


def test_heartbeats_and_idle_timeout() -> None:
    client_cfg = ConnectionConfig(container_id="client", idle_timeout=10.0)
    server_cfg = ConnectionConfig(container_id="server", idle_timeout=4.0)
    pair = Pair(client_config=client_cfg, server_config=server_cfg)
    pair.open()
    assert pair.client.remote_open is not None and int(pair.client.remote_open.idle_time_out) == 2000
    pair.client.tick(100.0)
    pair.server.tick(100.0)
    # the server advertised 2 s: the client must send something at least every 1 s
    pair.client.tick(101.0)
    beat = pair.client.data_to_send()
    assert beat == b"\x00\x00\x00\x08\x02\x00\x00\x00"
    pair.server.receive_data(beat)
    assert not pair.server.tick(103.5)
    # the client goes silent: the server gives up after 4 s with resource-limit-exceeded
    events = pair.server.tick(107.6)
    assert len(events) == 1 and isinstance(events[0], ConnectionClosed)
    assert events[0].error is not None and events[0].error.condition == "amqp:resource-limit-exceeded"
    client_events = pair.client.receive_data(pair.server.data_to_send())
    assert isinstance(client_events[-1], ConnectionClosed) and client_events[-1].by_peer


def test_end_and_close_with_errors_reach_the_peer_and_stay_with_the_sender() -> None:
    """end and close "carry error information when relevant" (2.5.2, 2.4.3): the peer
    sees the error by_peer; this side's own event keeps the error it sent."""
    pair = Pair()
    session = pair.open()
    end_error = Error(condition=Symbol("amqp:resource-limit-exceeded"), description="too many links")
    session.end(end_error)
    pair.pump()
    assert [(e.error, e.by_peer) for e in pair.of(SessionEnded, "server")] == [(end_error, True)]
    assert pair.of(SessionEnded) == [SessionEnded(session, end_error, False)]
    close_error = Error(condition=Symbol("amqp:connection:forced"), description="shutting down")
    pair.client.close(close_error)
    pair.pump()
    assert pair.of(ConnectionClosed, "server") == [ConnectionClosed(close_error, True)]
    assert pair.of(ConnectionClosed) == [ConnectionClosed(close_error, False)]


def test_detach_with_error_stays_with_the_side_that_sent_it() -> None:
    pair = Pair()
    sender, receiver = _link_pair(pair)
    error = Error(condition=Symbol("amqp:link:message-size-exceeded"), description="1 MiB at most")
    receiver.detach(error)
    pair.pump()
    assert pair.of(LinkDetached) == [LinkDetached(sender, error, True, True)]
    assert pair.of(LinkDetached, "server") == [LinkDetached(receiver, error, True, False)]


def test_channel_max_is_advertised_and_limits_sessions() -> None:
    """channel-max: "This value plus one is the maximum number of sessions that can be
    simultaneously active on the connection." (2.7.1)"""
    pair = Pair(server_config=ConnectionConfig(container_id="server", channel_max=1))
    first = pair.open()
    second = pair.client.begin_session()
    pair.pump()
    assert (first.channel, second.channel) == (0, 1) and second.is_mapped
    (server_open,) = [p for p in performatives(pair.wire_s2c, Open)]
    assert int(server_open.channel_max) == 1 and pair.client.remote_channel_max == 1
    with pytest.raises(EngineStateError, match="channels"):
        pair.client.begin_session()
    first.end()
    pair.pump()
    assert pair.client.begin_session().channel == 0  # a freed channel is used again


def test_handle_max_is_advertised_and_limits_links() -> None:
    """handle-max: "A peer MUST NOT attempt to attach a link using a handle value outside
    the range that its partner can handle." (2.7.2)"""
    pair = Pair(server_config=ConnectionConfig(container_id="server", handle_max=1))
    session = pair.open()
    (server_begin,) = [p for p in performatives(pair.wire_s2c, Begin)]
    assert int(server_begin.handle_max) == 1
    links = [session.attach_sender(f"s{i}", target=Target(address="q")) for i in range(2)]
    assert [link.handle for link in links] == [0, 1]
    with pytest.raises(EngineStateError, match="handles"):
        session.attach_sender("s2", target=Target(address="q"))
    links[0].detach()
    pair.pump()
    assert session.attach_sender("s3", target=Target(address="q")).handle == 0
    pair.pump()
    assert not pair.of(ConnectionClosed, "server") and pair.server.is_open


def test_before_the_peers_open_only_channel_0_may_be_used() -> None:
    """ "Prior to any explicit negotiation ... the maximum channel number is 0." (2.4.1)"""
    pair = Pair()
    pair.client.open()
    pair.client.begin_session()
    with pytest.raises(EngineStateError, match="channels"):
        pair.client.begin_session()
    pair.pump()
    assert pair.client.begin_session().channel == 1
