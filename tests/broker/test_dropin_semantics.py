"""The embedded broker where Service Bus users look (issue 24, part C): what counts as a
delivery attempt, what a closed receiver leaves locked, deferred state, the DLQ's refusal.
Each test cites the documented behaviour it follows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqplink import Message
from amqplink.aio import connect
from amqplink.broker import Broker
from amqplink.codec.types import Symbol
from amqplink.servicebus.exceptions import MessageLockLostError
from amqplink.servicebus.management_node import DispositionStatus, ManagementClient
from tests.servicebus.scenario import LOCK, MAX_DELIVERY, Api, BrokerThread, load_api

CLIENTS = ["amqplink", pytest.param("azure", marks=pytest.mark.sdk)]


@pytest.fixture()
def broker() -> Iterator[BrokerThread]:
    b = BrokerThread()
    try:
        yield b
    finally:
        b.stop()


async def receive_one(receiver: Any, wait: float = 5.0) -> Any:
    (message,) = await receiver.receive_messages(max_message_count=1, max_wait_time=wait)
    return message


async def test_a_released_delivery_is_not_a_delivery_attempt(broker: BrokerThread) -> None:
    """AMQP 1.0 3.4.4, as quoted in the SDK (azure/servicebus/_pyamqp/outcomes.py): "the
    delivery-count of the header of the released Message MUST NOT be incremented"; Service Bus
    does not count a release (the SDK releases what it prefetched outside a receive call,
    _transport/_pyamqp_transport.py). Released more times than MaxDeliveryCount, the message
    stays in the queue with no attempt counted."""
    api = load_api("amqplink")
    async with (
        await connect(f"amqp://127.0.0.1:{broker.broker.port}") as conn,
        api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client,
    ):
        async with client.get_queue_sender("retries") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("released"))
        raw = await conn.create_receiver("retries", mode="peek-lock", prefetch=0)  # credit per receive
        for _ in range(MAX_DELIVERY + 2):
            (message,) = await raw.receive(1, timeout=5)
            await raw.release(message)
        await raw.close()
        async with client.get_queue_receiver("retries") as receiver:
            got = await receive_one(receiver)
            assert (str(got), got.delivery_count) == ("released", 0)
            await receiver.complete_message(got)


async def test_a_receiver_closed_unsettled_leaves_its_locks_until_they_expire(broker: BrokerThread) -> None:
    """Service Bus holds an unsettled message's lock after its receive link closes: the SDK
    releases what it buffered before closing "so they are not left locked at the broker until
    lock expiry (delaying redelivery, inflating delivery count)" (ServiceBusReceiver.
    _close_handler); the close itself counts nothing, the expired lock counts once
    (ServiceBusReceivedMessage.delivery_count: "incremented when a message lock expires")."""
    api = load_api("amqplink")
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("held"))
        async with client.get_queue_receiver("locks") as first:
            held = await receive_one(first)
            locked_until = held.locked_until_utc
        async with client.get_queue_receiver("locks") as second:
            assert await second.receive_messages(max_wait_time=1) == []  # still locked
            again = await receive_one(second, wait=LOCK * 3)
            assert dt.datetime.now(dt.UTC) >= locked_until
            assert (str(again), again.delivery_count) == ("held", 1)
            await second.complete_message(again)


@pytest.mark.parametrize("name", CLIENTS)
async def test_deliveries_carry_service_bus_delivery_annotations(broker: BrokerThread, name: str) -> None:
    """As Service Bus: a peek-lock delivery's delivery-annotations hold ``x-opt-lock-token``, the
    lock token as a uuid (the SDK's own tests compare it with ``lock_token``: test_queues.py,
    test_message.py), a receive-and-delete one's are an empty map (``== {}`` there)."""
    api: Api = load_api(name)
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages([api.sb.ServiceBusMessage("locked"), api.sb.ServiceBusMessage("deleted")])
        async with client.get_queue_receiver("other", prefetch_count=0) as receiver:
            locked = await receive_one(receiver)
            assert locked.raw_amqp_message.delivery_annotations == {b"x-opt-lock-token": locked.lock_token}
            await receiver.complete_message(locked)
        mode = api.sb.ServiceBusReceiveMode.RECEIVE_AND_DELETE
        async with client.get_queue_receiver("other", receive_mode=mode) as receiver:
            deleted = await receive_one(receiver)
            assert str(deleted) == "deleted"
            assert deleted.raw_amqp_message.delivery_annotations == {}


