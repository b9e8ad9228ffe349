"""The receive fast path (a transfer read into plain fields, a whole delivery handed
straight to its link) behaves exactly as the generic path.

The same client byte stream, cut at random points, goes into two server engines:
one with ``fast_paths`` on, one with it off (every transfer decoded into a
``Transfer`` and taken by :meth:`Session.on_transfer`). Single-frame deliveries,
multi-frame ones, aborted ones, transfers with fields the fast path leaves alone, a
delivery-id reused while unsettled and a transfer on an unattached handle are mixed
at random; both engines must emit the same events (the same runs of deliveries among
the same other events) and write the same bytes.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, Event, LinkAttachRequested
from amqplink.engine.frames import write_transfer
from amqplink.engine.link import Delivery, ReceiverLink
from amqplink.protocol.definitions import Accepted, Target, Transfer

from .pairs import Pair, write_planned

MAX_FRAME = 512


def _handshake() -> tuple[bytes, int]:
    """A client's bytes up to its attach (sender link), and that link's handle."""
    config = ConnectionConfig(container_id="client", max_frame_size=MAX_FRAME)
    pair = Pair(config, ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME))
    session = pair.open()
    link = session.attach_sender("s", target=Target(address="q"))
    pair.pump()
    return b"".join(pair.wire_c2s), link.handle


HANDSHAKE, HANDLE = _handshake()

deliveries = st.lists(
    st.tuples(
        st.sampled_from(["whole", "split", "aborted", "rcv-mode", "batchable", "reused-id", "bad-handle"]),
        st.binary(min_size=0, max_size=1200),
        st.binary(min_size=0, max_size=32),  # tag
        st.booleans(),  # settled
        st.sampled_from([0, 7, 0x80013700]),  # message-format
    ),
    max_size=12,
)


def _transfers(plan: list[tuple[str, bytes, bytes, bool, int]]) -> bytes:
    out = bytearray()
    delivery_id = 0
    for kind, payload, tag, settled, message_format in plan:
        handle = HANDLE if kind != "bad-handle" else HANDLE + 5
        delivery_id = write_planned(
            out, kind, handle, delivery_id, tag, settled, payload, message_format, max_whole=MAX_FRAME - 81
        )
    return bytes(out)


def _delivery(delivery: Delivery) -> tuple[Any, ...]:
    payload = delivery.payload
    return (
        delivery.delivery_id,
        bytes(delivery.tag),
        None if payload is None else bytes(payload),
        delivery.message_format,
        delivery.settled,
        delivery.remote_settled,
        delivery.aborted,
        delivery.rcv_settle_mode,
        delivery.size,
    )


def _describe(event: Event) -> tuple[Any, ...]:
    fields: list[Any] = [type(event).__name__]
    for name in getattr(event, "__slots__", ()):
        value = getattr(event, name)
        if isinstance(value, Delivery):
            value = _delivery(value)
        elif isinstance(value, list):  # a run's deliveries
            value = tuple(_delivery(d) for d in value)
        elif hasattr(value, "handle") and hasattr(value, "name"):  # a Link
            value = (value.name, value.handle, value.state, value.link_credit, value.delivery_count)
        elif hasattr(value, "channel") and hasattr(value, "links"):  # a Session
            value = (value.channel, value.state, value.next_incoming_id, value.incoming_window)
        fields.append(value if isinstance(value, (tuple, int, str, bytes, type(None))) else repr(value))
    return tuple(fields)


def _serve(stream: bytes, cuts: list[int], fast: bool) -> tuple[list[tuple[Any, ...]], bytes]:
    """The server's events and bytes for the handshake, then ``stream`` cut at ``cuts``."""
    server = Connection(ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME), server=True, fast_paths=fast)
    seen: list[tuple[Any, ...]] = []
    written = bytearray()
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    pieces = [HANDSHAKE] + [stream[start:end] for start, end in pairwise(points)]
    for piece in pieces:
        for event in server.receive_data(piece):
            seen.append(_describe(event))
            if isinstance(event, LinkAttachRequested):
                event.link.attach()
                assert isinstance(event.link, ReceiverLink)
                event.link.flow(100)
            if isinstance(event, DeliveriesReceived):
                for delivery in event.deliveries:
                    if not delivery.settled:
                        event.link.settle(delivery, Accepted())  # type: ignore[attr-defined]
        written += server.data_to_send()
    seen += [_describe(e) for e in server.take_events()]
    return seen, bytes(written)


@settings(deadline=None)
@given(plan=deliveries, cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8))
def test_fast_and_generic_paths_agree(plan: list[tuple[str, bytes, bytes, bool, int]], cuts: list[int]) -> None:
    stream = _transfers(plan)
    fast = _serve(stream, cuts, fast=True)
    generic = _serve(stream, cuts, fast=False)
    assert fast == generic
    received = sum(len(e[2]) if e[0] == "DeliveriesReceived" else e[0] == "DeliveryAborted" for e in fast[0])
    assert received <= len(plan)


def test_the_fast_path_is_taken_for_a_whole_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    out = bytearray()
    write_transfer(out, 0, HANDLE, 0, b"t", 0, False, b"payload")
    server = Connection(ConnectionConfig(container_id="server", max_frame_size=MAX_FRAME), server=True)
    for event in server.receive_data(HANDSHAKE):
        if isinstance(event, LinkAttachRequested):
            event.link.attach()
            assert isinstance(event.link, ReceiverLink)
            event.link.flow(10)
    generic: list[Transfer] = []
    monkeypatch.setattr(ReceiverLink, "on_transfer", lambda self, transfer, payload: generic.append(transfer))
    events = server.receive_data(bytes(out))
    assert [type(e).__name__ for e in events] == ["DeliveriesReceived"]
    assert [bytes(d.payload) for d in events[0].deliveries] == [b"payload"]  # type: ignore[attr-defined]
    assert generic == []  # the whole delivery never became a Transfer
