"""The XML layer raises only its own error, whatever the bytes and the declared encoding."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.atom.xmlsafe import XmlError, parse_xml

ENCODINGS = st.sampled_from(
    ["utf-8", "UTF-16", "latin-1", "x-bogus", "utf-7", "cp1252", "", "ébc", "shift_jis", "\x00"]
)


@settings(max_examples=300, deadline=None)
@given(ENCODINGS, st.binary(max_size=60) | st.sampled_from([b"<a/>", b"<a>\xff</a>", b"<a", b"\x00"]))
@example("x-bogus", b"<a/>")
@example("utf-16", b"<a/>")
def test_any_declared_encoding_is_parsed_or_refused_with_xml_error(encoding: str, tail: bytes) -> None:
    body = f'<?xml version="1.0" encoding="{encoding}"?>'.encode() + tail
    try:
        root = parse_xml(body)
    except XmlError as exc:
        assert str(exc)
    else:
        assert root.tag


def test_an_unknown_encoding_names_it() -> None:
    with pytest.raises(XmlError, match="unknown encoding: x-bogus"):
        parse_xml(b'<?xml version="1.0" encoding="x-bogus"?><a/>')
