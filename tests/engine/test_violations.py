"""A peer that breaks the protocol: the engine ends the connection, session or link with
the condition the spec gives, and never raises."""

from __future__ import annotations

from typing import Any

from amqplink.codec.types import Symbol, UInt, UShort
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import (
    ConnectionClosed,
    LinkAttachRequested,
    LinkDetached,
    SessionEnded,
)
from amqplink.engine.frames import AMQP_HEADER
from amqplink.engine.link import ReceiverLink
from amqplink.engine.session import Session
from amqplink.protocol.definitions import (
    Attach,
    Begin,
    Close,
    Detach,
    End,
    Flow,
    Open,
    Target,
    Transfer,
)

from .pairs import Pair, frame, frames_in, received_in


def closed_with(events: list[Any]) -> str:
    closes = [e for e in events if isinstance(e, ConnectionClosed)]
    assert len(closes) == 1, events
    assert closes[0].error is not None and not closes[0].by_peer
    return str(closes[0].error.condition)


def written(conn: Connection, kind: type) -> list[Any]:
    return [p for _, p, _ in frames_in([conn.data_to_send()]) if isinstance(p, kind)]


def attach(name: str, handle: int, *, sender: bool = True) -> Attach:
    return Attach(
        name=name,
        handle=UInt(handle),
        role=not sender,
        target=Target(address="q"),
        initial_delivery_count=UInt(0) if sender else None,
    )


def transfer(handle: int, delivery_id: int, payload: bytes = b"x", **kw: Any) -> bytes:
    return frame(0, Transfer(handle=UInt(handle), delivery_id=UInt(delivery_id), delivery_tag=b"t", **kw), payload)


def server_with_session(**config: Any) -> tuple[Connection, Session]:
    """A server that has accepted open and begin on channel 0 from a hand-driven peer."""
    server = Connection(ConnectionConfig(container_id="server", **config), server=True)
    server.receive_data(
        AMQP_HEADER
        + frame(0, Open(container_id="peer"))
        + frame(0, Begin(next_outgoing_id=UInt(0), incoming_window=UInt(100), outgoing_window=UInt(100)))
    )
    server.data_to_send()
    session = server.sessions[0]
    assert session.is_mapped
    return server, session


def with_receiver(server: Connection, handle: int = 0, credit: int = 100) -> ReceiverLink:
    events = server.receive_data(frame(0, attach(f"link-{handle}", handle)))
    (requested,) = [e for e in events if isinstance(e, LinkAttachRequested)]
    link = requested.link
    assert isinstance(link, ReceiverLink)
    link.attach()
    link.flow(credit)
    server.data_to_send()
    return link


def session_ended_with(server: Connection, session: Session, condition: str) -> None:
    """The session answered the violation with end(error) and discards until the peer's end."""
    (end,) = written(server, End)
    assert end.error is not None and end.error.condition == condition
    assert session.end_sent and server.is_open
    events = server.receive_data(frame(0, End()))
    assert events == [SessionEnded(session, end.error, False)]  # the event carries this side's error


# -- connection scope --------------------------------------------------------------------------


def test_frame_before_open_is_illegal_state() -> None:
    """ "each peer MUST send an open frame before sending any other frames" (2.4.1);
    "amqp:illegal-state: The peer sent a frame that is not permitted in the current state"."""
    for first in (
        Begin(next_outgoing_id=UInt(0), incoming_window=UInt(1), outgoing_window=UInt(1)),
        Flow(incoming_window=UInt(1), next_outgoing_id=UInt(0), outgoing_window=UInt(1)),
        Close(),
    ):
        server = Connection(ConnectionConfig(container_id="server"), server=True)
        events = server.receive_data(AMQP_HEADER + frame(0, first))
        assert closed_with(events) == "amqp:illegal-state"
        (close,) = written(server, Close)
        assert close.error is not None and close.error.condition == "amqp:illegal-state"


def test_second_open_is_illegal_state() -> None:
    server, _ = server_with_session()
    assert closed_with(server.receive_data(frame(0, Open(container_id="again")))) == "amqp:illegal-state"


def test_begin_on_a_mapped_channel_is_illegal_state() -> None:
    server, _ = server_with_session()
    begin = Begin(next_outgoing_id=UInt(0), incoming_window=UInt(1), outgoing_window=UInt(1))
    assert closed_with(server.receive_data(frame(0, begin))) == "amqp:illegal-state"


def test_begin_answering_a_channel_that_began_nothing_is_not_allowed() -> None:
    server, _ = server_with_session()
    begin = Begin(remote_channel=UShort(5), next_outgoing_id=UInt(0), incoming_window=UInt(1), outgoing_window=UInt(1))
    assert closed_with(server.receive_data(frame(1, begin))) == "amqp:not-allowed"


def test_frame_on_a_channel_with_no_session_is_not_allowed() -> None:
    server, _ = server_with_session()
    flow = Flow(incoming_window=UInt(1), next_outgoing_id=UInt(0), outgoing_window=UInt(1))
    assert closed_with(server.receive_data(frame(3, flow))) == "amqp:not-allowed"


