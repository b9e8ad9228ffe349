"""Active replication's circuit breaker (issue 32, item 5): a namespace whose send failed
with an outage error is skipped (sends wait on the other only), probed in the background
by attaching (no message), and sent to again once it answers; its state is visible."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ActiveReplicationSender, ReplicationError, ServiceBusClient
from amqplink.servicebus.replication.breaker import CircuitBreaker
from tests.servicebus.replication_util import QUEUE, two_namespaces
from tests.servicebus.scenario import wait_until
from tests.servicebus.test_replication_senders import FakeSender, _error, _s

DOWN = _error("amqp:connection:forced")


class Probed(FakeSender):
    """A fake sender whose link attaches (``create_message_batch``) only while ``up``."""

    def __init__(self, name: str, *outcomes: BaseException | None) -> None:
        super().__init__(name, *outcomes)
        self.up = False
        self.probes = 0

    async def create_message_batch(self) -> None:
        self.probes += 1
        if not self.up:
            raise DOWN


async def test_a_failed_namespace_is_skipped_then_probed_and_used_again() -> None:
    a, b = Probed("a", DOWN), FakeSender("b")
    sender = ActiveReplicationSender(_s(a), _s(b), break_for=0.05)
    await sender.send_messages(ServiceBusMessage("x", message_id="m0"))  # a refuses: its breaker opens
    assert sender.breakers[0].state == "open" and sender.breakers[0].trips == 1
    for i in range(1, 6):
        await sender.send_messages(ServiceBusMessage("x", message_id=f"m{i}"))
    assert a.got == [] and [g[0] for g in b.got] == [f"m{i}" for i in range(6)]  # a was not asked
    assert sender.breakers[0].skipped == 5 and sender.counters.sent_to_one == 6
    await wait_until(lambda: a.probes >= 2, timeout=5)  # probed in the background, still down
    assert sender.breakers[0].state == "open"
    a.up = True
    await wait_until(lambda: sender.breakers[0].state == "closed", timeout=5)
    await sender.send_messages(ServiceBusMessage("x", message_id="both"))
    assert a.got == [["both"]] and b.got[-1] == ["both"] and sender.counters.sent_to_one == 6
    await sender.close()


async def test_errors_that_are_not_outages_never_open_it_and_zero_turns_it_off() -> None:
    a, b = Probed("a", _error("com.microsoft:server-busy")), FakeSender("b")
    busy = ActiveReplicationSender(_s(a), _s(b), break_for=10)
    await busy.send_messages(ServiceBusMessage("x"))
    assert busy.breakers[0].state == "closed" and busy.breakers[0].last_error is None
    a2, b2 = Probed("a", DOWN, DOWN), FakeSender("b")
    off = ActiveReplicationSender(_s(a2), _s(b2), break_for=0)
    await off.send_messages(ServiceBusMessage("x"))
    await off.send_messages(ServiceBusMessage("x"))
    assert off.breakers[0].state == "closed" and len(a2.outcomes) == 0  # asked both times
    with pytest.raises(ValueError, match="break_for"):
        CircuitBreaker(-1)


async def test_with_both_open_a_send_tries_both() -> None:
    a, b = Probed("a", DOWN, DOWN), Probed("b", DOWN, None)
    sender = ActiveReplicationSender(_s(a), _s(b), break_for=30)
    with pytest.raises(ReplicationError):
        await sender.send_messages(ServiceBusMessage("x"))
    assert [s.state for s in sender.breakers] == ["open", "open"]
    await sender.send_messages(ServiceBusMessage("x", message_id="tried"))  # both open: both tried, b took it
    assert b.got == [["tried"]] and [s.state for s in sender.breakers] == ["open", "closed"]
    await sender.close()


async def test_sends_do_not_wait_on_a_namespace_that_is_down(tmp_path: Path) -> None:
    slow: dict[str, Any] = {"retry_total": 2, "retry_backoff_factor": 0.2, "timeout": 10}  # 1.2 s per dead send
    async with two_namespaces(tmp_path) as (first, second):
        ca = ServiceBusClient.from_connection_string(first.connection_string, **slow)
        cb = ServiceBusClient.from_connection_string(second.connection_string, **slow)
        async with ca, cb:
            sender = ActiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE), break_for=0.5)
            await sender.send_messages(ServiceBusMessage("both"))
            await first.kill()
            await sender.send_messages(ServiceBusMessage("waits once"))  # the breaker opens here
            started = time.monotonic()
            for i in range(50):
                await sender.send_messages(ServiceBusMessage(f"{i}"))
            assert time.monotonic() - started < 3  # without the breaker: 50 x 1.2 s
            assert sender.breakers[0].state == "open" and sender.breakers[0].skipped >= 50
            await wait_until(lambda: not sender._background)  # the first copy's retries end (refused)
            await first.start()
            await wait_until(lambda: sender.breakers[0].state == "closed", timeout=10)
            await sender.send_messages(ServiceBusMessage("both again"))
            assert first.stored() == 2 and second.stored() == 53
            await sender.close()