@pytest.mark.parametrize("name", CLIENTS)
async def test_the_senders_delivery_annotations_come_back(broker: BrokerThread, name: str) -> None:
    """Service Bus keeps a sender's delivery-annotations (the SDK's own
    ``test_message_inner_amqp_properties`` and ``test_queue_send_amqp_annotated_message`` read
    them back): a peek-lock delivery's hold them with ``x-opt-lock-token`` merged in, a
    receive-and-delete one's the sender's map alone."""
    api: Api = load_api(name)
    sent = {b"delivery_annotations": 3}
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            for body in ("locked", "deleted"):
                message = api.sb.ServiceBusMessage(body)
                message.raw_amqp_message.delivery_annotations = dict(sent)
                await sender.send_messages(message)
        async with client.get_queue_receiver("other", prefetch_count=0) as receiver:
            locked = await receive_one(receiver)
            assert str(locked) == "locked"
            assert locked.raw_amqp_message.delivery_annotations == {**sent, b"x-opt-lock-token": locked.lock_token}
            await receiver.complete_message(locked)
        mode = api.sb.ServiceBusReceiveMode.RECEIVE_AND_DELETE
        async with client.get_queue_receiver("other", receive_mode=mode) as receiver:
            deleted = await receive_one(receiver)
            assert str(deleted) == "deleted"
            assert deleted.raw_amqp_message.delivery_annotations == sent


async def test_a_durable_entity_keeps_the_senders_delivery_annotations_across_a_restart(tmp_path: Path) -> None:
    """The journal's record of a message holds its delivery-annotations (a run of messages sent
    together as well as one alone); the message read back after a restart delivers them."""
    sent = [
        Message(b"a", delivery_annotations={"x-da": "one"}),
        Message(b"b", delivery_annotations={"x-da": "two"}),
        Message(b"c", delivery_annotations={"x-da": "three"}, subject="s", priority=3),
        Message(b"plain"),
    ]
    async with Broker(servicebus=True, data_dir=tmp_path) as broker, await connect(broker.url) as conn:
        await (await conn.create_sender("q")).send_many(sent)
        await (await conn.create_sender("q")).send(Message(b"alone", delivery_annotations={"x-da": "four"}))
    async with Broker(servicebus=True, data_dir=tmp_path) as broker, await connect(broker.url) as conn:
        receiver = await conn.create_receiver("q", mode="receive-and-delete", prefetch=5)
        got = await receiver.receive(5, timeout=5)
    assert [m.body for m in got] == [b"a", b"b", b"c", b"plain", b"alone"]
    das = [{Symbol("x-da"): value} for value in ("one", "two", "three")] + [{}, {Symbol("x-da"): "four"}]
    assert [m.delivery_annotations for m in got] == das
    assert (got[2].subject, got[2].priority) == ("s", 3)


async def test_a_receive_and_delete_delivery_is_as_service_bus_sends_it(broker: BrokerThread) -> None:
    """Service Bus sends a receive-and-delete delivery with an empty delivery-tag (the SDK's
    ``test_message_backcompat_receive_and_delete_databody``: ``delivery_tag is None``, read as
    ``tag or None``) and stamps no ``x-opt-enqueue-sequence-number`` on a message sent to the
    queue it is received from (the SDK: "for messages that have been auto-forwarded"; that
    test's encoded size, taken from Service Bus, has no room for it)."""
    async with await connect(f"amqp://127.0.0.1:{broker.broker.port}") as conn:
        await (await conn.create_sender("other")).send_many([Message(b"deleted"), Message(b"locked")])
        deleted = await conn.create_receiver("other", mode="receive-and-delete", prefetch=0)
        (message,) = await deleted.receive(1, timeout=5)
        await deleted.close()
        locked = await conn.create_receiver("other", mode="peek-lock", prefetch=0)
        (held,) = await locked.receive(1, timeout=5)
        await locked.accept(held)
    assert message.body == b"deleted" and message.delivery_tag == b""
    assert len(held.delivery_tag or b"") == 16
    for got in (message, held):
        annotations = got.message_annotations or {}
        assert Symbol("x-opt-sequence-number") in annotations
        assert Symbol("x-opt-enqueue-sequence-number") not in annotations


