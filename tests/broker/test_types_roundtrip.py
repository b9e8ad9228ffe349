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

from tests import profiles
from tests.broker.typesutil import HARD, MODES, Sections, assert_all_kept, messages, round_trip, send_ours


@pytest.mark.parametrize("mode", MODES)
@settings(profiles.HEAVY, deadline=None)
@given(sent=st.lists(messages, min_size=1, max_size=4))
@example(sent=[HARD])
def test_every_type_sent_by_amqplink_comes_back_equal(mode: str, sent: list[Sections]) -> None:
    async def send(url: str) -> None:
        await send_ours(url, sent)

    peeked, got = asyncio.run(round_trip(mode, send, len(sent)))
    assert_all_kept(sent, peeked, got)
