"""What the commands send (``--property``) and how they show a message (``--show``, ``peek``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.commands.messages import Outgoing, describe, parse_properties, show_line
from amqplink.message import Message

names = st.text(min_size=1).filter(lambda n: "=" not in n and not n.endswith(":"))
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text()


@given(st.dictionaries(names, st.text()))
def test_text_properties_round_trip(props: dict[str, str]) -> None:
    assert parse_properties([f"{k}={v}" for k, v in props.items()]) == props


@given(names, scalars)
def test_json_properties_round_trip(name: str, value: Any) -> None:
    assert parse_properties([f"{name}:={json.dumps(value)}"]) == {name: value}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("novalue", "expected NAME=TEXT or NAME:=JSON"),
        ("=x", "has no name"),
        ("n:=[1]", "not a JSON object or array"),
        ("n:=five", "takes a JSON number"),
    ],
)
def test_bad_properties_say_what_is_expected(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_properties([value])


def test_outgoing_messages_carry_id_session_and_properties() -> None:
    message = Outgoing(b"body", {"k": 1}, "s-1").message(7)
    decoded = Message.decode(message.encode())
    assert (decoded.message_id, decoded.session_id, decoded.application_properties) == ("7", "s-1", {"k": 1})
    assert decoded.body == b"body"


def test_shown_bodies_are_text_or_hex() -> None:
    assert show_line(Message(b"caf\xc3\xa9"), as_json=False) == "café"
    assert show_line(Message(b"\xff\x00"), as_json=False) == "ff00"
    assert show_line(Message({"a": 1}), as_json=False) == '{"a": 1}'
    fields = describe(Message(b"x", message_id="m", application_properties={"b": b"\x01"}))
    assert fields == {"message_id": "m", "properties": {"b": "\x01"}, "body": "x"}