def test_attach_after_end_is_not_allowed() -> None:
    """Once both ends are exchanged the channel is unmapped: nothing more may arrive on it."""
    server, _ = server_with_session()
    events = server.receive_data(frame(0, End()))
    assert [type(e) for e in events] == [SessionEnded] and events[0].by_peer
    assert written(server, End) and not server.sessions
    assert closed_with(server.receive_data(frame(0, attach("late", 0)))) == "amqp:not-allowed"


def test_frames_after_this_side_ended_are_discarded_until_the_peer_ends() -> None:
    """DISCARDING: "any incoming frames on the session MUST be silently discarded until
    the peer's end frame is received" (2.5.5)."""
    server, session = server_with_session()
    session.end()
    server.data_to_send()
    assert server.receive_data(frame(0, attach("ignored", 0)) + transfer(7, 0)) == []
    assert server.data_to_send() == b"" and server.is_open
    events = server.receive_data(frame(0, End()))
    assert [type(e) for e in events] == [SessionEnded]


def test_channel_above_channel_max_is_a_framing_error() -> None:
    """ "A peer that receives a channel number outside the supported range MUST close the
    connection with the framing-error error-code." (2.7.1)"""
    server, _ = server_with_session(channel_max=3)
    begin = Begin(next_outgoing_id=UInt(0), incoming_window=UInt(1), outgoing_window=UInt(1))
    assert server.receive_data(frame(3, begin))  # channel 3 is within range
    assert closed_with(server.receive_data(frame(4, begin))) == "amqp:connection:framing-error"
    (close,) = written(server, Close)
    assert close.error is not None and close.error.condition == "amqp:connection:framing-error"


def test_empty_frame_above_channel_max_is_a_framing_error() -> None:
    server, _ = server_with_session(channel_max=3)
    assert closed_with(server.receive_data(b"\x00\x00\x00\x08\x02\x00\x00\x04")) == "amqp:connection:framing-error"


def test_attach_above_handle_max_is_a_framing_error() -> None:
    """ "A peer that receives a handle outside the supported range MUST close the
    connection with the framing-error error-code." (2.7.2)"""
    server, _ = server_with_session(handle_max=7)
    assert [type(e) for e in server.receive_data(frame(0, attach("ok", 7)))] == [LinkAttachRequested]
    assert closed_with(server.receive_data(frame(0, attach("too-high", 8)))) == "amqp:connection:framing-error"


def test_transfer_on_a_handle_above_handle_max_is_a_framing_error() -> None:
    server, _ = server_with_session(handle_max=7)
    assert closed_with(server.receive_data(transfer(8, 0))) == "amqp:connection:framing-error"


def test_undecodable_body_is_a_decode_error() -> None:
    server, _ = server_with_session()
    events = server.receive_data(b"\x00\x00\x00\x0c\x02\x00\x00\x00\x00\x53\x12\xff")
    assert closed_with(events) == "amqp:decode-error"


def test_field_of_the_wrong_type_is_a_decode_error() -> None:
    """An attach whose name is binary instead of a string (found by the fuzz test: echoing
    it back used to end in amqp:internal-error)."""
    server, _ = server_with_session()
    body = bytearray()
    attach("name", 0)._amqp_encode(body)
    at = body.index(b"\xa1\x04name")
    body[at] = 0xA0  # string -> binary
    events = server.receive_data(_frame_with_body(bytes(body)))
    assert closed_with(events) == "amqp:decode-error"
    (close,) = written(server, Close)
    assert close.error is not None and "attach: field 'name' must be string, got bytes" in str(close.error.description)


def _frame_with_body(body: bytes) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body


# -- session scope -------------------------------------------------------------------------------


def test_transfer_on_an_unattached_handle_ends_the_session() -> None:
    """ "amqp:session:unattached-handle: An attempt was made to interact with a handle
    that is not currently attached." (2.8.16)"""
    server, session = server_with_session()
    assert server.receive_data(transfer(2, 0)) == []
    session_ended_with(server, session, "amqp:session:unattached-handle")


def test_flow_and_detach_on_an_unattached_handle_end_the_session() -> None:
    for performative in (
        Flow(
            incoming_window=UInt(1),
            next_outgoing_id=UInt(0),
            outgoing_window=UInt(1),
            handle=UInt(4),
            delivery_count=UInt(0),
            link_credit=UInt(1),
        ),
        Detach(handle=UInt(4), closed=True),
    ):
        server, session = server_with_session()
        server.receive_data(frame(0, performative))
        session_ended_with(server, session, "amqp:session:unattached-handle")


def test_attach_on_a_handle_in_use_ends_the_session() -> None:
    """ "amqp:session:handle-in-use: An attempt was made to link to a handle that is
    already in use." (2.8.16)"""
    server, session = server_with_session()
    with_receiver(server, handle=0)
    assert server.receive_data(frame(0, attach("other-name", 0))) == []
    session_ended_with(server, session, "amqp:session:handle-in-use")


