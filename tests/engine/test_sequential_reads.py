"""Reads however cut give what one read gives: the connection's shortcuts for a read of
whole frames (``FrameReader.drained``: no second look) and for a disposition (handed to its
session from the read loop, as ``_dispatch`` would) change no event and no byte written,
whether the peer's frames come one per read (the sequential pattern: a send awaited
before the next, a settlement in turn), all in one read or cut anywhere."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.events import DeliveriesReceived, DeliveriesUpdated, Event
from amqplink.engine.link import ReceiverLink
from amqplink.protocol.definitions import Accepted, Released
from tests.engine.pairs import unsettled_link


def _frame_ends(data: bytes) -> list[int]:
    """Where each frame of ``data`` ends (the reads of the sequential pattern)."""
    ends, at = [], 0
    while at < len(data):
        at += int.from_bytes(data[at : at + 4], "big")  # the frame's size (2.3.1)
        ends.append(at)
    assert ends and ends[-1] == len(data)
    return ends


def _reads(data: bytes, how: str, cuts: list[int]) -> list[bytes]:
    if how == "whole":
        points = [len(data)]
    elif how == "frames":
        points = _frame_ends(data)
    else:
        points = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    start, pieces = 0, []
    for end in points:
        pieces.append(data[start:end])
        start = end
    return pieces


def _summary(events: list[Event]) -> list[Any]:
    """The server's events with runs flattened (how reads are cut may split a run)."""
    out: list[Any] = []
    for event in events:
        if type(event) is DeliveriesReceived:
            out += [("received", d.delivery_id, bytes(d.payload), d.settled) for d in event.deliveries]
        elif type(event) is DeliveriesUpdated:
            out += [("updated", d.delivery_id, type(event.state), event.settled) for d in event.deliveries]
        else:
            out.append(type(event).__name__)
    return out


def _run(sizes: list[int], outcomes: list[bool], how: str, cuts: list[int]) -> tuple[list[Any], bytes]:
    """The client sends ``sizes``; the server reads them as ``how`` cuts them, settles each
    (accepted or released) and reads the client's settlements cut the same way: its events
    and every byte it wrote."""
    pair, _, sender, receiver = unsettled_link(window=1000, max_frame_size=1 << 16)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(len(sizes))
    pair.pump()
    for i, size in enumerate(sizes):
        sender.send(bytes([i % 256]) * size)
    server, client = pair.server, pair.client
    events: list[Event] = []
    written = bytearray()
    for piece in _reads(bytes(client.data_to_send()), how, cuts):
        events += server.receive_data(piece)
    for delivery, accept in zip(
        [d for e in events if type(e) is DeliveriesReceived for d in e.deliveries], outcomes, strict=False
    ):
        receiver.settle(delivery, Accepted() if accept else Released())
    written += server.data_to_send()
    client.receive_data(bytes(written))  # the client settles what the server answered
    for piece in _reads(bytes(client.data_to_send()), how, cuts):
        events += server.receive_data(piece)
    written += server.data_to_send()
    return _summary(events), bytes(written)


@settings(deadline=None, max_examples=60)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=8),
    outcomes=st.lists(st.booleans(), min_size=8, max_size=8),
    how=st.sampled_from(["frames", "cuts"]),
    cuts=st.lists(st.integers(0, 5000), max_size=6),
)
def test_reads_cut_anyhow_give_what_one_read_gives(
    sizes: list[int], outcomes: list[bool], how: str, cuts: list[int]
) -> None:
    expected = _run(sizes, outcomes, "whole", [])
    got = _run(sizes, outcomes, how, cuts)
    assert got == expected
    summary, _ = expected
    assert [s[1] for s in summary if s[0] == "received"] == list(range(len(sizes)))
    assert len([s for s in summary if s[0] == "updated"]) == len(sizes)  # each settled by the client
