"""Every AMQP type through the broker (issue 30, item 2): strategies for message sections
holding every type, the broker's three kinds of entity, and what "received back equal" means.

Equality is :func:`amqplink.codec.same_value`'s: the same Python types all the way down (a
uint is not a long, an array is not a list), floats by their bits (a NaN is the NaN it
was), decimals by their raw bytes (the broker keeps the sender's encoding), descriptors with
their types.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import struct
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.codec import (
    AMQPType,
    Array,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Long,
    Symbol,
    ULong,
    same_value,
)
from amqplink.codec.decode import float32_nan
from amqplink.message import Message
from amqplink.sbwire.annotations import SEQUENCE_NUMBER
from amqplink.sbwire.decimals import DOTNET_MAX_SCALE, servicebus_decimal128
from tests.codec.codec_strategies import PRIMITIVES, descriptors, primitive_arrays

__all__ = [
    "HARD",
    "HARD_FOR_PROTON",
    "MODES",
    "Sections",
    "any_values",
    "application_values",
    "assert_all_kept",
    "assert_kept",
    "decimal_tuples",
    "dotnet_numbers",
    "messages",
    "receive_ours",
    "round_trip",
    "storable_decimals",
]

MODES = ("memory", "partitioned", "durable")
"""The broker's kinds of entity: in memory, partitioned (fragments), durable across a restart."""

# -- values ----------------------------------------------------------------------------
_nan_doubles = st.tuples(st.integers(0, 1), st.integers(1, 2**52 - 1)).map(
    lambda t: struct.unpack(">d", struct.pack(">Q", t[0] << 63 | 0x7FF << 52 | t[1]))[0]
)
_nan_floats = st.tuples(st.integers(0, 1), st.integers(1, 2**23 - 1)).map(
    lambda t: Float(float32_nan(t[0] << 31 | 0xFF << 23 | t[1]))
)
_scalars = st.one_of(*PRIMITIVES.values(), _nan_doubles, _nan_floats)
_protocol_descriptors = st.sampled_from(
    [ULong(code) for code in (0x23, 0x24, 0x25, 0x70, 0x73, 0x75, 0x77, 0x31)] + [Symbol("amqp:accepted:list")]
)
_any_descriptors = st.one_of(descriptors, _protocol_descriptors, st.integers(-9, 9).map(Long))
_keys = st.one_of(*(s for t, s in PRIMITIVES.items() if t not in (AMQPType.DOUBLE, AMQPType.FLOAT)))


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_keys, children, max_size=4),
        primitive_arrays(),
        st.tuples(st.sampled_from(list(PRIMITIVES)), _protocol_descriptors).flatmap(
            lambda t: st.lists(PRIMITIVES[t[0]], max_size=3).map(lambda items: Array(items, t[0], t[1]))
        ),  # an array of described values whose descriptor is a protocol composite's
        st.lists(st.lists(children, max_size=2), max_size=2).map(lambda v: Array(v, AMQPType.LIST)),
        st.lists(st.dictionaries(_keys, children, max_size=2), max_size=2).map(lambda v: Array(v, AMQPType.MAP)),
        st.lists(primitive_arrays(described=False), max_size=2).map(lambda v: Array(v, AMQPType.ARRAY)),
        st.lists(PRIMITIVES[AMQPType.SYMBOL], max_size=3).map(lambda v: Array(v, AMQPType.SYMBOL)),
        st.builds(Described, _any_descriptors, children),
    )


any_values = st.recursive(_scalars, _compound, max_leaves=10)
"""Any AMQP value: every primitive (NaNs with payloads too), lists, maps, arrays (of every
element type, nested, described), described values (the protocol's own descriptors too)."""


@st.composite
def storable_decimals(draw: st.DrawFn) -> Decimal32 | Decimal64 | Decimal128:
    """An AMQP decimal that Service Bus's .NET decimal holds (96 bits, 28 places at most), in
    any of the three widths and with its own exponent, or a decimal128 in the layout Service
    Bus itself writes (amqplink/sbwire/decimals.py), which it takes back too."""
    kind = draw(st.sampled_from([Decimal32, Decimal64, Decimal128]))
    digits = min(kind.DIGITS, 28)
    coefficient = draw(st.integers(0, min(10**digits - 1, 2**96 - 1)))
    exponent = draw(st.integers(-DOTNET_MAX_SCALE, 0 if coefficient else 6))
    number = Decimal((draw(st.integers(0, 1)), tuple(map(int, str(coefficient))), exponent))
    value = kind.from_decimal(number)
    return servicebus_decimal128(value) if draw(st.booleans()) else value


def dotnet_numbers(coefficient_bits: int = 96) -> st.SearchStrategy[Decimal]:
    """A ``decimal.Decimal`` that a .NET ``System.Decimal`` (so a Service Bus application
    property) holds: a coefficient of up to ``coefficient_bits`` bits (96 at most), 0 to 28
    places, either sign (a negative zero too)."""
    return st.builds(
        lambda sign, coefficient, scale: Decimal((sign, tuple(map(int, str(coefficient))), -scale)),
        st.integers(0, 1),
        st.integers(0, 2**coefficient_bits - 1),
        st.integers(0, DOTNET_MAX_SCALE),
    )


