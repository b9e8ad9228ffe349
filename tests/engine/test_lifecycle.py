"""Link and session life-cycle (spec 2.5.5, 2.6.3, 2.8.7, 2.4.5): two engines back to back.

- ending a session or closing the connection ends its links: a send raises at once;
- a link detached before its attach is answered sends attach, then detach;
- delivery tags are unique among a link's unsettled deliveries;
- a peer's absurdly small idle time-out closes the connection with a clear condition.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import pytest

from amqplink.codec.types import UInt
from amqplink.engine import errors
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.errors import EngineStateError
from amqplink.engine.events import (
    ConnectionClosed,
    LinkAttachRequested,
    LinkDetached,
    SessionEnded,
)
from amqplink.engine.link import SND_UNSETTLED, ReceiverLink, SenderLink
from amqplink.engine.states import (
    CONNECTION_TRANSITIONS,
    LINK_TRANSITIONS,
    SESSION_TRANSITIONS,
    ConnectionState,
    IllegalTransition,
    LinkState,
    SessionState,
    Step,
    advance,
)
from amqplink.protocol.definitions import Accepted, Attach, Detach, Error, Open, Target, Transfer

from .pairs import Pair, frame, frames_in, received_in


def _sender(pair: Pair, name: str = "q") -> tuple[SenderLink, ReceiverLink]:
    session = pair.open()
    sender = session.attach_sender(name, target=Target(address="q"), snd_settle_mode=SND_UNSETTLED)
    pair.pump()
    receiver = pair.server_link(name, sender=False)
    assert isinstance(receiver, ReceiverLink)
    return sender, receiver


def _no_unattached_handle(pair: Pair) -> None:
    for ev in pair.client_events + pair.server_events:
        if isinstance(ev, SessionEnded | ConnectionClosed):
            raise AssertionError(f"{ev} (a peer saw a frame it could not place)")


# -- item 5: ending a session ends its links ------------------------------------------------


@pytest.mark.parametrize("who", ["client", "server"])
def test_a_send_on_a_link_of_an_ended_session_raises_at_once(who: str) -> None:
    pair = Pair()
    sender, _ = _sender(pair, "orders")
    session = sender.session if who == "client" else next(iter(pair.server.sessions.values()))
    session.end()
    pair.pump()
    assert sender.is_detached and not sender.is_attached
    with pytest.raises(EngineStateError, match="orders"):
        sender.send(b"lost?")
    assert not sender.queue


@pytest.mark.parametrize("who", ["client", "server"])
def test_a_send_after_the_connection_closed_raises_at_once(who: str) -> None:
    pair = Pair()
    sender, _ = _sender(pair, "orders")
    (pair.client if who == "client" else pair.server).close()
    pair.pump()
    with pytest.raises(EngineStateError, match="orders"):
        sender.send(b"lost?")
    assert not sender.queue


def test_outcomes_that_arrive_after_this_side_closed_still_settle() -> None:
    """CLOSE_SENT (2.4.6): nothing more goes out, but what comes in is still read."""
    pair = Pair()
    sender, receiver = _sender(pair)
    receiver.flow(10)
    pair.pump()
    delivery = sender.send(b"x")
    events = pair.server.receive_data(pair.client.data_to_send())
    (received,) = received_in(events)
    receiver.settle(received, Accepted())
    pair.client.close()  # the server's accept is on the wire
    pair.pump()
    assert delivery.settled and isinstance(delivery.remote_state, Accepted)
    with pytest.raises(EngineStateError, match="the connection is closing"):
        sender.send(b"y")


def test_a_send_after_the_transport_dropped_raises_at_once() -> None:
    pair = Pair()
    sender, _ = _sender(pair, "orders")
    pair.client.transport_closed()
    with pytest.raises(EngineStateError, match="orders"):
        sender.send(b"lost?")


def test_the_peers_end_crossing_this_sides_close_is_no_violation() -> None:
    pair = Pair()
    sender, _ = _sender(pair)
    next(iter(pair.server.sessions.values())).end()
    pair.client.close()  # the server's end is on the wire
    pair.pump()
    closes = pair.of(ConnectionClosed)
    assert len(closes) == 1 and closes[0].error is None, closes
    assert pair.client.state is ConnectionState.END and sender.state is LinkState.ENDED


def test_ending_a_session_while_its_end_is_in_flight_sends_no_more_frames() -> None:
    pair = Pair()
    sender, receiver = _sender(pair)
    receiver.flow(10)
    pair.pump()
    sender.session.end()
    before = len(pair.client.data_to_send())
    assert before  # the end
    with pytest.raises(EngineStateError):
        sender.send(b"x")
    assert pair.client.data_to_send() == b""


# -- item 6: detach before the attach is answered -------------------------------------------


def test_refusing_an_attach_without_answering_it_sends_attach_then_detach() -> None:
    pair = Pair(auto_accept_links=False)
    session = pair.open()
    sender = session.attach_sender("refused", target=Target(address="nowhere"))
    pair.pump()
    (requested,) = pair.of(LinkAttachRequested, "server")
    requested.link.detach(Error(condition=errors.NOT_FOUND, description="no such node"))
    pair.pump()
    _no_unattached_handle(pair)
    frames = [p for _, p, _ in frames_in(pair.wire_s2c) if isinstance(p, Attach | Detach)]
    assert [type(p) for p in frames] == [Attach, Detach]
    (detached,) = pair.of(LinkDetached)
    assert detached.link is sender and detached.by_peer
    assert detached.error is not None and detached.error.condition == errors.NOT_FOUND
    assert not session.links and session.is_mapped
    requested.link.attach()  # the application answering late is a no-op, not a frame
    assert pair.server.data_to_send() == b""


def test_a_transfer_before_any_credit_is_answered_by_attach_then_detach() -> None:
    """The broker's ordering fault: the attach and a transfer arrive together; the link
    is detached (transfer-limit-exceeded) before the application answered the attach."""
    pair = Pair(auto_accept_links=False)
    pair.open()
    out = pair.server
    attach = Attach(
        name="eager", handle=UInt(0), role=False, target=Target(address="q"), initial_delivery_count=UInt(0)
    )
    transfer = Transfer(handle=UInt(0), delivery_id=UInt(0), delivery_tag=b"t")
    events = out.receive_data(frame(0, attach) + frame(0, transfer, b"x"))
    (requested,) = [e for e in events if isinstance(e, LinkAttachRequested)]
    requested.link.attach()  # the application answers after the engine has detached
    frames = [p for _, p, _ in frames_in([out.data_to_send()]) if isinstance(p, Attach | Detach)]
    assert [type(p) for p in frames] == [Attach, Detach]
    assert frames[1].error.condition == errors.TRANSFER_LIMIT_EXCEEDED
    assert out.is_open and next(iter(out.sessions.values())).is_mapped


def test_detaching_before_the_peer_answered_the_attach() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("hasty", target=Target(address="q"))
    sender.detach()
    pair.pump()
    _no_unattached_handle(pair)
    (detached,) = pair.of(LinkDetached)
    assert detached.link is sender and not detached.by_peer
    assert not session.links and not next(iter(pair.server.sessions.values())).links
    with pytest.raises(EngineStateError, match="hasty"):
        sender.send(b"x")


# -- item 7: unique delivery tags -------------------------------------------------------------


def test_a_caller_tag_in_use_by_an_unsettled_delivery_is_refused() -> None:
    pair = Pair()
    sender, receiver = _sender(pair, "tags")
    first = sender.send(b"1", tag=b"t")
    with pytest.raises(EngineStateError, match=r"'tags': delivery-tag 74 is already in use"):
        sender.send(b"2", tag=b"t")  # still queued: no credit yet
    receiver.flow(10)
    pair.pump()
    with pytest.raises(EngineStateError, match="already in use"):
        sender.send(b"2", tag=b"t")  # sent, unsettled
    (received,) = pair.deliveries("server")
    receiver.settle(received, Accepted())
    pair.pump()
    assert first.settled
    sender.send(b"3", tag=b"t")  # settled: the tag is free again
    pair.pump()
    assert [bytes(d.payload) for d in pair.deliveries("server")] == [b"1", b"3"]


def test_a_bytearray_tag_is_copied_and_checked_like_bytes() -> None:
    pair = Pair()
    sender, _ = _sender(pair)
    tag = bytearray(b"t")
    first = sender.send(b"1", tag=tag)  # type: ignore[arg-type]
    tag[0] = ord("u")  # the caller reuses its buffer
    assert first.tag == b"t"
    with pytest.raises(EngineStateError, match="already in use"):
        sender.send(b"2", tag=b"t")


def test_a_presettled_delivery_does_not_hold_its_tag() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("pre", target=Target(address="q"))
    pair.pump()
    sender.send(b"1", tag=b"t", settled=True)
    sender.send(b"2", tag=b"t", settled=True)
    assert len(sender.queue) == 2


def test_engine_tags_skip_a_tag_the_caller_holds() -> None:
    pair = Pair()
    sender, _ = _sender(pair)
    held = sender.send(b"1", tag=(0).to_bytes(8, "big"))
    generated = [sender.send(b"x").tag for _ in range(3)]
    assert held.tag not in generated and len(set(generated)) == 3


def test_engine_tags_skip_unsettled_ones_after_the_counter_wraps() -> None:
    pair = Pair()
    sender, receiver = _sender(pair)
    receiver.flow(100)
    pair.pump()
    early = [sender.send(b"early").tag for _ in range(3)]  # unsettled: 0, 1, 2
    sender._next_tag = (1 << 64) - 2  # as if 2^64 - 5 more deliveries had come and gone
    late = [sender.send(b"late").tag for _ in range(4)]
    assert late[:2] == [b"\xff" * 7 + b"\xfe", b"\xff" * 8]
    assert late[2:] == [(3).to_bytes(8, "big"), (4).to_bytes(8, "big")]  # 0, 1, 2 are still unsettled
    assert len(set(early + late)) == 7
    for tag in early + late:  # every one is known as in use, the wrapping send's own too
        with pytest.raises(EngineStateError, match="already in use"):
            sender.send(b"again", tag=tag)
    pair.pump()
    _no_unattached_handle(pair)


def test_settling_frees_the_tags_of_deliveries_that_were_settled_by_the_peer() -> None:
    pair = Pair()
    sender, receiver = _sender(pair)
    receiver.flow(100)
    pair.pump()
    deliveries = [sender.send(b"x", tag=bytes([i])) for i in range(3)]
    pair.pump()
    for delivery in pair.deliveries("server"):
        receiver.settle(delivery, Accepted())
    pair.pump()
    assert all(d.settled for d in deliveries)
    for i in range(3):
        sender.send(b"again", tag=bytes([i]))


# -- item 10: a peer's idle time-out below the floor --------------------------------------------


def test_a_peer_idle_timeout_of_1_ms_closes_the_connection_instead_of_flooding() -> None:
    # The server asks for a frame every 1 ms (it advertises half its 2 ms threshold).
    pair = Pair(server_config=ConnectionConfig(container_id="server", idle_timeout=0.002))
    pair.client.open()
    pair.pump()
    closes = pair.of(ConnectionClosed)
    assert len(closes) == 1 and not closes[0].by_peer
    error = closes[0].error
    assert error is not None and error.condition == errors.NOT_IMPLEMENTED
    assert "idle-time-out" in (error.description or "") and "1 ms" in (error.description or "")
    heartbeats = 0
    for i in range(1000):  # one simulated second, ticked every millisecond
        pair.client.tick(i / 1000)
        heartbeats += len(pair.client.data_to_send()) // 8
    assert heartbeats == 0


def test_a_peer_idle_timeout_at_the_floor_is_honoured() -> None:
    floor = ConnectionConfig().min_peer_idle_timeout
    pair = Pair(server_config=ConnectionConfig(container_id="server", idle_timeout=2 * floor))
    pair.open()
    assert pair.client.is_open
    pair.client.tick(0.0)
    pair.client.tick(floor)
    assert pair.client.data_to_send() == b"\x00\x00\x00\x08\x02\x00\x00\x00"  # one heartbeat


def test_the_floor_is_configurable() -> None:
    pair = Pair(
        ConnectionConfig(container_id="client", min_peer_idle_timeout=0.001),
        ConnectionConfig(container_id="server", idle_timeout=0.002),
    )
    pair.open()
    assert pair.client.is_open


# -- the transition tables ---------------------------------------------------------------------

_TABLES: list[tuple[dict[Any, dict[Step, Any]], type[IntEnum]]] = [
    (LINK_TRANSITIONS, LinkState),
    (SESSION_TRANSITIONS, SessionState),
    (CONNECTION_TRANSITIONS, ConnectionState),
]


@pytest.mark.parametrize(("table", "states"), _TABLES)
def test_every_state_has_a_row_and_ends_when_its_scope_does(
    table: dict[Any, dict[Step, Any]], states: type[IntEnum]
) -> None:
    assert set(table) == set(states)
    terminal = max(states)
    for state in states:
        assert advance(table, state, Step.ABANDON, "x") is terminal
        assert all(isinstance(target, states) for target in table[state].values())
    assert set(table[terminal]) == {Step.ABANDON}, "nothing leaves the terminal state"


@pytest.mark.parametrize(("table", "states"), _TABLES)
def test_steps_missing_from_the_table_are_refused(table: dict[Any, dict[Step, Any]], states: type[IntEnum]) -> None:
    refused = 0
    for state in states:
        for step in Step:
            if step in table[state]:
                continue
            with pytest.raises(IllegalTransition, match=f"cannot {step.value} in state {state.name}"):
                advance(table, state, step, "endpoint")
            refused += 1
    assert refused > len(states) * 5


@pytest.mark.parametrize(
    ("table", "state", "step"),
    [
        (LINK_TRANSITIONS, LinkState.ATTACH_RCVD, Step.SEND_DETACH),  # 2.6.3: attach first
        (LINK_TRANSITIONS, LinkState.ATTACHED, Step.RECV_ATTACH),
        (LINK_TRANSITIONS, LinkState.ENDED, Step.SEND_ATTACH),
        (SESSION_TRANSITIONS, SessionState.MAPPED, Step.RECV_BEGIN),
        (SESSION_TRANSITIONS, SessionState.END_SENT, Step.SEND_END),
        (CONNECTION_TRANSITIONS, ConnectionState.OPENED, Step.RECV_OPEN),
        (CONNECTION_TRANSITIONS, ConnectionState.END, Step.SEND_OPEN),
    ],
)
def test_spec_forbidden_steps(table: dict[Any, dict[Step, Any]], state: IntEnum, step: Step) -> None:
    with pytest.raises(IllegalTransition):
        advance(table, state, step, "endpoint")


def test_an_illegal_step_by_the_application_is_an_engine_state_error() -> None:
    pair = Pair()
    sender, _ = _sender(pair, "twice")
    with pytest.raises(EngineStateError, match="'twice' is already attached"):
        sender.attach()
    sender._step(Step.SEND_DETACH)
    with pytest.raises(IllegalTransition, match="link 'twice': cannot send detach in state DETACH_SENT"):
        sender._step(Step.SEND_DETACH)


def test_an_illegal_step_by_the_peer_closes_with_illegal_state() -> None:
    pair = Pair()
    pair.open()
    events = pair.client.receive_data(frame(0, Open(container_id="again")))
    (closed,) = [e for e in events if isinstance(e, ConnectionClosed)]
    assert closed.error is not None and closed.error.condition == errors.ILLEGAL_STATE


def test_the_states_walk_the_spec_diagrams() -> None:
    pair = Pair()
    assert pair.client.state is ConnectionState.START
    session = pair.open()
    assert (pair.client.state, pair.server.state) == (ConnectionState.OPENED, ConnectionState.OPENED)
    sender = session.attach_sender("walk", target=Target(address="q"))
    assert sender.state is LinkState.ATTACH_SENT
    pair.pump()
    assert sender.state is LinkState.ATTACHED
    sender.detach()
    assert sender.state is LinkState.DETACH_SENT
    pair.pump()
    assert sender.state is LinkState.ENDED
    session.end(Error(condition=errors.NOT_ALLOWED, description="enough"))
    assert session.state is SessionState.DISCARDING
    pair.pump()
    assert session.state is SessionState.ENDED
    pair.client.close()
    assert pair.client.state is ConnectionState.CLOSE_SENT
    pair.pump()
    assert (pair.client.state, pair.server.state) == (ConnectionState.END, ConnectionState.END)


def test_the_compatibility_flags_follow_the_state() -> None:
    pair = Pair(auto_accept_links=False)
    assert not pair.client.open_sent
    session = pair.open()
    assert pair.client.open_sent and session.begin_sent and not session.end_sent
    sender = session.attach_sender("flags", target=Target(address="q"))
    pair.pump()
    (requested,) = pair.of(LinkAttachRequested, "server")
    peer = requested.link
    assert sender.attach_sent and not peer.attach_sent and not sender.is_attached
    peer.attach()
    pair.pump()
    assert sender.is_attached and peer.attach_sent and not sender.detach_sent
    sender.detach()
    assert sender.detach_sent and sender.is_detached and not sender.is_attached
    pair.client.close()
    assert pair.client.close_sent and not pair.client.closed
    pair.pump()
    assert pair.client.closed
