"""The straight-line transfer/disposition decoders agree with the generic decoder.

For every input they either decline (``None``: the generic decoder takes over) or
return exactly what the generic decoder returns; they never raise. The common shapes
(what amqplink, proton and RabbitMQ send in the steady state) must not be declined.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, UByte, UInt
from amqplink.engine.frames import write_transfer
from amqplink.engine.hot_decode import decode_disposition, decode_transfer
from amqplink.protocol.definitions import (
    Accepted,
    Disposition,
    Error,
    Modified,
    Rejected,
    Released,
    Transfer,
)
from tests import profiles

uints = st.one_of(st.integers(0, 300), st.integers(0, 2**32 - 1)).map(UInt)
optional_uints = st.one_of(st.none(), uints)
optional_bools = st.one_of(st.none(), st.booleans())
outcomes = st.sampled_from(
    [
        None,
        Accepted(),
        Released(),
        Rejected(error=Error(condition=Symbol("amqp:internal-error"), description="x")),
        Modified(delivery_failed=True),
    ]
)


def _encode(performative: Any, payload: bytes = b"") -> bytes:
    out = bytearray()
    performative._amqp_encode(out)
    return bytes(out) + payload


def _generic(body: bytes) -> tuple[Any, int] | None:
    try:
        return decode(body)
    except DecodeError:
        return None


def _agree_on_transfer(body: bytes) -> tuple[Transfer, int] | None:
    for given_as in (body, memoryview(body)):
        fast = decode_transfer(given_as)
        if fast is not None:
            assert _generic(body) == fast
    return decode_transfer(body)


def _agree_on_disposition(body: bytes) -> Disposition | None:
    for given_as in (body, memoryview(body)):
        fast = decode_disposition(given_as)
        if fast is not None:
            generic = _generic(body)
            assert generic is not None and generic == (fast, len(body))
    return decode_disposition(body)


@given(
    handle=uints,
    delivery_id=optional_uints,
    tag=st.one_of(st.none(), st.binary(max_size=40)),
    message_format=optional_uints,
    settled=optional_bools,
    more=st.booleans(),
    rcv_settle_mode=st.one_of(st.none(), st.integers(0, 1).map(UByte)),
    state=outcomes,
    aborted=st.booleans(),
    batchable=st.booleans(),
    payload=st.binary(max_size=64),
)
def test_transfers_decode_as_the_generic_decoder_does(
    handle: UInt,
    delivery_id: UInt | None,
    tag: bytes | None,
    message_format: UInt | None,
    settled: bool | None,
    more: bool,
    rcv_settle_mode: UByte | None,
    state: Any,
    aborted: bool,
    batchable: bool,
    payload: bytes,
) -> None:
    transfer = Transfer(
        handle, delivery_id, tag, message_format, settled, more, rcv_settle_mode, state, False, aborted, batchable
    )
    body = _encode(transfer, payload)
    fast = _agree_on_transfer(body)
    common = rcv_settle_mode is None and state is None and not aborted and not batchable
    if common:
        assert fast == (transfer, len(body) - len(payload))


@given(
    role=st.booleans(),
    first=uints,
    last=optional_uints,
    settled=st.booleans(),
    state=outcomes,
    batchable=st.booleans(),
)
def test_dispositions_decode_as_the_generic_decoder_does(
    role: bool, first: UInt, last: UInt | None, settled: bool, state: Any, batchable: bool
) -> None:
    disposition = Disposition(role, first, last, settled, state, batchable)
    body = _encode(disposition)
    assert _agree_on_disposition(body) == disposition  # every disposition shape is read
    assert decode_disposition(body + b"\x40") is None  # nothing may follow a disposition


@given(
    handle=st.integers(0, 2**32 - 1),
    delivery_id=st.integers(0, 2**32 - 1),
    tag=st.binary(max_size=32),
    settled=st.booleans(),
    payload=st.binary(max_size=64),
)
def test_the_hand_assembled_transfer_is_always_read_fast(
    handle: int, delivery_id: int, tag: bytes, settled: bool, payload: bytes
) -> None:
    out = bytearray()
    write_transfer(out, 0, handle, delivery_id, tag, 0, settled, payload)
    body = bytes(out[8:])
    fast = _agree_on_transfer(body)
    assert fast is not None and fast[1] == len(body) - len(payload)
    assert bytes(body[fast[1] :]) == payload


def test_unusual_but_valid_encodings_are_declined_or_agree() -> None:
    uint_wide = bytes.fromhex("0053 14 c0 15 05 7000000001 7000000002 a0 01 aa 7000000000 56 01".replace(" ", ""))
    bool_byte = bytes.fromhex("0053 15 c0 08 04 56 01 52 07 40 56 00".replace(" ", ""))
    list32 = bytes.fromhex("0053 14 d0 00000009 00000003 43 43 a0 01 bb".replace(" ", ""))
    list0_state = bytes.fromhex("0053 15 c0 0b 05 41 43 40 41 0053 24 c0 01 00".replace(" ", ""))
    for body in (uint_wide, bool_byte, list32, list0_state):
        assert _generic(body) is not None, body.hex()  # all valid
    for body in (uint_wide, list32):
        _agree_on_transfer(body)
    for body in (bool_byte, list0_state):
        _agree_on_disposition(body)
    assert decode_transfer(uint_wide) is None  # 0x56 boolean: declined
    assert decode_transfer(list32) is None
    assert decode_disposition(list0_state) == Disposition(True, UInt(0), None, True, Accepted())


@pytest.mark.fuzz
@settings(profiles.FUZZ)
@given(data=st.data(), which=st.sampled_from(["transfer", "disposition"]))
def test_corrupted_frames_never_raise_and_never_disagree(data: st.DataObject, which: str) -> None:
    if which == "transfer":
        out = bytearray()
        write_transfer(out, 0, 3, 70000, b"tag", 0, False, b"payload")
        body = bytearray(out[8:])
    else:
        body = bytearray(_encode(Disposition(True, UInt(5), UInt(900), True, Accepted(), False)))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    mutated = bytes(body[:cut])
    if which == "transfer":
        _agree_on_transfer(mutated)
    else:
        _agree_on_disposition(mutated)


def test_decode_performative_reads_every_performative_like_the_generic_decoder() -> None:
    from amqplink.engine.hot_decode import decode_performative
    from amqplink.protocol.definitions import Flow

    plain = Transfer(UInt(1), UInt(2), b"t", UInt(0), False)
    with_state = Transfer(UInt(1), UInt(2), b"t", UInt(0), False, state=Accepted())
    flow = Flow(None, UInt(10), UInt(0), UInt(10), UInt(1), UInt(0), UInt(5))
    disposition = Disposition(True, UInt(1), UInt(4), True, Released())
    for performative, payload in ((plain, b"xyz"), (with_state, b"xyz"), (flow, b""), (disposition, b"")):
        body = _encode(performative, payload)
        got, offset = decode_performative(memoryview(body))
        assert got == performative and offset == len(body) - len(payload)
