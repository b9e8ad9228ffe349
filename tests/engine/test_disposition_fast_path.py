"""The hand-assembled disposition (one accepted or released delivery, or a range of them)
equals the generic performative encoding, and the engine writes it for those states only."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec.types import UInt
from amqplink.engine.frames import FRAME_TYPE_AMQP, FrameReader, write_disposition, write_frame
from amqplink.engine.hot_decode import decode_performative
from amqplink.engine.session import _FIELDLESS_STATES
from amqplink.protocol.definitions import Accepted, Disposition, Modified, Rejected, Released

uint = st.integers(min_value=0, max_value=0xFFFFFFFF)


def generic(channel: int, role: bool, first: int, last: int, settled: bool, state: Any) -> bytes:
    out = bytearray()
    disposition = Disposition(
        role=role, first=UInt(first), last=UInt(last) if last != first else None, settled=settled, state=state
    )
    write_frame(out, FRAME_TYPE_AMQP, channel, disposition)
    return bytes(out)


@given(
    channel=st.integers(min_value=0, max_value=0xFFFF),
    role=st.booleans(),
    first=st.one_of(st.integers(min_value=0, max_value=300), uint),
    span=st.one_of(st.just(0), st.integers(min_value=0, max_value=300)),
    settled=st.booleans(),
    state=st.sampled_from([Accepted(), Released()]),
)
def test_write_disposition_matches_the_generic_encoder(
    channel: int, role: bool, first: int, span: int, settled: bool, state: Any
) -> None:
    last = min(first + span, 0xFFFFFFFF)
    fast = bytearray()
    write_disposition(fast, channel, role, first, last, settled, _FIELDLESS_STATES[type(state)])
    assert bytes(fast) == generic(channel, role, first, last, settled, state)


def test_only_states_without_fields_are_hand_assembled() -> None:
    """Modified and rejected carry fields: they keep the generic encoder (the table has no
    entry for them), and what the table holds decodes back to the state it stands for."""
    assert set(_FIELDLESS_STATES) == {Accepted, Released}
    assert Modified not in _FIELDLESS_STATES and Rejected not in _FIELDLESS_STATES
    for kind, encoded in _FIELDLESS_STATES.items():
        frame = bytearray()
        write_disposition(frame, 0, True, 7, 7, True, encoded)
        reader = FrameReader()
        reader.feed(bytes(frame))
        frames = reader.read_frames()
        assert len(frames) == 1
        performative, _ = decode_performative(frames[0][2])
        assert type(performative) is Disposition and type(performative.state) is kind
