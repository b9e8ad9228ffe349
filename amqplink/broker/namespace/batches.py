"""A Service Bus batch transfer split into its messages, without decoding it generically.

A batch (message-format ``0x80013700``) is an envelope message whose body is one data
section per encoded message. The general path (:func:`decode_batch`) decodes the
envelope whole (each data section copied into a ``Data``), copies each message out and
splits it with :func:`.envelope.split_message`, decoding its message annotations and
properties generically: most of the broker's CPU per message sent in batches.
:func:`read_batch` reads the batches clients send instead:

- the envelope's head sections are decoded (once per batch) and checked as
  ``Message.decode`` checks them (known sections, in order, maps where maps belong);
  its body is walked data section by data section (descriptor and size only);
- each message of the usual shape, message annotations (a map), properties holding a
  message-id only (the list of one field the client writes, or the official SDK's
  thirteen with twelve nulls) and one data section running to the message's end, is
  cut straight from the payload; a batch's messages mostly share their annotations
  (the partition key of a run of rows), so equal sections are decoded once per batch
  (the dict shared: stored annotations are never changed in place, ``Envelope.with_*``
  copy them);
- a batch's messages are mostly laid out alike (the same annotations, ids of one length,
  bodies of one size): each is first checked against the layout of the one before it
  with two comparisons and cut at the same offsets;
- any other message goes through :func:`.envelope.split_message` as before.

:func:`read_batch` returns None when the envelope is anything else (other body sections, a footer, a
section it does not read, a malformed one), and the general path decides, and names
what is wrong: what it returns is what the general path makes, envelope for envelope
(a property test compares them).
"""

from __future__ import annotations

from typing import Any

from amqplink.broker.namespace.envelope import _ORDER, Envelope, _new_envelope, split_message
from amqplink.broker.namespace.errors import ARGUMENT_ERROR, EntityError
from amqplink.broker.namespace.storable import NotStorable, check_annotations
from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.message import ID_ONLY_HEADS, Message
from amqplink.protocol.definitions import MessageAnnotations, Properties

__all__ = ["decode_batch", "read_batch", "split_batch"]

_DATA = b"\x00\x53\x75"
_ANNOTATIONS = b"\x00\x53\x72"
_ANNOTATIONS_MAP8 = b"\x00\x53\x72\xc1"
_PROPERTIES = b"\x00\x53\x73"
_NULLS = b"\x40" * 12
_NEVER = b"\x01"
"""Matches no section (every section starts with 00: a descriptor)."""
_ID_ONLY = ID_ONLY_HEADS + (_NEVER,) * (256 - len(ID_ONLY_HEADS))
"""The start of a properties section that is a list of one field, a message-id of ``n``
UTF-8 bytes (str8), up to the id (what this project's clients write: :data:`amqplink.message.ID_ONLY_HEADS`),
for any length byte ``n``."""
_ID_AND_NULLS = tuple(b"\x00\x53\x73\xc0" + bytes((n + 15, 13, 0xA1, n)) if n <= 240 else _NEVER for n in range(256))
"""The same, followed by 12 nulls: all 13 fields of the list (what the official SDK writes)."""


def _head_end(buf: bytes, n: int) -> int | None:
    """Where the envelope's body starts, its head sections decoded and checked; None if a
    head section is not one ``Message.decode`` takes (or the body is not a data section)."""
    pos = 0
    last = -1
    while pos < n and not buf.startswith(_DATA, pos):
        section, pos = decode(buf, pos)
        rank = _ORDER.get(type(section))
        if rank is None or rank <= last:  # a body section of another kind, a footer, out of order
            return None
        last = rank
        if rank in (1, 2, 4) and type(section.value) is not dict:
            return None
    return pos


def _annotations(
    buf: bytes, pos: int, end: int, seen: dict[bytes, dict[Any, Any]]
) -> tuple[dict[Any, Any], int] | None:
    """The message-annotations map at ``pos`` and the offset after it (a map8 or map32,
    within ``end``), decoded once per distinct section (``seen``); None if it is not one."""
    code = buf[pos + 3] if pos + 3 < end else 0
    if code == 0xC1 and pos + 5 <= end:
        after = pos + 5 + buf[pos + 4]
    elif code == 0xD1 and pos + 8 <= end:
        after = pos + 8 + int.from_bytes(buf[pos + 4 : pos + 8])
    else:
        return None
    if after > end:
        return None
    raw = buf[pos:after]
    value = seen.get(raw)
    if value is None:
        try:
            section, got = decode(buf, pos)
        except DecodeError:  # split_message names it (at its offset in the message)
            return None
        if got != after or type(section) is not MessageAnnotations or type(section.value) is not dict:
            return None
        try:
            check_annotations(section.value, pos)  # (once per distinct section of the batch)
        except NotStorable:  # split_message refuses it, naming it
            return None
        value = seen[raw] = section.value
    return value, after


