"""Runs of transfers (:meth:`Session.on_transfer_run`): the whole single-frame deliveries
of one read on one link, taken in one call, behave exactly as the general path.

The same client byte stream, cut at random points, goes into two server engines: one
with ``fast_paths`` on (runs), one with it off (every transfer decoded into a
``Transfer`` and taken by :meth:`Session.on_transfer`, one by one). Whole deliveries
(settled or not) on two links (one of them sender-settles), multi-frame and aborted
ones, transfers the fast reader declines, reused delivery-ids, unattached handles,
over-large messages, heartbeats, the sender's dispositions and a detach are mixed at
random, under random credit (with or without drain, excess detached or delivered) and a
small incoming window; both engines must emit the same events (the same runs of
deliveries), write the same bytes and end in the same state.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import UInt
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, Event, LinkAttachRequested
from amqplink.engine.frames import FRAME_TYPE_AMQP, heartbeat, write_frame, write_transfer
from amqplink.engine.link import SND_SETTLED, Delivery, ReceiverLink
from amqplink.engine.session import Session
from amqplink.protocol.definitions import Accepted, Detach, Disposition, Target

from .pairs import Pair, write_planned

MAX_FRAME = 512
KINDS = [
    "whole",
    "whole",
    "whole",
    "whole-other",
    "split",
    "aborted",
    "rcv-mode",
    "reused-id",
    "bad-handle",
    "large",
    "heartbeat",
    "disposition",
    "detach",
]


def _handshake() -> tuple[bytes, int, int]:
    """A client's bytes up to its attaches (two sender links, the second sender-settled)."""
    config = ConnectionConfig(container_id="client", max_frame_size=MAX_FRAME)
    pair = Pair(config, ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME))
    session = pair.open()
    one = session.attach_sender("s", target=Target(address="q"))
    two = session.attach_sender("t", target=Target(address="q"), snd_settle_mode=SND_SETTLED)
    pair.pump()
    return b"".join(pair.wire_c2s), one.handle, two.handle


HANDSHAKE, HANDLE, OTHER = _handshake()

plans = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.binary(min_size=0, max_size=400),
        st.binary(min_size=1, max_size=8),  # tag
        st.booleans(),  # settled
    ),
    max_size=30,
)


def _transfers(plan: list[tuple[str, bytes, bytes, bool]]) -> bytes:
    out = bytearray()
    delivery_id = 0
    for kind, payload, tag, settled in plan:
        handle = {"bad-handle": HANDLE + 5, "whole-other": OTHER}.get(kind, HANDLE)
        if kind == "heartbeat":
            out += heartbeat()
            continue
        if kind == "disposition":  # the sender settles what it sent so far (role sender)
            last = max(delivery_id - 1, 0)
            write_frame(out, FRAME_TYPE_AMQP, 0, Disposition(role=False, first=UInt(0), last=UInt(last), settled=True))
            continue
        if kind == "detach":
            write_frame(out, FRAME_TYPE_AMQP, 0, Detach(handle=UInt(OTHER), closed=True))
            continue
        body = (payload + bytes(300) if kind == "large" else payload)[: MAX_FRAME - 80]
        delivery_id = write_planned(out, kind, handle, delivery_id, tag, settled, body, max_whole=MAX_FRAME - 80)
    return bytes(out)


def _delivery(d: Delivery) -> tuple[Any, ...]:
    payload = None if d.payload is None else bytes(d.payload)
    return (d.delivery_id, bytes(d.tag), payload, d.message_format, d.settled, d.remote_settled, d.aborted, d.size)


def _describe(event: Event) -> tuple[Any, ...]:
    fields: list[Any] = [type(event).__name__]
    for name in getattr(event, "__slots__", ()):
        value = getattr(event, name)
        if isinstance(value, Delivery):
            value = _delivery(value)
        elif isinstance(value, list):
            value = tuple(_delivery(d) for d in value)
        elif isinstance(value, ReceiverLink):
            value = (value.name, value.handle, value.state, value.link_credit, value.delivery_count)
        elif isinstance(value, Session):
            value = (value.channel, value.state, value.next_incoming_id, value.incoming_window)
        fields.append(value if isinstance(value, (tuple, int, str, bytes, type(None))) else repr(value))
    return tuple(fields)


def _state(links: list[ReceiverLink]) -> list[Any]:
    """What the session and links of the run count and hold."""
    state: list[Any] = []
    for link in links:
        session = link.session
        state.append(
            (
                session.next_incoming_id,
                session.incoming_window,
                session.remote_outgoing_window,
                sorted(session.incoming_unsettled),
                session.state,
                link.name,
                link.state,
                link.delivery_count,
                link.link_credit,
                link.drain,
                link.excess_transfers,
                sorted(link.unsettled),
            )
        )
    return state


def _serve(stream: bytes, cuts: list[int], fast: bool, setup: dict[str, Any]) -> tuple[Any, ...]:
    """The server's events, bytes and end state for the handshake, then ``stream`` cut at ``cuts``."""
    config = ConnectionConfig(
        container_id="server",
        max_frame_size=MAX_FRAME,
        incoming_window=setup["window"],
        on_excess_transfer=setup["excess"],
    )
    server = Connection(config, server=True, fast_paths=fast)
    seen: list[tuple[Any, ...]] = []
    links: list[ReceiverLink] = []
    written = bytearray()
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    pieces = [HANDSHAKE] + [stream[start:end] for start, end in pairwise(points)]
    for piece in pieces:
        events = server.receive_data(piece)
        seen += [_describe(e) for e in events]  # before the settlements below change the deliveries
        for event in events:
            if isinstance(event, LinkAttachRequested):
                link = event.link
                assert isinstance(link, ReceiverLink)
                links.append(link)
                link.max_message_size = setup["max_size"]
                link.attach()
                link.flow(setup["credit"], drain=setup["drain"])
            elif isinstance(event, DeliveriesReceived):
                event.link.settle_all(event.deliveries, Accepted())  # type: ignore[attr-defined]
        written += server.data_to_send()
    seen += [_describe(e) for e in server.take_events()]
    return seen, bytes(written), _state(links)