async def test_a_lock_held_after_its_receiver_closed_settles_by_token_over_management(broker: BrokerThread) -> None:
    """Service Bus settles a message by its lock token over ``$management`` (update-disposition)
    while the lock is held, also after the receive link that took it detached (the SDK settles
    through that node when its link is broken: its own test
    ``test_queue_message_settle_through_mgmt_link_due_to_broken_receiver_link``); once the lock
    has run out the token is lost (410, message-lock-lost)."""
    api = load_api("amqplink")
    async with (
        await connect(f"amqp://127.0.0.1:{broker.broker.port}") as conn,
        api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client,
    ):
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages([api.sb.ServiceBusMessage("completed"), api.sb.ServiceBusMessage("late")])
        async with client.get_queue_receiver("locks", prefetch_count=0) as receiver:
            first = await receive_one(receiver)
            second = await receive_one(receiver)
        node = await ManagementClient.open(conn, "locks")
        try:
            await node.update_disposition(DispositionStatus.COMPLETED, [first.lock_token])
            await node.renew_lock([second.lock_token])  # held: renewable too
            with pytest.raises(MessageLockLostError):  # settled: its token is spent
                await node.update_disposition(DispositionStatus.COMPLETED, [first.lock_token])
        finally:
            await node.close()
        async with client.get_queue_receiver("locks") as receiver:
            again = await receive_one(receiver, wait=LOCK * 4)  # the renewed lock ran out: back, counted
            assert (str(again), again.delivery_count) == ("late", 1)
            await receiver.complete_message(again)
            assert await receiver.peek_messages(5) == []


@pytest.mark.sdk
def test_the_sdk_settles_through_management_when_its_link_is_broken(broker: BrokerThread) -> None:
    """The SDK's own test (test_queues.py, ``..._due_to_broken_receiver_link``): its receive link
    detached under it, ``complete_message`` goes over ``$management`` and the message is gone."""
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("locks") as sender:
            sender.send_messages(ServiceBusMessage("Test"))
        with client.get_queue_receiver("locks") as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            receiver._handler._link.detach()
            receiver.complete_message(message)
        with client.get_queue_receiver("locks") as receiver:
            assert receiver.peek_messages(5) == []


@pytest.mark.parametrize("name", CLIENTS)
async def test_a_session_id_that_is_not_a_string_is_refused(broker: BrokerThread, name: str) -> None:
    """``session_id=1`` (an int): Service Bus refuses the receiver (the SDK's test_sessions.py
    expects ``ServiceBusError``); the broker used to open a session named "1"."""
    api: Api = load_api(name)
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("short-sessions") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("in session 1", session_id="1"))
        with pytest.raises(api.exceptions.ServiceBusError) as refused:
            async with client.get_queue_receiver("short-sessions", session_id=1) as receiver:
                await receiver.receive_messages(max_wait_time=1)
        assert "session" in str(refused.value)
        async with client.get_queue_receiver("short-sessions", session_id="1") as receiver:  # the string is one
            got = await receive_one(receiver)
            assert str(got) == "in session 1"
            await receiver.complete_message(got)


@pytest.mark.parametrize("name", CLIENTS)
async def test_a_token_for_an_entity_that_does_not_exist_is_answered_404(broker: BrokerThread, name: str) -> None:
    """Service Bus answers a put-token for an entity that does not exist with 404, which the SDK
    raises as ``ServiceBusAuthenticationError`` (its test_sb_client.py ``test_sb_client_bad_entity``);
    the broker (here with its entities configured: nothing made on first use) used to accept the
    token and fail the link not-found."""
    api: Api = load_api(name)
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with pytest.raises(api.exceptions.ServiceBusAuthenticationError) as refused:
            async with client.get_queue_sender("no-such-queue") as sender:
                await sender.send_messages(api.sb.ServiceBusMessage("nowhere"))
        if name == "amqplink":  # (the SDK's message gives the condition only)
            assert "'no-such-queue' could not be found" in str(refused.value)
        with pytest.raises(api.exceptions.ServiceBusAuthenticationError):
            async with client.get_subscription_receiver("events", "no-such-subscription") as receiver:
                await receiver.receive_messages(max_wait_time=1)
        async with client.get_queue_sender("other") as sender:  # one that exists is as before
            await sender.send_messages(api.sb.ServiceBusMessage("somewhere"))


