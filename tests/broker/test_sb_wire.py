"""Wire details of the Service Bus namespace seen by amqplink's own asyncio client:
lock-token delivery tags, settlement answers (lock lost, dead-letter echo), request
backlog bounds."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from amqplink.aio import connect
from amqplink.aio.errors import AMQPError, LinkDetachedError
from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, EntityProperties, NamespaceConfig, QueueConfig
from amqplink.codec.types import Symbol
from amqplink.message import Message
from amqplink.protocol.definitions import Accepted, Rejected


def config() -> BrokerConfig:
    return BrokerConfig((NamespaceConfig(queues=(QueueConfig("short", EntityProperties(lock_duration=0.5)),)),))


async def test_lock_token_is_the_delivery_tag_and_late_settlement_is_lock_lost() -> None:
    async with Broker(config()) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("short")
            await sender.send(Message(b"one"))
            await sender.send(Message(b"two"))
            receiver = await conn.create_receiver("short", prefetch=2)
            first, second = await receiver.receive(2, timeout=10)
            token = uuid.UUID(bytes_le=first.delivery_tag)
            entity = broker.namespace.receiver_source("short")
            assert entity.locked(token, broker.servicebus.clock()).sequence_number == 1  # type: ignore[union-attr]
            await receiver.accept(first)
            assert isinstance(first._delivery.remote_state, Accepted)  # type: ignore[union-attr]
            await asyncio.sleep(0.7)  # past the 0.5 s lock of the second message
            await receiver.accept(second)
            state = second._delivery.remote_state  # type: ignore[union-attr]
            assert isinstance(state, Rejected) and state.error is not None
            assert state.error.condition == Symbol("com.microsoft:message-lock-lost")
        finally:
            await conn.close()


async def test_requests_whose_replies_are_not_read_are_bounded() -> None:
    async with Broker(config()) as broker:
        assert broker.servicebus is not None
        broker.servicebus.max_pending_replies = 3
        conn = await connect(broker.url)
        try:
            requests = await conn.create_sender("short/$management")
            await conn.create_receiver("short/$management", prefetch=0)  # grants no credit: replies pile up
            body = {"from-sequence-number": 1, "message-count": 1}
            app = {"operation": "com.microsoft:peek-message"}
            for _ in range(3):
                await requests.send(
                    Message(body, application_properties=app, message_id="x", reply_to="short/$management")
                )
            failure = None
            try:
                await requests.send(
                    Message(body, application_properties=app, message_id="y", reply_to="short/$management")
                )
                await requests.send(Message(body, application_properties=app, message_id="z"))
            except LinkDetachedError as exc:
                failure = exc
            assert isinstance(failure, LinkDetachedError)
            assert failure.condition == "amqp:resource-limit-exceeded"
        finally:
            await conn.close()


async def test_undecodable_message_is_rejected_and_the_link_goes_on() -> None:
    async with Broker(config()) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("short")
            raw = sender.link  # the engine link: send bytes that are no AMQP message
            delivery = raw.send(b"\x00\x53\x70\xc0\xff\xff")
            conn.protocol.schedule_flush()
            for _ in range(100):
                if delivery.remote_state is not None:
                    break
                await asyncio.sleep(0.01)
            state = delivery.remote_state
            assert isinstance(state, Rejected) and state.error is not None
            assert state.error.condition == Symbol("amqp:decode-error")
            await sender.send(Message(b"fine"))  # the link still works
            assert len(broker.namespace.receiver_source("short").store) == 1
        finally:
            await conn.close()


async def test_an_internal_error_closes_only_that_connection(monkeypatch: Any) -> None:
    async with Broker(config()) as broker:
        victim, bystander = await connect(broker.url), await connect(broker.url)
        try:
            keep = await bystander.create_sender("short")
            from amqplink.broker.connection.ingest import Ingest

            def boom(*args: Any, **kwargs: Any) -> None:
                raise RuntimeError("planted defect")

            monkeypatch.setattr(Ingest, "on_sent", boom)
            doomed = await victim.create_sender("short")
            with pytest.raises(AMQPError) as info:  # the connection is closed under the sender
                await doomed.send(Message(b"x"), timeout=5)
            assert info.value.condition == "amqp:internal-error"
            monkeypatch.undo()
            await keep.send(Message(b"still here"))
            assert len(broker.namespace.receiver_source("short").store) == 1
        finally:
            await victim.close()
            await bystander.close()


async def test_session_filter_on_a_queue_without_sessions_is_refused() -> None:
    async with Broker(config()) as broker:
        conn = await connect(broker.url)
        try:
            with pytest.raises(LinkDetachedError) as info:
                await conn.create_receiver("short", filters={Symbol("com.microsoft:session-filter"): "A"})
            assert info.value.condition == "amqp:not-allowed"
        finally:
            await conn.close()


async def test_session_receiver_attach_carries_session_and_locked_until() -> None:
    cfg = BrokerConfig((NamespaceConfig(queues=(QueueConfig("s", EntityProperties(requires_session=True)),)),))
    async with Broker(cfg) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("s")
            await sender.send(Message(b"x", session_id="A"))
            before = time.time()
            receiver = await conn.create_receiver("s", filters={Symbol("com.microsoft:session-filter"): None})
            remote = receiver.link.remote_attach
            assert remote is not None and remote.source is not None
            assert remote.source.filter[Symbol("com.microsoft:session-filter")] == "A"
            ticks = remote.properties[Symbol("com.microsoft:locked-until-utc")]
            seconds = (ticks - 621355968000000000) / 10_000_000
            assert before + 59 < seconds < time.time() + 61
            (msg,) = await receiver.receive(1, timeout=10)
            assert msg.session_id == "A"
            with pytest.raises(LinkDetachedError) as info:  # the session is taken
                await conn.create_receiver("s", filters={Symbol("com.microsoft:session-filter"): "A"})
            assert info.value.condition == "com.microsoft:session-cannot-be-locked"
        finally:
            await conn.close()


def test_beyond_loopback_the_namespace_is_strict_with_a_random_key() -> None:
    from amqplink.broker.namespace import Namespace
    from amqplink.broker.sbserver import EMULATOR_KEY, ServiceBusHost

    host = ServiceBusHost(Namespace(), require_auth=None)
    host.secure_for(loopback=True)
    assert host.require_auth is False and host.keys == {"RootManageSharedAccessKey": EMULATOR_KEY}
    host = ServiceBusHost(Namespace(), require_auth=None)
    host.secure_for(loopback=False)
    (key,) = host.keys.values()
    assert host.require_auth is True and key != EMULATOR_KEY and len(key) >= 32
    given = ServiceBusHost(Namespace(), keys={"me": "mine"}, require_auth=None)
    given.secure_for(loopback=False)
    assert given.keys == {"me": "mine"} and given.require_auth is True


async def test_broker_takes_a_config_path(tmp_path: Any) -> None:
    path = tmp_path / "Config.json"
    path.write_text('{"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "only"}]}]}}')
    async with Broker(str(path)) as broker:
        assert broker.namespace.name == "ns" and list(broker.namespace.queues) == ["only"]
        conn = await connect(broker.url)
        try:
            with pytest.raises(LinkDetachedError) as info:  # configured: no queue made on first use
                await conn.create_sender("other")
            assert info.value.condition == "amqp:not-found"
        finally:
            await conn.close()


async def test_next_session_wait_ends_with_com_microsoft_timeout_after_the_asked_or_default_wait() -> None:
    from amqplink.codec.types import UInt

    cfg = BrokerConfig((NamespaceConfig(queues=(QueueConfig("s", EntityProperties(requires_session=True)),)),))
    async with Broker(cfg) as broker:
        assert broker.servicebus is not None
        broker.servicebus.session_wait = 0.3  # the default, for a receiver that asks none
        conn = await connect(broker.url)
        try:
            next_session = {Symbol("com.microsoft:session-filter"): None}
            for properties, wait in (({Symbol("com.microsoft:timeout"): UInt(600)}, 0.6), (None, 0.3)):
                started = time.monotonic()
                with pytest.raises(LinkDetachedError) as info:
                    await conn.create_receiver("s", filters=next_session, properties=properties)
                assert info.value.condition == "com.microsoft:timeout"
                assert wait - 0.05 <= time.monotonic() - started < wait + 5
        finally:
            await conn.close()


def test_the_wait_a_receiver_asks_is_bounded() -> None:
    from amqplink.broker.session_wait import MAX_SESSION_WAIT, OPERATION_TIMEOUT, requested_wait
    from amqplink.codec.types import UInt

    assert requested_wait({OPERATION_TIMEOUT: UInt(1500)}, 60.0) == 1.5
    assert requested_wait({OPERATION_TIMEOUT: UInt(2**32 - 1)}, 60.0) == MAX_SESSION_WAIT
    assert requested_wait({OPERATION_TIMEOUT: "soon"}, 60.0) == 60.0
    assert requested_wait(None, 7.0) == 7.0


async def test_a_session_ending_under_a_receiver_leaves_its_locks_to_expire() -> None:
    """As Service Bus: the lock outlives the link (no one can settle it any more) and the
    message comes back when the lock expires, that expiry counted."""
    cfg = BrokerConfig((NamespaceConfig(queues=(QueueConfig("long", EntityProperties(lock_duration=1)),)),))
    async with Broker(cfg) as broker:
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("long")
            await sender.send(Message(b"held"))
            receiver = await conn.create_receiver("long", prefetch=1)
            assert len(await receiver.receive(1, timeout=10)) == 1
            entity = broker.namespace.receiver_source("long")
            assert [m.state.value for m in entity.store] == ["locked"]
            receiver.link.session.end()  # the session only: the connection stays
            conn.protocol.schedule_flush()
            deadline = time.monotonic() + 5
            while entity._locks:  # the token no longer settles anything once its link is gone
                assert time.monotonic() < deadline, "the link's end was not noticed"
                await asyncio.sleep(0.01)
            again = await conn.create_receiver("long", prefetch=1, name="again")
            (back,) = await again.receive(1, timeout=10)  # at the lock's expiry
            assert back.body == b"held" and back.delivery_count == 1
        finally:
            await conn.close()
