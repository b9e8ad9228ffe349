"""``scan_like`` (a transfer read by the layout of the one before it) agrees with
``scan_transfer``: whenever it reads a transfer, ``scan_transfer`` reads the same
delivery-id and tag there and every other field as in the transfer the layout came
from; it reads every transfer that differs from that one only in those two values.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec.types import UInt
from amqplink.engine.frames import write_transfer
from amqplink.engine.hot_decode import scan_like, scan_transfer, transfer_layout
from amqplink.protocol.definitions import Transfer

ids = st.one_of(st.integers(0, 300), st.integers(0, 2**32 - 1))


def _assembled(handle: int, delivery_id: int, tag: bytes, message_format: int, settled: bool, payload: bytes) -> bytes:
    out = bytearray()
    write_transfer(out, 0, handle, delivery_id, tag, message_format, settled, payload)
    return bytes(out[8:])


def _encoded(transfer: Transfer, payload: bytes) -> bytes:
    out = bytearray()
    transfer._amqp_encode(out)
    return bytes(out) + payload


transfers = st.one_of(
    st.builds(
        _assembled,
        ids,
        ids,
        st.binary(max_size=32),
        st.sampled_from([0, 7, 0x80013700]),
        st.booleans(),
        st.binary(max_size=40),
    ),
    st.builds(
        lambda handle, delivery_id, tag, settled, more, payload: _encoded(
            Transfer(
                handle=UInt(handle),
                delivery_id=None if delivery_id is None else UInt(delivery_id),
                delivery_tag=tag,
                settled=settled,
                more=more,
            ),
            payload,
        ),
        ids,
        st.one_of(st.none(), ids),
        st.one_of(st.none(), st.binary(max_size=32)),
        st.one_of(st.none(), st.booleans()),
        st.booleans(),
        st.binary(max_size=40),
    ),
)


def _agrees(body: bytes | memoryview, layout: Any, source: tuple[Any, ...]) -> tuple[int, bytes] | None:
    like = scan_like(body, layout)
    if like is not None:
        handle, _, _, message_format, settled, more, end = source
        assert scan_transfer(body) == (handle, like[0], like[1], message_format, settled, more, end)
    return like


def _with(body: bytes, source: tuple[Any, ...], delivery_id: int, tag: bytes) -> bytes:
    """``body`` with another delivery-id and tag of the same encoded sizes."""
    layout = transfer_layout(body)
    assert layout is not None
    id_at, id_end, _, tag_end = layout[3]
    value = delivery_id.to_bytes(4, "big") if id_end - id_at == 4 else bytes([delivery_id & 0xFF])
    tag = (tag * (tag_end - id_end))[: tag_end - id_end - 2]
    return body[:id_at] + value + body[id_end : id_end + 2] + tag + body[tag_end:]


@given(first=transfers, other=transfers, delivery_id=ids, tag=st.binary(min_size=1, max_size=4), data=st.data())
def test_scan_like_reads_what_scan_transfer_reads(
    first: bytes, other: bytes, delivery_id: int, tag: bytes, data: st.DataObject
) -> None:
    source = scan_transfer(first)
    layout = transfer_layout(first)
    if source is None:
        assert layout is None  # only shapes scan_transfer reads have a layout
        return
    if layout is None:  # no delivery-id of its own, or no tag
        assert source[1] in (None, 0) or source[2] is None
        return
    # the transfer itself, and one that differs only in its delivery-id and tag: read
    for body in (first, memoryview(first), _with(first, source, delivery_id, tag)):
        assert _agrees(body, layout, source) is not None
    # any other transfer, and the first with a byte changed or cut short: read alike or declined
    _agrees(other, layout, source)
    mutated = bytearray(first)
    mutated[data.draw(st.integers(0, len(first) - 1))] = data.draw(st.integers(0, 255))
    _agrees(bytes(mutated[: data.draw(st.integers(0, len(first)))]), layout, source)
    _agrees(bytes(mutated), layout, source)


def test_a_tag_of_another_size_in_the_same_bytes_is_declined() -> None:
    first = _assembled(1, 300, b"XY", 0, False, b"p")  # ... a0 02 'X' 'Y' 43 42
    layout = transfer_layout(first)
    assert layout is not None
    tag_at = first.index(b"\xa0\x02XY")
    other = first[: tag_at + 1] + b"\x03" + first[tag_at + 2 :]  # a0 03 'X' 'Y' 43 | 42: no message-format
    assert scan_transfer(other) is None
    assert scan_like(other, layout) is None


def test_a_transfer_scan_transfer_declines_has_no_layout() -> None:
    declined = _encoded(Transfer(handle=UInt(0), delivery_id=UInt(1), delivery_tag=b"t", aborted=True), b"")
    assert scan_transfer(declined) is None
    assert transfer_layout(declined) is None
    assert transfer_layout(b"\x00\x53\x14") is None  # cut short