def test_an_audience_names_an_entity_or_a_queue_first_use_makes() -> None:
    """The put-token's check creates nothing: with ``auto_create`` a plain queue name counts
    (its first link makes it), a subscription of a topic that is not there does not."""
    from amqplink.broker.namespace import Namespace

    namespace = Namespace()  # no configuration: queues are made on first use
    assert namespace.auto_create
    for address in ("sb://h/", "sb://h/$cbs", "sb://h/fresh", "sb://h/fresh/$DeadLetterQueue"):
        assert namespace.names_entity(address), address
    assert not namespace.names_entity("sb://h/topic/Subscriptions/sub")
    assert namespace.queues == {}  # nothing made
    namespace.auto_create = False
    assert not namespace.names_entity("sb://h/fresh")


async def test_a_session_receiver_closed_unsettled_counts_no_attempt(broker: BrokerThread) -> None:
    """A session receiver's close frees its session and brings the session's messages back
    (the next receiver of the session gets them at once), without counting an attempt: the
    delivery count grows on an expired lock or an abandon (ServiceBusReceivedMessage.
    delivery_count), and a close is neither."""
    api = load_api("amqplink")
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("short-sessions") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("in session", session_id="s"))
        async with client.get_queue_receiver("short-sessions", session_id="s") as first:
            assert (await receive_one(first)).delivery_count == 0
        async with client.get_queue_receiver("short-sessions", session_id="s", max_wait_time=5) as second:
            got = await receive_one(second, wait=1)
            assert (str(got), got.delivery_count) == ("in session", 0)
            await second.complete_message(got)


@pytest.mark.parametrize("name", CLIENTS)
async def test_a_deferred_message_received_by_sequence_number_is_deferred(broker: BrokerThread, name: str) -> None:
    """Service Bus reports a deferred message's state as Deferred when it is received with
    receive_deferred_messages (ServiceBusMessageState.DEFERRED; the SDK reads
    ``x-opt-message-state``)."""
    api: Api = load_api(name)
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("later"))
        async with client.get_queue_receiver("other") as receiver:
            message = await receive_one(receiver)
            assert message.state == api.sb.ServiceBusMessageState.ACTIVE
            await receiver.defer_message(message)
            (deferred,) = await receiver.receive_deferred_messages([message.sequence_number])
            assert deferred.state == api.sb.ServiceBusMessageState.DEFERRED
            await receiver.complete_message(deferred)


@pytest.mark.parametrize("name", CLIENTS)
async def test_dead_lettering_a_dead_letter_queue_message_is_refused(broker: BrokerThread, name: str) -> None:
    """Service Bus: "you can't dead-letter a message from a DLQ" (learn.microsoft.com,
    service-bus-messaging/service-bus-dead-letter-queues). The refusal leaves the lock: the
    message stays in the dead-letter queue."""
    api: Api = load_api(name)
    async with api.aio.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        async with client.get_queue_sender("other") as sender:
            await sender.send_messages(api.sb.ServiceBusMessage("dead"))
        async with client.get_queue_receiver("other") as receiver:
            await receiver.dead_letter_message(await receive_one(receiver), reason="test")
        dead_letter_queue = api.sb.ServiceBusSubQueue.DEAD_LETTER
        async with client.get_queue_receiver("other", sub_queue=dead_letter_queue) as dead_letters:
            dead = await receive_one(dead_letters)
            with pytest.raises(api.exceptions.ServiceBusError):
                await dead_letters.dead_letter_message(dead, reason="again")
        async with client.get_queue_receiver("other", sub_queue=dead_letter_queue) as browser:
            (still,) = await browser.peek_messages(max_message_count=5)
            assert (str(still), still.sequence_number) == ("dead", dead.sequence_number)


@pytest.mark.sdk
def test_the_sdks_prefetch_releases_count_no_attempt(broker: BrokerThread) -> None:
    """The issue's probe with the official SDK: a prefetching receiver takes one message of
    five and abandons it; the SDK releases the rest (outside a receive call and on close).
    Only the abandon counts: nothing reaches the DLQ early."""
    from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("retries") as sender:
            sender.send_messages([ServiceBusMessage(f"r{i}") for i in range(5)])
        with client.get_queue_receiver("retries", prefetch_count=10) as receiver:
            (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.abandon_message(first)
        with client.get_queue_receiver("retries", max_wait_time=2) as receiver:
            got = []
            while len(got) < 5 and (batch := receiver.receive_messages(max_message_count=5, max_wait_time=2)):
                got += batch
            counts = {str(m): m.delivery_count for m in got}
            for m in got:
                receiver.complete_message(m)
        assert counts == {f"r{i}": (1 if f"r{i}" == str(first) else 0) for i in range(5)}
        with client.get_queue_receiver("retries", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
            assert dead.peek_messages(max_message_count=5) == []
