"""Every AMQP type survives the broker (issue 30, item 2), sent and received by qpid-proton.

Proton's own codec writes each message's sections (message and delivery annotations,
application properties, footer, body: proton's ``Message`` has no footer, so the sections
are proton ``Data`` values, streamed by proton's link), proton's client sends them to a
queue in memory, a partitioned queue and a durable queue restarted before it is read;
proton's client receives them and proton's codec reads them back, equal type for type and
bit for bit; amqplink peeks them through ``$management``, equal too. What proton's Python
binding itself cannot hold (tests/codec/proton_values.py) is left out.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import proton
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from proton import Delivery, ulong
from proton.handlers import MessagingHandler
from proton.utils import BlockingConnection

from amqplink.message import Message
from tests import profiles
from tests.broker.typesutil import HARD_FOR_PROTON, MODES, QUEUE, Sections, assert_all_kept, messages, round_trip
from tests.codec.proton_values import from_proton, proton_can_read, to_proton


def _proton_holds(sent: Sections) -> bool:
    sections = (sent.message_annotations, sent.delivery_annotations, sent.application_properties, sent.footer)
    return all(proton_can_read(section) for section in sections if section) and proton_can_read(sent.body)


def _section(code: int, value: Any) -> bytes:
    data = proton.Data()
    data.put_object(proton.Described(ulong(code), value))
    return bytes(data.encode())


def proton_payload(sent: Sections, message_id: str) -> bytes:
    """``sent`` as proton's codec writes it: each section a described value of proton's."""
    parts = []
    for code, section in ((0x71, sent.delivery_annotations), (0x72, sent.message_annotations)):
        if section:
            parts.append(_section(code, to_proton(section)))
    parts.append(_section(0x73, [message_id]))
    if sent.application_properties:
        parts.append(_section(0x74, to_proton(sent.application_properties)))
    if sent.body_type == "data":
        parts += [_section(0x75, chunk) for chunk in sent.body]
    elif sent.body_type == "sequence":
        parts.append(_section(0x76, to_proton(sent.body)))
    elif sent.body_type == "sequences":
        parts += [_section(0x76, to_proton(one)) for one in sent.body]
    else:
        parts.append(_section(0x77, to_proton(sent.body)))
    if sent.footer:
        parts.append(_section(0x78, to_proton(sent.footer)))
    return b"".join(parts)


class _Raw:
    """A payload proton's link streams as it is (what ``proton.Message.send`` does with its own)."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def send(self, sender: Any, tag: str | None = None) -> Any:
        delivery = sender.delivery(tag or sender.delivery_tag())
        sender.stream(self.payload)
        sender.advance()
        return delivery


def proton_send(url: str, sent: list[Sections]) -> None:
    """Send ``sent`` with proton's blocking client, each accepted (message ``i``: id ``m<i>``)."""
    conn = BlockingConnection(url, timeout=20)
    try:
        sender = conn.create_sender(QUEUE, name=f"proton-sender-{uuid.uuid4()}")
        for i, one in enumerate(sent):
            delivery = sender.send(_Raw(proton_payload(one, f"m{i}")))  # raises SendException if refused
            assert delivery.remote_state == Delivery.ACCEPTED
    finally:
        conn.close()


class _RawReceiver(MessagingHandler):  # type: ignore[misc]
    """Takes each delivery's bytes as they came, and accepts it."""

    def __init__(self) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.payloads: list[bytes] = []

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        if delivery.readable and not delivery.partial:
            self.payloads.append(bytes(event.link.recv(delivery.pending)))
            event.link.advance()
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()


def proton_read(payload: bytes) -> Message:
    """A delivery as proton's codec reads it, section by section, as an amqplink Message."""
    data = proton.Data()
    rest = memoryview(payload)
    sections: dict[int, list[Any]] = {}
    while rest:
        data.clear()
        used = data.decode(bytes(rest))
        rest = rest[used:]
        data.rewind()
        data.next()
        section = data.get_object()
        assert isinstance(section, proton.Described), section
        sections.setdefault(int(section.descriptor), []).append(from_proton(section.value))
    bodies: list[Any] = sections.get(0x75) or sections.get(0x76) or sections.get(0x77) or []
    kind = "data" if 0x75 in sections else "value" if 0x77 in sections else "sequence"
    if kind == "sequence" and len(bodies) > 1:
        kind = "sequences"
    body = bodies if kind in ("data", "sequences") else bodies[0]
    (properties,) = sections[0x73]
    return Message(
        body,
        body_type=kind,
        message_id=properties[0],
        delivery_annotations=_one(sections, 0x71),
        message_annotations=_one(sections, 0x72),
        application_properties=_one(sections, 0x74),
        footer=_one(sections, 0x78),
    )


def _one(sections: dict[int, list[Any]], code: int) -> Any:
    found = sections.get(code)
    return None if found is None else found[0]


def proton_receive(url: str, count: int) -> list[Message]:
    """Receive and accept ``count`` messages with proton's client; read them with proton's codec."""
    conn = BlockingConnection(url, timeout=20)
    try:
        handler = _RawReceiver()
        # (kept: a BlockingReceiver closes its link when it is collected)
        receiver = conn.create_receiver(QUEUE, credit=count, handler=handler, name=f"proton-receiver-{uuid.uuid4()}")
        conn.wait(lambda: len(handler.payloads) >= count, timeout=20, msg="proton receiving")
        receiver.close()
        return [proton_read(payload) for payload in handler.payloads]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", MODES)
@settings(profiles.HEAVY, deadline=None)
@given(sent=st.lists(messages.filter(_proton_holds), min_size=1, max_size=4))
@example(sent=[HARD_FOR_PROTON])
def test_every_type_sent_by_proton_comes_back_equal(mode: str, sent: list[Sections]) -> None:
    async def send(url: str) -> None:
        await asyncio.to_thread(proton_send, url, sent)

    async def receive(url: str, count: int) -> list[Message]:
        return await asyncio.to_thread(proton_receive, url, count)

    peeked, got = asyncio.run(round_trip(mode, send, len(sent), receive))
    assert_all_kept(sent, peeked, got)
