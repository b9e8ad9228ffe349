"""Every AMQP type survives the broker (issue 30, item 2), sent by amqplink's own client.

Each example sends messages holding every type in every section a sender writes (message
and delivery annotations, application properties, footer, amqp-value, amqp-sequence and
data bodies) to a queue in memory, a partitioned queue and a durable queue that is
restarted before it is read; each comes back equal (``tests/broker/typesutil.py``: type for
type, bit for bit), peeked through ``$management`` and received.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.codec import AMQPType, Array, Char, Decimal32, Decimal128, Described, Float, Long, Symbol, ULong
from amqplink.codec.decode import float32_nan
from tests import profiles
from tests.broker.typesutil import MODES, Sections, assert_all_kept, messages, round_trip, send_ours

HARD = Sections(
    message_annotations={
        Symbol("x-test-accepted"): Described(ULong(0x24), [True]),  # a protocol descriptor, a field it lacks
        Symbol("x-test-header"): Described(ULong(0x70), [True, 5]),  # a header whose priority is no ubyte
        Symbol("x-test-nan"): Float(float32_nan(0x7F800001)),  # a signalling NaN with a payload
        Symbol("x-test-long"): Described(Long(5), "a long descriptor"),
        Symbol("x-test-symbols"): Array([Symbol("a"), Symbol("b")], AMQPType.SYMBOL),
    },
    delivery_annotations={Symbol("x-test-hop"): "for the broker only"},
    application_properties={
        "d128": Decimal128.from_decimal("1.5"),
        "d32": Decimal32.from_decimal("-2.50"),
        "c": Char("é"),
    },
    footer={Symbol("x-test-digest"): Described(Symbol("amqp:accepted:list"), [b"\x00"])},
    body=Described(ULong(0x77), [Array([1, 2], AMQPType.LONG, ULong(0x24))]),
    body_type="value",
)
"""The shapes that were lost or refused before (issue 30): drawn every run, not by chance."""


@pytest.mark.parametrize("mode", MODES)
@settings(profiles.HEAVY, deadline=None)
@given(sent=st.lists(messages, min_size=1, max_size=4))
@example(sent=[HARD])
def test_every_type_sent_by_amqplink_comes_back_equal(mode: str, sent: list[Sections]) -> None:
    async def send(url: str) -> None:
        await send_ours(url, sent)

    peeked, got = asyncio.run(round_trip(mode, send, len(sent)))
    assert_all_kept(sent, peeked, got)