def decimal_tuples(props: dict[Any, Any] | None) -> dict[Any, Any]:
    """Received properties that must all be ``decimal.Decimal``, each as its (sign, digits,
    exponent): ``1.50`` is not ``1.5`` here."""
    assert props is not None and all(type(v) is Decimal for v in props.values()), props
    return {k: v.as_tuple() for k, v in props.items()}


_simple = st.one_of(*(s for t, s in PRIMITIVES.items() if "DECIMAL" not in t.name), _nan_doubles, storable_decimals())
application_values = st.one_of(_simple, st.builds(Described, _any_descriptors, _simple))
"""What an application property may hold and the broker keeps: simple values (3.2.5), a
described simple value, decimals Service Bus holds."""

_annotation_keys = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6).map(
    lambda name: Symbol("x-test-" + name)
)
"""Annotation keys: symbols (3.2.10), in the ``x-`` space the application owns, none a
Service Bus stamp the broker writes itself."""


@dataclass
class Sections:
    """What one message holds, section by section (None: no such section)."""

    message_annotations: dict[Any, Any] | None
    delivery_annotations: dict[Any, Any] | None
    application_properties: dict[str, Any] | None
    footer: dict[Any, Any] | None
    body: Any
    body_type: str

    def message(self, message_id: str) -> Message:
        """The message, with ``message_id`` to tell it among the others."""
        return Message(
            self.body,
            message_id=message_id,
            body_type=self.body_type,
            message_annotations=self.message_annotations,
            delivery_annotations=self.delivery_annotations,
            application_properties=self.application_properties,
            footer=self.footer,
        )


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


_bodies = st.one_of(
    st.tuples(any_values, st.just("value")),
    st.tuples(st.lists(any_values, max_size=3), st.just("sequence")),
    # several amqp-sequence sections (one is body_type "sequence")
    st.tuples(st.lists(st.lists(any_values, max_size=2), min_size=2, max_size=3), st.just("sequences")),
    st.tuples(st.lists(st.binary(max_size=20), min_size=2, max_size=3), st.just("data")),
)
messages = st.builds(
    lambda ma, da, ap, footer, body: Sections(ma, da, ap, footer, body[0], body[1]),
    _maybe(st.dictionaries(_annotation_keys, any_values, min_size=1, max_size=3)),
    _maybe(st.dictionaries(_annotation_keys, any_values, min_size=1, max_size=2)),
    _maybe(st.dictionaries(st.text(max_size=6), application_values, min_size=1, max_size=4)),
    _maybe(st.dictionaries(_annotation_keys, any_values, min_size=1, max_size=2)),
    _bodies,
)
"""A message with every section a sender writes: message and delivery annotations,
application properties, a footer, an amqp-value, amqp-sequence or data body."""


HARD = Sections(
    message_annotations={
        Symbol("x-test-accepted"): Described(ULong(0x24), [True]),  # a protocol descriptor, a field it lacks
        Symbol("x-test-header"): Described(ULong(0x70), [True, 5]),  # a header whose priority is no ubyte
        Symbol("x-test-nan"): Float(float32_nan(0x7F800001)),  # a signalling NaN with a payload
        Symbol("x-test-long"): Described(Long(5), "a long descriptor"),
        Symbol("x-test-symbols"): Array([Symbol("a"), Symbol("b")], AMQPType.SYMBOL),
    },
    delivery_annotations={Symbol("x-test-hop"): "kept, as Service Bus keeps it"},
    application_properties={
        "d128": Decimal128.from_decimal("1.5"),
        "d128sb": servicebus_decimal128(Decimal128.from_decimal("-0.001")),  # Service Bus's layout: was refused
        "d32": Decimal32.from_decimal("-2.50"),
        "c": Char("é"),
    },
    footer={Symbol("x-test-digest"): Described(Symbol("amqp:accepted:list"), [b"\x00"])},
    body=Described(ULong(0x77), [Array([1, 2], AMQPType.LONG, ULong(0x24))]),
    body_type="value",
)
"""The shapes that were lost or refused before (issue 30): drawn every run, not by chance."""
HARD_FOR_PROTON = dataclasses.replace(
    HARD, message_annotations={**HARD.message_annotations, Symbol("x-test-nan"): Float(float32_nan(0x7FC00001))}
)  # type: ignore[dict-item]
""":data:`HARD` as proton's Python binding can send it (a quiet NaN: it writes every float32 NaN so)."""


