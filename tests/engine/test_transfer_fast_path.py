"""The hand-assembled single-frame transfer equals the generic performative encoding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from amqplink.engine.frames import FRAME_TYPE_AMQP, write_frame, write_transfer

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
    write_transfer(fast, channel, handle, delivery_id, tag, message_format, settled, payload)
    generic = bytearray()
    transfer = first_transfer(handle, delivery_id, tag, message_format, settled)
    write_frame(generic, FRAME_TYPE_AMQP, channel, transfer, payload)
    assert bytes(fast) == bytes(generic)


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