def test_transfer_beyond_the_incoming_window_ends_the_session() -> None:
    """ "amqp:session:window-violation: The peer violated incoming window for the session."
    The window reopens only with a flow this side has written: transfers past the
    last one the peer was told of are a violation, however fast they come."""
    server, session = server_with_session(incoming_window=4)
    with_receiver(server)
    flood = b"".join(transfer(0, i) for i in range(5))
    events = server.receive_data(flood)
    assert len(received_in(events)) == 4
    session_ended_with(server, session, "amqp:session:window-violation")


def test_transfers_within_each_advertised_window_are_fine() -> None:
    server, session = server_with_session(incoming_window=4)
    with_receiver(server)
    delivered = 0
    for batch in range(5):
        events = server.receive_data(b"".join(transfer(0, batch * 4 + i) for i in range(4)))
        delivered += len(received_in(events))
        (flow,) = written(server, Flow)  # the window reopens once the batch is read
        assert int(flow.incoming_window) == 4 and int(flow.next_incoming_id) == (batch + 1) * 4
    assert delivered == 20 and session.is_mapped


# -- link scope ----------------------------------------------------------------------------------


def test_continuation_with_another_delivery_id_detaches_the_link() -> None:
    """ "It is an error if the delivery-id on a continuation transfer differs from the
    delivery-id on the first transfer of a delivery." (2.7.5)"""
    server, session = server_with_session()
    link = with_receiver(server)
    server.receive_data(transfer(0, 0, more=True))
    events = server.receive_data(frame(0, Transfer(handle=UInt(0), delivery_id=UInt(1)), b"y"))
    assert events == []
    (detach,) = written(server, Detach)
    assert detach.error is not None and detach.error.condition == "amqp:not-allowed"
    assert session.is_mapped and link.detach_sent
    events = server.receive_data(frame(0, Detach(handle=UInt(0), closed=True)))
    assert events == [LinkDetached(link, detach.error, True, False)]


def test_transfer_on_a_link_where_this_side_sends_ends_the_session() -> None:
    server, session = server_with_session()
    events = server.receive_data(frame(0, attach("r", 0, sender=False)))
    events[0].link.attach()
    server.data_to_send()
    server.receive_data(transfer(0, 0))
    session_ended_with(server, session, "amqp:not-allowed")


def test_a_peer_that_attaches_more_links_than_it_lets_this_side_have_ends_the_session() -> None:
    """The peer's begin allows this side handles 0..1 only; a third link it attaches
    cannot get a handle here: the session ends with amqp:resource-limit-exceeded."""
    server = Connection(ConnectionConfig(container_id="server"), server=True)
    server.receive_data(
        AMQP_HEADER
        + frame(0, Open(container_id="peer"))
        + frame(
            0, Begin(next_outgoing_id=UInt(0), incoming_window=UInt(9), outgoing_window=UInt(9), handle_max=UInt(1))
        )
    )
    server.data_to_send()
    session = server.sessions[0]
    for handle in (0, 1):
        (requested,) = server.receive_data(frame(0, attach(f"l{handle}", handle)))
        assert isinstance(requested, LinkAttachRequested)
    assert server.receive_data(frame(0, attach("l2", 2))) == []
    session_ended_with(server, session, "amqp:resource-limit-exceeded")


def test_the_pair_reports_a_violation_on_both_sides() -> None:
    """End to end: the client's session sees the server's end with its condition."""
    pair = Pair()
    session = pair.open()
    pair.client.send_frame(session.channel, Transfer(handle=UInt(9), delivery_id=UInt(0), delivery_tag=b"t"), b"x")
    pair.pump()
    (ended,) = pair.of(SessionEnded)
    assert ended.by_peer and ended.error is not None
    assert ended.error.condition == Symbol("amqp:session:unattached-handle")
    (server_ended,) = pair.of(SessionEnded, "server")
    assert not server_ended.by_peer and server_ended.error == ended.error
    assert pair.client.is_open and pair.server.is_open


def test_a_detach_flow_or_disposition_after_the_peers_own_end_is_dropped() -> None:
    """azure-servicebus's _pyamqp ends a receiver's session, then sends the link's detach
    on the same channel. The detach asks nothing of us: it is dropped, and the peer's
    other sessions on the connection go on (closing the connection would end them)."""
    server, _ = server_with_session()
    other = Begin(next_outgoing_id=UInt(0), incoming_window=UInt(100), outgoing_window=UInt(100))
    server.receive_data(frame(1, other))
    server.data_to_send()
    events = server.receive_data(frame(0, End()))
    assert [type(e) for e in events] == [SessionEnded]
    server.data_to_send()
    late = frame(0, Detach(handle=UInt(0), closed=True)) + frame(
        0, Flow(incoming_window=UInt(1), next_outgoing_id=UInt(0), outgoing_window=UInt(1))
    )
    assert server.receive_data(late) == []
    assert server.is_open and server.data_to_send() == b""
    assert [s.remote_channel for s in server.sessions.values()] == [1]
    # A transfer there is still an error: it would carry a message no one can settle.
    assert closed_with(server.receive_data(transfer(0, 0))) == "amqp:not-allowed"