# -- what "received back equal" means ---------------------------------------------------
def assert_kept(sent: Sections, got: Message, what: str) -> None:
    """``got`` (a delivery or a peek of ``sent``) holds what ``sent`` held, type for type and
    bit for bit; the broker's own annotations besides. The sender's delivery annotations come
    back too, as Service Bus keeps them (the SDK's ``test_message_inner_amqp_properties``), with
    the broker's ``x-opt-lock-token`` besides on a peek-lock delivery."""
    assert got.body_type == sent.body_type, what
    assert same_value(got.body, sent.body), f"{what}: body {got.body!r} != {sent.body!r}"
    for key, value in (sent.message_annotations or {}).items():
        kept = (got.message_annotations or {}).get(key)
        assert same_value(kept, value), f"{what}: message annotation {key}: {kept!r} != {value!r}"
    assert same_value(got.application_properties, sent.application_properties), (
        f"{what}: application properties {got.application_properties!r} != {sent.application_properties!r}"
    )
    assert same_value(got.footer, sent.footer), f"{what}: footer {got.footer!r} != {sent.footer!r}"
    for key, value in (sent.delivery_annotations or {}).items():
        kept = (got.delivery_annotations or {}).get(key)
        assert same_value(kept, value), f"{what}: delivery annotation {key}: {kept!r} != {value!r}"


# -- the broker's entities --------------------------------------------------------------
QUEUE = "types"


def config(mode: str) -> BrokerConfig:
    """The namespace of ``mode``: one queue, partitioned for ``partitioned``."""
    properties = EntityProperties(enable_partitioning=mode == "partitioned", partition_count=4)
    return BrokerConfig((NamespaceConfig(queues=(QueueConfig(QUEUE, properties),)),))


@contextlib.asynccontextmanager
async def brokers(mode: str) -> AsyncIterator[Any]:
    """``start()``: a running broker of ``mode``, the same data directory each time (a
    restart, for ``durable``); a broker started before is stopped first."""
    with tempfile.TemporaryDirectory(prefix="amqplink-types-") as directory:
        running: list[Broker] = []

        async def start() -> Broker:
            while running:
                await running.pop().stop()
            broker = Broker(config(mode), servicebus=True, data_dir=directory if mode == "durable" else None)
            await broker.start()
            running.append(broker)
            return broker

        try:
            yield start
        finally:
            while running:
                await running.pop().stop()


async def peek_all(conn: Any, count: int) -> list[Message]:
    """``$management`` peek-message of the queue, page by page as the SDK pages (a partitioned
    queue answers one fragment at a time), until ``count`` messages or none is left."""
    pair = await RequestResponseLink.open(conn, f"{QUEUE}/$management")
    found: list[Message] = []
    start = 0
    while len(found) < count:
        body = {"from-sequence-number": Long(start), "message-count": count - len(found)}
        peek = Message(body, application_properties={"operation": "com.microsoft:peek-message"})
        answer = await pair.request(peek)
        status = (answer.application_properties or {}).get("statusCode")
        if status == 204:
            break
        assert status == 200, answer.application_properties
        page = [Message.decode(item["message"]) for item in answer.body["messages"]]  # type: ignore[index]
        found += page
        start = max(int((m.message_annotations or {})[SEQUENCE_NUMBER]) for m in page) + 1
    return found


async def round_trip(mode: str, send: Any, count: int, receive: Any = None) -> tuple[list[Message], list[Message]]:
    """Run ``send(url)`` (it sends ``count`` messages to :data:`QUEUE`) against a broker of
    ``mode``; restart it (``durable``); then peek them all with amqplink's own client and
    receive them with ``receive(url, count)`` (default: amqplink's client): (peeked,
    received)."""
    async with brokers(mode) as start:
        broker = await start()
        await send(broker.url)
        if mode == "durable":
            broker = await start()
        conn = await connect(broker.url)
        try:
            peeked = await peek_all(conn, count + 1)  # (one more: none is there)
            got = await (receive or receive_ours)(broker.url, count)
        finally:
            await conn.close()
        assert len(broker.namespace.receiver_source(QUEUE).store) == 0  # all received, none left
    return peeked, got


async def receive_ours(url: str, count: int) -> list[Message]:
    """Receive and accept ``count`` messages with amqplink's own client."""
    conn = await connect(url)
    try:
        receiver = await conn.create_receiver(QUEUE, prefetch=count)
        got: list[Message] = []
        while len(got) < count:
            more = await receiver.receive(count - len(got), timeout=10)
            assert more, f"{len(got)} of {count} messages received"
            got += more
        await receiver.accept(*got)  # type: ignore[arg-type]
    finally:
        await conn.close()
    return got


async def send_ours(url: str, sent: list[Sections]) -> None:
    """Send ``sent`` with amqplink's own client, each acknowledged (accepted); message ``i``
    has the message-id ``m<i>``."""
    conn = await connect(url)
    try:
        sender = await conn.create_sender(QUEUE)
        for i, one in enumerate(sent):
            await asyncio.wait_for(sender.send(one.message(f"m{i}")), 10)
    finally:
        await conn.close()


def assert_all_kept(sent: list[Sections], peeked: list[Message], got: list[Message]) -> None:
    """Each message of ``sent`` peeked once and received once (message-id ``m<i>``: a
    partitioned entity hands them over fragment by fragment), holding what it was sent with."""
    for what, messages in (("peeked", peeked), ("received", got)):
        by_id = {m.message_id: m for m in messages}
        assert sorted(by_id) == sorted(f"m{i}" for i in range(len(sent))) and len(messages) == len(sent), what
        for i, one in enumerate(sent):
            assert_kept(one, by_id[f"m{i}"], f"{what} m{i}")
