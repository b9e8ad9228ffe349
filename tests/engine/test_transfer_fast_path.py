"""The fast transfer writer (``transfer_paths.FAST_WRITER``: hand-assembled frames, run
parts) writes what the reference writer (a ``Transfer`` through ``write_frame``) writes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from amqplink.engine.frames import (
    FRAME_TYPE_AMQP,
    SETTLED_TAIL,
    UNSETTLED_TAIL,
    usual_transfer_parts,
    write_frame,
)
from amqplink.engine.transfer_paths import FAST_WRITER, REFERENCE_WRITER

from .pairs import first_transfer

uint = st.integers(min_value=0, max_value=0xFFFFFFFF)


@given(
    channel=st.integers(min_value=0, max_value=0xFFFF),
    handle=uint,
    delivery_id=uint,
    tag=st.binary(max_size=32),
    message_format=uint,
    settled=st.booleans(),
    payload=st.binary(max_size=300),
)
def test_write_transfer_matches_the_generic_encoder(
    channel: int, handle: int, delivery_id: int, tag: bytes, message_format: int, settled: bool, payload: bytes
) -> None:
    fast = bytearray()
    FAST_WRITER.write(fast, channel, handle, delivery_id, tag, message_format, settled, payload)
    reference = bytearray()
    REFERENCE_WRITER.write(reference, channel, handle, delivery_id, tag, message_format, settled, payload)
    assert bytes(fast) == bytes(reference)
    generic = bytearray()  # (the reference writer is the generic encoder)
    transfer = first_transfer(handle, delivery_id, tag, message_format, settled)
    write_frame(generic, FRAME_TYPE_AMQP, channel, transfer, payload)
    assert bytes(reference) == bytes(generic)


@given(
    channel=st.integers(min_value=0, max_value=0xFFFF),
    handle=st.integers(min_value=0, max_value=300),
    delivery_id=st.one_of(st.integers(min_value=0, max_value=70_000), uint),
    tag=st.one_of(st.binary(min_size=8, max_size=8), st.binary(min_size=16, max_size=16), st.binary(max_size=20)),
    message_format=st.sampled_from([0, 1, 300]),
    settled=st.booleans(),
    payload=st.binary(max_size=300),
)
def test_the_usual_transfer_packed_at_once_matches_the_generic_encoder(
    channel: int, handle: int, delivery_id: int, tag: bytes, message_format: int, settled: bool, payload: bytes
) -> None:
    """Handles below 256, delivery-ids of 256 or more, 8-byte tags (the engine's) or 16-byte
    ones (the broker's lock tokens), format 0: one struct."""
    test_write_transfer_matches_the_generic_encoder.hypothesis.inner_test(  # type: ignore[attr-defined]
        channel, handle, delivery_id, tag, message_format, settled, payload
    )


@given(
    channel=st.integers(min_value=0, max_value=0xFFFF),
    handle=st.integers(min_value=0, max_value=300),
    delivery_id=st.integers(min_value=256, max_value=0xFFFFFFFF),
    tag_size=st.sampled_from([0, 8, 12, 16]),
    settled=st.booleans(),
    payload=st.binary(max_size=300),
    data=st.data(),
)
def test_a_links_usual_transfer_parts_pack_what_write_transfer_writes(
    channel: int, handle: int, delivery_id: int, tag_size: int, settled: bool, payload: bytes, data: st.DataObject
) -> None:
    """usual_transfer_parts: a run's frames from one struct of the link's constant parts are
    write_transfer's bytes; none for a handle of 256 or more or a tag of another size."""
    tag = data.draw(st.binary(min_size=tag_size, max_size=tag_size))
    parts = FAST_WRITER.run_parts(channel, handle, tag_size)
    assert REFERENCE_WRITER.run_parts(channel, handle, tag_size) is None  # the reference never runs
    if handle >= 256 or tag_size not in (8, 16):
        assert parts is None
        return
    assert parts is not None
    pack, middle, tag_head, base = parts
    run = bytearray()
    run += pack(base + len(payload), middle, delivery_id, tag_head, tag, SETTLED_TAIL if settled else UNSETTLED_TAIL)
    run += payload
    one = bytearray()
    REFERENCE_WRITER.write(one, channel, handle, delivery_id, tag, 0, settled, payload)
    assert bytes(run) == bytes(one)
    assert usual_transfer_parts(channel, handle, tag_size) is parts  # kept for the link's next run
