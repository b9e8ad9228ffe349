"""Whatever the encoder accepts, the decoder reads back: maps with compound keys."""

from __future__ import annotations

from typing import Any

import pytest
from codec_strategies import descriptors, primitives, values
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink import Message
from amqplink.codec import AMQPType, Array, Described, EncodeError, Symbol, decode_all, encode

# Every hashable Python value the encoder might be handed as a key: scalars, tuples
# (lists on the wire), described values (of anything, lists and maps included).
hashable_keys = st.recursive(
    st.one_of(primitives, st.builds(Described, descriptors, values)),
    lambda children: st.lists(children, max_size=3).map(tuple),
    max_leaves=6,
)
maps = st.dictionaries(hashable_keys, values, max_size=4)


def _has_tuple_key(value: Any) -> bool:
    return any(isinstance(k, tuple) for k in value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(maps, st.lists(maps, max_size=3).map(lambda ms: Array(ms, AMQPType.MAP))))
def test_anything_encoded_decodes_back(value: Any) -> None:
    try:
        data = encode(value)
    except EncodeError as exc:
        assert "map key" in str(exc)
        assert any(_has_tuple_key(m) for m in (value if isinstance(value, Array) else [value]))
        return
    assert decode_all(data) == value


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
