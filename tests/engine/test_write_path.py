"""The session's one write path (``Session.write_deliveries``) against the plain codec.

Whatever way a delivery is sent (``send``, ``send_all``'s run, a batched send) and
whichever transfer writer writes it (``fast_paths`` on or off), its frames are the bytes a
reference built here from ``Transfer`` and ``write_frame`` alone gives: a delivery that
fits one frame of the peer's max-frame-size is one transfer, a larger one is cut into
frames of ``max-frame-size - 64 - len(tag)`` payload bytes, the first with delivery-id, tag
and message-format, each but the last with ``more``, every one with the settled flag;
delivery-ids count from the session's next, across the 2**32 wrap.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import UInt
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.frames import FRAME_TYPE_AMQP, write_frame
from amqplink.engine.link import SND_MIXED, Delivery, ReceiverLink
from amqplink.protocol.definitions import Target, Transfer
from tests import profiles

from .pairs import Pair

WRAP = 1 << 32
OVERHEAD = 64  # the frame header and a transfer performative, the tag excluded


def reference(handle: int, deliveries: list[Delivery], start: int, max_frame: int) -> bytes:
    """The frames of ``deliveries`` (in order, delivery-ids from ``start``) from the codec."""
    out = bytearray()
    for i, delivery in enumerate(deliveries):
        delivery_id = (start + i) % WRAP
        payload, tag = bytes(delivery.payload), delivery.tag
        room = max_frame - OVERHEAD - len(tag)
        if len(payload) <= room:
            transfer = Transfer(
                handle=UInt(handle),
                delivery_id=UInt(delivery_id),
                delivery_tag=tag,
                message_format=UInt(0),
                settled=delivery.settled,
            )
            write_frame(out, FRAME_TYPE_AMQP, 0, transfer, payload)
            continue
        for offset in range(0, len(payload), room):
            first = offset == 0
            transfer = Transfer(
                handle=UInt(handle),
                delivery_id=UInt(delivery_id) if first else None,
                delivery_tag=tag if first else None,
                message_format=UInt(0) if first else None,
                settled=delivery.settled,
                more=offset + room < len(payload),
            )
            write_frame(out, FRAME_TYPE_AMQP, 0, transfer, payload[offset : offset + room])
    return bytes(out)


def _written(
    fast: bool, how: str, handle: int, start: int, max_frame: int, plan: list[tuple[int, bool, int]]
) -> tuple[bytes, bytes]:
    """What the client writes for ``plan`` (each delivery: payload size, pre-settled, tag
    size, 0 for the engine's own), and the reference's bytes for the same deliveries."""
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=10_000, max_frame_size=max_frame))
    session = pair.open()
    for i in range(handle):  # links before it take the lower handles
        session.attach_sender(f"other{i}", target=Target(address="other"))
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_MIXED)
    pair.pump()
    assert sender.handle == handle
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(1000)
    pair.pump()
    pair.client.fast_paths = fast
    session._next_delivery_id = start
    payloads = [bytes([i % 251]) * size for i, (size, _, _) in enumerate(plan)]
    tags = [bytes([i]) * tag_size if tag_size else None for i, (_, _, tag_size) in enumerate(plan)]
    made: list[Delivery] = []
    if how == "send_all":
        made = sender.send_all(payloads, [tag or bytes([i]) * 8 for i, tag in enumerate(tags)])
    else:
        sender.batch_transfers = how == "batched"
        for payload, tag, (_, settled, _) in zip(payloads, tags, plan, strict=True):
            made.append(sender.send(payload, tag=tag, settled=settled))
    assert len(made) == len(plan)
    wire = bytes(pair.client.data_to_send())
    assert not sender.queue  # (all of it went out: credit and window to spare)
    return wire, reference(handle, made, start, max_frame)


@settings(profiles.HEAVY, deadline=None)
@given(
    fast=st.booleans(),
    how=st.sampled_from(["send", "send_all", "batched"]),
    handle=st.integers(min_value=0, max_value=2),
    start=st.one_of(
        st.integers(min_value=WRAP - 25, max_value=WRAP - 1),
        st.integers(min_value=0, max_value=300),
        st.integers(min_value=0, max_value=WRAP - 1),
    ),
    max_frame=st.one_of(st.sampled_from([512, 513, 1024, 4096]), st.integers(min_value=512, max_value=5000)),
    data=st.data(),
)
def test_every_write_is_the_codecs_frames(
    fast: bool, how: str, handle: int, start: int, max_frame: int, data: st.DataObject
) -> None:
    room = max_frame - OVERHEAD
    size = st.one_of(
        st.integers(min_value=0, max_value=3 * max_frame),
        st.sampled_from([0, room - 16, room - 15, room - 8, room - 7, room]),  # at the edge of one frame
    )
    settled = st.just(False) if how == "send_all" else st.booleans()
    plan = data.draw(
        st.lists(st.tuples(size, settled, st.sampled_from([0, 1, 8, 16, 32])), min_size=1, max_size=12), label="plan"
    )
    wire, expected = _written(fast, how, handle, start, max_frame, plan)
    assert wire == expected


def test_one_pass_across_the_wrap_numbers_on_from_zero() -> None:
    """Six batched sends written in one pass from delivery-id 2**32-3 (one of them larger
    than a frame): ids 2**32-3 .. 2**32-1, then 0, 1, 2; the link's delivery-count and
    credit, and the session's next delivery-id, move by six."""
    plan = [(10, False, 0), (10, True, 0), (2000, False, 0), (10, False, 16), (0, True, 0), (10, False, 0)]
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=100, max_frame_size=512))
    session = pair.open()
    sender = session.attach_sender(
        "a", target=Target(address="a"), snd_settle_mode=SND_MIXED, initial_delivery_count=WRAP - 1
    )
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(10)
    pair.pump()
    session._next_delivery_id = WRAP - 3
    sender.batch_transfers = True
    made = [
        sender.send(bytes(size), tag=bytes([i]) * n if n else None, settled=s) for i, (size, s, n) in enumerate(plan)
    ]
    wire = bytes(pair.client.data_to_send())
    assert [d.delivery_id for d in made] == [WRAP - 3, WRAP - 2, WRAP - 1, 0, 1, 2]
    assert (sender.delivery_count, sender.link_credit, session._next_delivery_id) == (5, 4, 3)
    assert sorted(sender.unsettled) == [0, 2, WRAP - 3, WRAP - 1]
    assert wire == reference(0, made, WRAP - 3, 512)
