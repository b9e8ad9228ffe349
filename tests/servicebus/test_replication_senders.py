"""Which errors swap a passive sender's roles, and the senders' rules, with fake senders
(no broker): every rule exact and observable."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from amqplink.aio.errors import AMQPError, ConnectionClosedError
from amqplink.message import Message
from amqplink.servicebus import ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus.aio import ActiveReplicationSender, PassiveReplicationSender, ReplicationError
from amqplink.servicebus.errors import ERROR_TABLE, from_management_status
from amqplink.servicebus.exceptions import ServiceBusError
from amqplink.servicebus.replication import suggests_outage
from amqplink.servicebus.sender import ServiceBusSender


def _error(condition: str) -> ServiceBusError:
    kind = ERROR_TABLE[condition]
    return kind.cls(condition=condition, retryable=kind.retryable, entity="orders")


@pytest.mark.parametrize(
    ("condition", "outage"),
    [
        ("com.microsoft:server-busy", False),
        ("amqp:unauthorized-access", False),
        ("com.microsoft:auth-failed", False),
        ("amqp:link:message-size-exceeded", False),
        ("amqp:resource-limit-exceeded", False),
        ("amqp:not-found", False),
        ("com.microsoft:argument-error", False),
        ("amqp:internal-error", True),
        ("com.microsoft:timeout", True),
        ("amqp:connection:forced", True),
        ("amqp:link:detach-forced", True),
        ("com.microsoft:container-close", True),
        ("com.microsoft:entity-disabled", True),
        (503, False),  # server busy by status code
        (500, True),
    ],
)
def test_suggests_outage_follows_the_error_table(condition: str | int, outage: bool) -> None:
    if isinstance(condition, int):
        assert suggests_outage(from_management_status(condition)) is outage
        return
    assert suggests_outage(_error(condition)) is outage
    assert suggests_outage(AMQPError("refused", condition=condition)) is outage  # converted by the table


def test_suggests_outage_for_raw_transport_errors() -> None:
    assert suggests_outage(ConnectionRefusedError(111, "refused"))
    assert suggests_outage(TimeoutError())
    assert suggests_outage(ConnectionClosedError("gone"))
    assert not suggests_outage(AMQPError("busy", condition="com.microsoft:server-busy"))


class FakeSender:
    """Answers each send with the next outcome of its script (None: accepted); records what it got."""

    def __init__(self, name: str, *outcomes: BaseException | None) -> None:
        self.entity_name, self.fully_qualified_namespace = "orders", name
        self.outcomes = list(outcomes)
        self.got: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.script_done = asyncio.Event()
        self.closed = False

    async def send_messages(self, message: Any, *, timeout: float | None = None) -> None:
        messages = message if isinstance(message, list) else [message]
        if self.gate is not None:
            await self.gate.wait()
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if not self.outcomes:
            self.script_done.set()
        if outcome is not None:
            raise outcome
        self.got.append([m.message_id for m in messages])

    async def close(self) -> None:
        self.closed = True


def _s(fake: FakeSender) -> ServiceBusSender:
    return cast(ServiceBusSender, fake)


async def test_active_assigns_one_id_to_both_copies_and_keeps_given_ones() -> None:
    a, b = FakeSender("a"), FakeSender("b")
    sender = ActiveReplicationSender(_s(a), _s(b))
    unset = ServiceBusMessage("x")
    unset.message_id = None
    await sender.send_messages([unset, ServiceBusMessage("y", message_id="given"), Message(b"plain")])
    assert a.got == b.got and a.got[0][1] == "given"
    assert all(a.got[0]) and len(set(a.got[0])) == 3  # both copies carry the same assigned ids
    assert sender.counters.sends == 1 and sender.counters.sent_to_one == 0


async def test_active_succeeds_with_one_namespace_and_raises_with_none() -> None:
    down = _error("amqp:connection:forced")
    a, b = FakeSender("a", down, down), FakeSender("b", None, _error("com.microsoft:server-busy"))
    sender = ActiveReplicationSender(_s(a), _s(b), break_for=0)  # (no breaker: each send tries both)
    await sender.send_messages(ServiceBusMessage("one copy", message_id="m1"))
    assert b.got == [["m1"]] and sender.degraded == (0,) and sender.counters.sent_to_one == 1
    with pytest.raises(ReplicationError) as raised:
        await sender.send_messages(ServiceBusMessage("no copy", message_id="m2"))
    assert raised.value.errors == (down, b_error := raised.value.errors[1])
    assert b_error.condition == "com.microsoft:server-busy"
    assert "orders" in str(raised.value) and sender.counters.failed == 1 and sender.degraded == (0, 1)
    await sender.send_messages(ServiceBusMessage("both again", message_id="m3"))
    assert sender.degraded == () and a.got == [["m3"]]


async def test_active_raises_bad_input_as_it_is() -> None:
    a, b = FakeSender("a", ValueError("bad key")), FakeSender("b")
    with pytest.raises(ValueError, match="bad key"):
        await ActiveReplicationSender(_s(a), _s(b)).send_messages(ServiceBusMessage("x"))
    with pytest.raises(TypeError, match="ServiceBusMessageBatch"):
        await ActiveReplicationSender(_s(a), _s(b)).send_messages(ServiceBusMessageBatch())
    with pytest.raises(ValueError, match="two different senders"):
        ActiveReplicationSender(_s(a), _s(a))


@pytest.mark.parametrize(
    ("condition", "swaps"),
    [("com.microsoft:server-busy", False), ("amqp:unauthorized-access", False), ("amqp:internal-error", True)],
)
async def test_passive_swaps_only_on_an_outage(condition: str, swaps: bool) -> None:
    error = _error(condition)
    a, b = FakeSender("a", error), FakeSender("b")
    sender = PassiveReplicationSender(_s(a), _s(b))
    if swaps:
        await sender.send_messages(ServiceBusMessage("m", message_id="m"))
        assert b.got == [["m"]] and sender.active is _s(b) and sender.backup is _s(a)
    else:
        with pytest.raises(type(error)) as raised:
            await sender.send_messages(ServiceBusMessage("m", message_id="m"))
        assert raised.value is error and b.got == [] and sender.active is _s(a)
    assert sender.counters.swaps == int(swaps)


async def test_passive_both_failing_keeps_the_roles_and_raises() -> None:
    a_error, b_error = _error("amqp:connection:forced"), _error("amqp:internal-error")
    a, b = FakeSender("a", a_error), FakeSender("b", b_error)
    sender = PassiveReplicationSender(_s(a), _s(b))
    with pytest.raises(ReplicationError, match="roles unchanged") as raised:
        await sender.send_messages(ServiceBusMessage("m"))
    assert raised.value.errors == (a_error, b_error)
    assert sender.active is _s(a) and sender.counters.swaps == 0 and sender.counters.failed == 1
    await sender.send_messages(ServiceBusMessage("next"))
    assert len(a.got) == 1 and b.got == []


async def test_passive_concurrent_failovers_swap_once() -> None:
    down = _error("amqp:connection:forced")
    a, b = FakeSender("a", down, down, down), FakeSender("b")
    b.gate = asyncio.Event()
    sender = PassiveReplicationSender(_s(a), _s(b))
    sends = [asyncio.ensure_future(sender.send_messages(ServiceBusMessage(str(i)))) for i in range(3)]
    await a.script_done.wait()  # every send has failed on the active namespace
    b.gate.set()
    await asyncio.gather(*sends)
    assert sender.counters.swaps == 1 and sender.active is _s(b) and len(b.got) == 3


async def test_close_closes_both() -> None:
    a, b = FakeSender("a"), FakeSender("b")
    async with PassiveReplicationSender(_s(a), _s(b)):
        pass
    assert a.closed and b.closed
