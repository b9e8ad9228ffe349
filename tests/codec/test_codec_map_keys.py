"""Whatever the encoder accepts, the decoder reads back: maps with compound keys."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from codec_strategies import descriptors, primitives, values
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink import Message
from amqplink.codec import AMQPType, Array, Described, EncodeError, Symbol, Timestamp, decode_all, encode

# Every hashable Python value the encoder might be handed as a key: scalars,
# datetimes (timestamps on the wire), tuples (lists on the wire), described values
# (of anything, lists, tuples and maps included).
_scalar_keys = st.one_of(primitives, st.datetimes(timezones=st.just(dt.UTC)))
hashable_keys = st.recursive(
    st.one_of(
        _scalar_keys,
        st.builds(Described, descriptors, values),
        st.builds(Described, descriptors, st.lists(_scalar_keys, max_size=2).map(tuple)),
    ),
    lambda children: st.lists(children, max_size=3).map(tuple),
    max_leaves=6,
)
maps = st.dictionaries(hashable_keys, values, max_size=4)
# Keys that collide once encoded, in pairs the strategy above rarely draws.
_when = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.UTC)
colliding = st.sampled_from(
    [
        {_when: 1, Timestamp.from_datetime(_when): 2},
        {_when: 1, int(Timestamp.from_datetime(_when)): 2},
        {Described(Symbol("test:k"), [1, 2]): 1, Described(Symbol("test:k"), (1, 2)): 2},
    ]
)


@settings(deadline=None)
@given(st.one_of(maps, colliding, st.lists(maps, max_size=3).map(lambda ms: Array(ms, AMQPType.MAP))))
def test_anything_encoded_decodes_back(value: Any) -> None:
    try:
        data = encode(value)
    except EncodeError as exc:
        assert "map key" in str(exc)
        return
    decoded = decode_all(data)  # no DecodeError: every amqplink receiver reads it
    assert len(decoded) == len(value)
    assert encode(decoded) == data  # and reads back what was sent (datetimes as timestamps)


@pytest.mark.parametrize(
    "value",
    [
        {_when: 1, Timestamp.from_datetime(_when): 2},
        {Described(Symbol("test:k"), [1]): 1, Described(Symbol("test:k"), (1,)): 2},
        Array([{_when: 1, int(Timestamp.from_datetime(_when)): 2}], AMQPType.MAP),
    ],
)
def test_keys_equal_once_encoded_are_refused(value: Any) -> None:
    with pytest.raises(EncodeError, match="equal once encoded"):
        encode(value)


@pytest.mark.parametrize("key", [(1, 2), ("a",), (), ((1,), "x")])
def test_a_tuple_key_is_refused_at_encode_time_with_a_clear_error(key: Any) -> None:
    with pytest.raises(EncodeError, match=r"map key .* AMQP list"):
        encode({key: 1})
    with pytest.raises(EncodeError, match=r"map key .* AMQP list"):
        Message({"ok": {key: 1}}).encode()
    with pytest.raises(EncodeError, match=r"map key .* AMQP list"):
        Message(b"x", application_properties={"a": 1}, message_annotations={key: 1}).encode()


def test_described_keys_with_compound_values_round_trip() -> None:
    key = Described(Symbol("test:k"), [1, {"a": [2]}])
    assert decode_all(encode({key: "v"})) == {key: "v"}
