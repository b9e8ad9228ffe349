"""``Session.write_deliveries(..., fresh=True)``: the deliveries ``SenderLink.send_all``
makes when none wait before them go straight out as a run (the writer's ``write_run``),
as the same frames and the same link and session state as the reference path gives (a
connection with ``fast_paths`` off: no run, so queued for ``write_deliveries``'s loop,
every frame a ``Transfer``), whatever the delivery-ids (below 256, near the wrap), tag
sizes, payload sizes, credit and window."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.link import SND_MIXED, ReceiverLink
from amqplink.protocol.definitions import Accepted, Target
from tests import profiles

from .pairs import Pair, unsettled_link

MAX_FRAME = 512
ROOM_16 = MAX_FRAME - 64 - 16
"""The largest payload of one frame with a 16-byte tag (the rest take more frames)."""


def _send_all(
    fresh: bool, start: int, tags: list[bytes], sizes: list[int], credit: int, window: int, settle_first: bool
) -> tuple[bytes, Any, int]:
    pair, session, sender, receiver = unsettled_link(window, MAX_FRAME)
    receiver.flow(credit + 1)
    pair.pump()
    first = sender.send(b"first", tag=b"\xff" * 16, settled=False)  # delivery-id 0
    pair.pump()
    if settle_first:
        sender.settle(first, Accepted())  # a disposition waiting: it goes before the transfers
    session._next_delivery_id = start
    taken = 0
    if not fresh:
        pair.client.fast_paths = False  # the reference writer: no run, every frame a Transfer
    else:
        write_deliveries = session.write_deliveries

        def counted(link: Any, deliveries: Any, fresh: bool = False) -> int:
            nonlocal taken
            written = write_deliveries(link, deliveries, fresh)
            if fresh:
                taken = written
            return written

        session.write_deliveries = counted  # type: ignore[method-assign]
    payloads = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    made = sender.send_all(payloads, tags)
    assert len(made) == len(tags)
    wire = bytes(pair.client.data_to_send())
    state = (
        [(d.tag, d.delivery_id, d.settled, d.size) for d in made],
        sorted(sender.unsettled),
        [d.delivery_id for d in sender.queue],
        sorted(session.outgoing_unsettled),
        (sender.link_credit, sender.delivery_count, session._next_delivery_id),
        (session.next_outgoing_id, session.remote_incoming_window, [link.name for link in session._blocked]),
    )
    return wire, state, taken


@settings(profiles.HEAVY, deadline=None)
@given(
    start=st.one_of(
        st.integers(min_value=0, max_value=300),
        st.integers(min_value=0xFFFFFFFF - 20, max_value=0xFFFFFFFF),
        st.integers(min_value=256, max_value=0xFFFFFFFF),
    ),
    count=st.integers(min_value=1, max_value=20),
    credit=st.integers(min_value=0, max_value=25),
    window=st.integers(min_value=1, max_value=25),
    settle_first=st.booleans(),
    data=st.data(),
)
def test_send_all_writes_straight_out_as_the_queue_would(
    start: int, count: int, credit: int, window: int, settle_first: bool, data: st.DataObject
) -> None:
    tags = [bytes([i]) + data.draw(st.sampled_from([b"\x00" * 15, b"\x01" * 7, b"\x02" * 11])) for i in range(count)]
    sizes = data.draw(
        st.lists(
            st.one_of(st.integers(min_value=0, max_value=ROOM_16 + 20), st.sampled_from([ROOM_16, ROOM_16 + 1])),
            min_size=count,
            max_size=count,
        )
    )
    wire, state, taken = _send_all(True, start, tags, sizes, credit, window, settle_first)
    general = _send_all(False, start, tags, sizes, credit, window, settle_first)
    assert (wire, state) == general[:2]
    assert taken <= min(credit, window) and general[2] == 0  # (never beyond the credit or the window)


@pytest.mark.parametrize("tag_size", [8, 16])
def test_a_usual_run_is_written_as_a_run(tag_size: int) -> None:
    """The usual case takes the new path: all of a run within credit and window."""
    tags = [bytes([i]) * tag_size for i in range(10)]
    wire, state, taken = _send_all(True, 1000, tags, [100] * 10, 6, 20, True)
    assert taken == 6  # the credit's worth; the rest wait in the queue
    assert state[2] == [None] * 4
    assert (wire, state) == _send_all(False, 1000, tags, [100] * 10, 6, 20, True)[:2]


@pytest.mark.parametrize(
    ("start", "sizes", "tag_sizes", "expected"),
    [
        (100, [10, 10], [16, 16], 0),  # delivery-ids below 256: another encoding
        (1000, [ROOM_16 + 1, 10], [16, 16], 0),  # the first takes two frames
        (1000, [10, ROOM_16 + 1, 10], [16, 16, 16], 1),  # up to the one that does not fit
        (1000, [10, 10, 10], [16, 8, 16], 1),  # up to another tag size
        (1000, [10, 10], [12, 12], 0),  # a tag size without a usual frame
        (0xFFFFFFFF - 1, [10, 10, 10], [16, 16, 16], 2),  # up to the wrap
    ],
)
def test_a_run_leaves_the_rest_to_the_general_loop(
    start: int, sizes: list[int], tag_sizes: list[int], expected: int
) -> None:
    tags = [bytes([i]) * n for i, n in enumerate(tag_sizes)]
    wire, state, taken = _send_all(True, start, tags, sizes, 10, 20, False)
    assert taken == expected
    assert (wire, state) == _send_all(False, start, tags, sizes, 10, 20, False)[:2]


def _wire(generic: bool, start: int, plan: list[tuple[str, int, int, bool]], credit: int, window: int) -> bytes:
    """What the client writes for ``plan`` (each step: ``send`` or ``send_all``, how many, the
    tag size, pre-settled or not; 0 tag size: the engine's own tags), with the generic
    Transfer encoder (``fast_paths`` off) or the hand-assembled frames."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=window, max_frame_size=MAX_FRAME))
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_MIXED)
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(credit)
    pair.pump()
    pair.client.fast_paths = not generic  # (the reference writer: every frame through Transfer)
    session._next_delivery_id = start
    wire = b""
    for step, (how, count, tag_size, settled) in enumerate(plan):
        payloads = [bytes([step, i]) * (i * 37 % 230) for i in range(count)]
        tags = [bytes([step, i]) * (tag_size // 2) for i in range(count)]
        if how == "send_all" and not settled:
            sender.send_all(payloads, tags)
        else:
            for payload, tag in zip(payloads, tags, strict=True):
                sender.send(payload, tag=tag or None, settled=settled)
        chunk = bytes(pair.client.data_to_send())
        wire += chunk
        pair.server.receive_data(chunk)  # (the server's window reopens, as it reads them)
        receiver.flow(credit)  # more credit for the next step
        pair.client.receive_data(pair.server.data_to_send())
    return wire


@settings(profiles.HEAVY, deadline=None)
@given(
    start=st.sampled_from([0, 200, 250, 1000, 0xFFFFFFFF - 5]),
    plan=st.lists(
        st.tuples(
            st.sampled_from(["send", "send_all"]),
            st.integers(min_value=1, max_value=12),
            st.sampled_from([0, 8, 16, 6]),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    credit=st.integers(min_value=1, max_value=30),
    window=st.integers(min_value=1, max_value=30),
)
def test_the_hand_assembled_frames_are_the_generic_encoders(
    start: int, plan: list[tuple[str, int, int, bool]], credit: int, window: int
) -> None:
    """send and send_all, engine tags and the caller's, settled and not, across delivery-id
    256 and the wrap: write_deliveries's runs and usual frames (from the link's
    frame parts) write what the generic Transfer encoder writes."""
    assert _wire(False, start, plan, credit, window) == _wire(True, start, plan, credit, window)