setups = st.fixed_dictionaries(
    {
        "window": st.integers(min_value=1, max_value=12),
        "credit": st.integers(min_value=0, max_value=20),
        "drain": st.booleans(),
        "excess": st.sampled_from(["detach", "deliver"]),
        "max_size": st.sampled_from([None, 0, 200]),
    }
)


@settings(deadline=None)
@given(plan=plans, cuts=st.lists(st.integers(min_value=0, max_value=1 << 14), max_size=6), setup=setups)
def test_runs_and_the_general_path_agree(
    plan: list[tuple[str, bytes, bytes, bool]], cuts: list[int], setup: dict[str, Any]
) -> None:
    stream = _transfers(plan)
    fast = _serve(stream, cuts, True, setup)
    general = _serve(stream, cuts, False, setup)
    assert fast == general


def _attached(*, window: int = 5000, credit: int = 100, excess: str = "detach") -> Connection:
    config = ConnectionConfig(
        container_id="server",
        max_frame_size=MAX_FRAME,
        incoming_window=window,
        on_excess_transfer=excess,  # type: ignore[arg-type]
    )
    server = Connection(config, server=True)
    for event in server.receive_data(HANDSHAKE):
        if isinstance(event, LinkAttachRequested):
            link = event.link
            assert isinstance(link, ReceiverLink)
            link.attach()
            link.flow(credit)
    server.data_to_send()
    return server


def _wholes(ids: list[int], *, settled: bool = False, handle: int = HANDLE) -> bytes:
    out = bytearray()
    for delivery_id in ids:
        write_transfer(out, 0, handle, delivery_id, b"t%d" % delivery_id, 0, settled, b"m%d" % delivery_id)
    return bytes(out)


def test_a_read_of_whole_deliveries_is_one_call_and_never_a_transfer(monkeypatch: pytest.MonkeyPatch) -> None:
    server = _attached()
    calls: list[int] = []
    run = Session.on_transfer_run
    monkeypatch.setattr(Session, "on_transfer", lambda *a: pytest.fail("the general path was taken"))
    monkeypatch.setattr(Session, "on_transfer_run", lambda self, *a: calls.append(1) or run(self, *a))
    events = server.receive_data(_wholes([0, 1, 2, 3]))
    assert len(calls) == 1
    assert [type(e).__name__ for e in events] == ["DeliveriesReceived"]
    deliveries = events[0].deliveries  # type: ignore[attr-defined]
    assert [bytes(d.payload) for d in deliveries] == [b"m0", b"m1", b"m2", b"m3"]
    link = deliveries[0].link
    session = link.session
    assert (link.delivery_count, link.link_credit, sorted(link.unsettled)) == (4, 96, [0, 1, 2, 3])
    window = (session.next_incoming_id, session.incoming_window, sorted(session.incoming_unsettled))
    assert window == (4, 4996, [0, 1, 2, 3])


def test_the_reference_reader_reports_the_same_run() -> None:
    server = _attached()
    server.fast_paths = False
    events = server.receive_data(_wholes([0, 1, 2]))
    assert [type(e).__name__ for e in events] == ["DeliveriesReceived"]  # a run, one transfer at a time
    assert [bytes(d.payload) for d in events[0].deliveries] == [b"m0", b"m1", b"m2"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("setup", "ids", "condition", "taken"),
    [
        ({"window": 3}, [0, 1, 2, 3, 4], "amqp:session:window-violation", 3),
        ({"credit": 2}, [0, 1, 2, 3], "amqp:link:transfer-limit-exceeded", 2),
        ({}, [0, 1, 1, 2], "amqp:not-allowed", 2),  # delivery-id 1 again while unsettled
    ],
)
def test_a_run_stops_at_the_transfer_that_breaks_a_rule(
    setup: dict[str, Any], ids: list[int], condition: str, taken: int
) -> None:
    server = _attached(**setup)
    events = server.receive_data(_wholes(ids))
    received = [d for e in events if isinstance(e, DeliveriesReceived) for d in e.deliveries]
    assert [d.delivery_id for d in received] == ids[:taken]
    assert condition.encode() in server.data_to_send()  # the detach or end names the rule broken
    link = received[0].link
    assert link.detach_sent  # detached, or ended with its session
    assert link.session.end_sent is (condition != "amqp:link:transfer-limit-exceeded")


def test_excess_deliveries_let_in_are_counted_once_per_run() -> None:
    server = _attached(credit=2, excess="deliver")
    events = server.receive_data(_wholes([0, 1, 2, 3, 4]))
    (run,) = events
    link = run.deliveries[0].link  # type: ignore[attr-defined]
    assert (len(run.deliveries), link.excess_transfers, link.link_credit, link.delivery_count) == (5, 3, 0, 5)  # type: ignore[attr-defined]


def test_an_oversize_delivery_ends_the_run_before_it() -> None:
    server = _attached()
    link = server._remote_sessions[0].links[0]
    link.max_message_size = 2
    out = bytearray(_wholes([0, 1]))
    write_transfer(out, 0, HANDLE, 2, b"big", 0, False, b"too large")
    events = server.receive_data(bytes(out))
    assert [d.delivery_id for d in events[0].deliveries] == [0, 1]  # type: ignore[attr-defined]
    assert b"amqp:link:message-size-exceeded" in server.data_to_send()