def _split(buf: bytes, start: int, end: int, seen: dict[bytes, dict[Any, Any]]) -> Envelope | None:
    """The message in ``buf[start:end]`` when it is of the usual shape (see the module's
    docstring), cut from ``buf``; else None."""
    pos = start
    annotations: dict[Any, Any] = {}
    if buf.startswith(_ANNOTATIONS, pos, end):
        after = pos + 5 + buf[pos + 4] if pos + 5 <= end and buf.startswith(_ANNOTATIONS_MAP8, pos) else end + 1
        known = seen.get(buf[pos:after]) if after <= end else None  # (a map32: _annotations reads it)
        if known is not None:  # the annotations of the message before, mostly
            annotations, pos = known, after
        else:
            found = _annotations(buf, pos, end, seen)
            if found is None:
                return None
            annotations, pos = found
    props_start = pos
    properties = None
    if buf.startswith(_PROPERTIES, pos, end):
        if pos + 8 > end:
            return None
        length = buf[pos + 7]
        after = pos + 8 + length
        if buf.startswith(_ID_ONLY[length], pos):
            id_end = after
        elif buf.startswith(_ID_AND_NULLS[length], pos) and buf.startswith(_NULLS, after):
            id_end, after = after, after + 12
        else:
            return None
        if after > end:
            return None
        try:
            properties = Properties(buf[pos + 8 : id_end].decode())
        except UnicodeDecodeError:
            return None
        pos = after
    # one data section running to the end
    if pos + 5 > end or not buf.startswith(_DATA, pos):
        return None
    code = buf[pos + 3]
    if code == 0xA0:
        if pos + 5 + buf[pos + 4] != end:
            return None
    elif code != 0xB0 or pos + 8 > end or pos + 8 + int.from_bytes(buf[pos + 4 : pos + 8]) != end:
        return None
    return _envelope(annotations, properties, b"" if properties is None else buf[props_start:pos], buf[pos:end])


def _envelope(annotations: dict[Any, Any], properties: Properties | None, props_raw: bytes, body: bytes) -> Envelope:
    """``Envelope(None, annotations, properties, None, props_raw, body)`` without the dataclass's calls."""
    envelope = _new_envelope(Envelope)
    envelope.header = None
    envelope.annotations = annotations
    envelope.properties = properties
    envelope.application_properties = None
    envelope.props_raw = props_raw
    envelope.body = body
    envelope.template = None
    envelope.size = len(props_raw) + len(body)
    envelope.delivery_annotations = None
    return envelope


def split_batch(payload: bytes | memoryview) -> list[Envelope]:
    """The messages of a batch transfer's payload: :func:`read_batch`, or :func:`decode_batch`
    when it is not a batch that reads."""
    envelopes = read_batch(payload)
    return decode_batch(payload) if envelopes is None else envelopes


def decode_batch(payload: bytes | memoryview) -> list[Envelope]:
    """The general path: the envelope decoded whole (``DecodeError`` if it is malformed;
    :class:`.EntityError` ``argument-error`` if its body is not data sections), then each
    message split (``DecodeError`` at the first that is malformed)."""
    outer = Message.decode(payload)
    body = outer.body
    if outer.body_type != "data":
        raise EntityError(ARGUMENT_ERROR, "a batch message must carry one data section per message")
    chunks = body if isinstance(body, list) else [body]
    return [split_message(bytes(chunk), check=True) for chunk in chunks]


def read_batch(payload: bytes | memoryview) -> list[Envelope] | None:
    """The messages of a batch transfer's payload, as :func:`decode_batch` makes them (and
    raising what it raises for a malformed message); None when the envelope is not one read
    here (see the module's docstring).

    The messages of a batch are mostly laid out alike: the same annotations, ids of one
    length, bodies of one size. Once a message is split, the next one is checked against
    its layout (data section head, annotations and properties up to the id; after the id,
    the nulls and the data section's head) with two comparisons, and cut at the same offsets."""
    buf = payload if type(payload) is bytes else bytes(payload)
    n = len(buf)
    try:
        pos = _head_end(buf, n)
    except (DecodeError, IndexError):
        return None
    if pos is None or pos == n:
        return None
    seen: dict[bytes, dict[Any, Any]] = {}
    out: list[Any] = []
    append = out.append
    others: list[tuple[int, int, int]] = []
    """(index, start, end) of the messages not of the usual shape, split once the envelope is known valid"""
    # the layout of the message before (offsets from its data section's start); lead None: none
    lead: bytes | None = None
    suffix = b""
    annotations: dict[Any, Any] = {}
    suffix_at = id_at = props_at = body_at = size = 0
    while pos < n:
        if (
            lead is not None
            and buf.startswith(lead, pos)
            and buf.startswith(suffix, pos + suffix_at)
            and pos + size <= n
        ):
            if id_at:
                try:
                    properties: Properties | None = Properties(buf[pos + id_at : pos + suffix_at].decode())
                except UnicodeDecodeError:
                    lead = None
                    continue  # split on its own
                append(
                    _envelope(
                        annotations, properties, buf[pos + props_at : pos + body_at], buf[pos + body_at : pos + size]
                    )
                )
            else:
                append(_envelope(annotations, None, b"", buf[pos + body_at : pos + size]))
            pos += size
            continue
        # a data section: descriptor and size
        if pos + 5 > n or not buf.startswith(_DATA, pos):
            return None
        code = buf[pos + 3]
        if code == 0xA0:
            start = pos + 5
            end = start + buf[pos + 4]
        elif code == 0xB0 and pos + 8 <= n:
            start = pos + 8
            end = start + int.from_bytes(buf[pos + 4 : start])
        else:
            return None
        if end > n:
            return None
        envelope = _split(buf, start, end, seen)
        if envelope is None:
            others.append((len(out), start, end))
            lead = None
        else:  # its layout, for the next one
            annotations = envelope.annotations
            size = end - pos
            body_at = size - len(envelope.body)
            head = body_at + (8 if envelope.body[3] == 0xB0 else 5)  # up to the body's bytes
            props_at = body_at - len(envelope.props_raw)
            if envelope.properties is None:
                id_at, lead, suffix, suffix_at = 0, buf[pos : pos + head], b"", 0
            else:
                id_at = props_at + 8
                suffix_at = id_at + buf[pos + props_at + 7]
                lead, suffix = buf[pos : pos + id_at], buf[pos + suffix_at : pos + head]
        append(envelope)
        pos = end
    for index, start, end in others:  # in order: the first malformed one raises, as in the general path
        out[index] = split_message(buf[start:end], check=True)
    return out
