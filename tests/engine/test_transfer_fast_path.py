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
