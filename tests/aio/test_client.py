"""The asyncio client against the embedded broker and scripted servers (loopback TCP)."""

from __future__ import annotations

import asyncio

import pytest

from amqplink import Message
from amqplink.aio import (
    AttachTimeout,
    ConnectionClosedError,
    LinkDetachedError,
    MessageRejected,
    SettlementError,
    connect,
)
from amqplink.broker import Broker
from amqplink.protocol.definitions import Accepted, Error, Modified, Rejected, Released
from tests.receiving import receive_exactly

from .helpers import HoldingServer, eventually


async def test_send_and_receive_round_trip_with_properties() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        outcome = await sender.send(
            Message(b"hello", message_id="m-1", subject="greeting", application_properties={"n": 7})
        )
        assert isinstance(outcome, Accepted)
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=10)
        [got] = await receiver.receive(1, timeout=5)
        assert got.body == b"hello"
        assert got.message_id == "m-1"
        assert got.subject == "greeting"
        assert got.application_properties == {"n": 7}
        await receiver.accept(got)
        assert got.settled
        assert len(broker.queue("q")) == 0


async def test_send_many_pipelines_and_returns_outcomes_in_order() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q", max_in_flight=50)
        outcomes = await sender.send_many(Message(i.to_bytes(4, "big")) for i in range(2000))
        assert len(outcomes) == 2000 and all(isinstance(o, Accepted) for o in outcomes)
        receiver = await conn.create_receiver("q", mode="receive-and-delete", prefetch=300)
        bodies = [m.body for m in await receive_exactly(receiver, 2000, accept=False, batch=500, timeout=5)]
        assert [int.from_bytes(b, "big") for b in bodies] == list(range(2000))


async def test_send_nowait_never_exceeds_max_in_flight_and_waits_for_room() -> None:
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q", max_in_flight=5)
        futures = [await sender.send_nowait(Message(b"x")) for _ in range(5)]
        assert sender.in_flight == 5
        sixth = asyncio.ensure_future(sender.send_nowait(Message(b"y")))
        await eventually(lambda: len(server.held) == 5)
        assert not sixth.done()  # waits: nothing dropped, nothing extra sent
        server.settle(1, Accepted())
        sixth_future = await asyncio.wait_for(sixth, 5)
        assert isinstance(await futures[0], Accepted)
        assert sender.in_flight == 5
        await eventually(lambda: len(server.held) == 5)
        server.settle(5, Released())
        assert isinstance(await sixth_future, Released)
        assert all([isinstance(await f, Released) for f in futures[1:]])
        assert sender.in_flight == 0


async def test_rejection_raises_with_the_condition_and_send_many_returns_it() -> None:
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q")
        sending = asyncio.ensure_future(sender.send(Message(b"bad")))
        await eventually(lambda: len(server.held) == 1)
        server.settle(1, Rejected(error=Error(condition="amqp:precondition-failed", description="nope")))
        with pytest.raises(MessageRejected) as info:
            await sending
        assert info.value.condition == "amqp:precondition-failed"
        assert "nope" in str(info.value) and "'q'" in str(info.value)
        many = asyncio.ensure_future(sender.send_many([b"a", b"b"]))
        await eventually(lambda: len(server.held) == 2)
        server.settle(1, Rejected())
        server.settle(1, Accepted())
        outcomes = await many
        assert [type(o) for o in outcomes] == [Rejected, Accepted]


async def test_presettled_send_needs_no_outcomes_and_loses_nothing() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q", settle_mode="settled", max_in_flight=100)
        for i in range(3000):
            assert await (await sender.send_nowait(Message(i.to_bytes(4, "big")))) is None
        await sender.wait_settled()
        await eventually(lambda: len(broker.queue("q")) == 3000)
        got = [int.from_bytes(m, "big") for m in _bodies(broker, "q")]
        assert got == list(range(3000))


def _bodies(broker: Broker, name: str) -> list[bytes]:
    return [Message.decode(p).body for p in broker.queue(name).messages]


async def test_peek_lock_release_modify_reject_accept() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send_many([b"1", b"2", b"3", b"4"])
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=1)
        assert receiver.confirm  # the embedded broker honours rcv-settle-mode second
        [m1] = await receiver.receive(1, timeout=5)
        assert m1.body == b"1"
        await receiver.release(m1)  # back to the head of the queue, behind the prefetched "2"
        [m2] = await receiver.receive(1, timeout=5)
        assert m2.body == b"2"
        await receiver.modify(m2, undeliverable_here=True)
        [again] = await receiver.receive(1, timeout=5)
        assert again.body == b"1"  # the released message came back
        await receiver.reject(again, condition="app:bad", description="cannot parse")
        [m3] = await receiver.receive(1, timeout=5)
        await receiver.accept(m3)
        queue = broker.queue("q")
        assert [Message.decode(p).body for p, _ in queue.dead_letters] == [b"2", b"1"]
        assert isinstance(queue.dead_letters[1][1], Rejected)
        assert str(queue.dead_letters[1][1].error.condition) == "app:bad"
        with pytest.raises(SettlementError, match="already settled"):
            await receiver.accept(m3)
        [m4] = await receiver.receive(1, timeout=5)
        assert m4.body == b"4"
        await receiver.close()
        with pytest.raises(SettlementError, match="redeliver"):
            await receiver.accept(m4)
        await eventually(lambda: len(queue) == 1)  # the unsettled message went back


async def test_credit_is_replenished_as_the_application_consumes() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send_many([bytes([i]) for i in range(100)])
        receiver = await conn.create_receiver("q", mode="receive-and-delete", prefetch=10)
        await eventually(lambda: receiver.buffered == 10)
        await asyncio.sleep(0.05)  # give a wrong implementation the chance to over-fetch
        assert receiver.buffered == 10 and len(broker.queue("q")) == 90
        taken = await receiver.receive(5)
        assert [m.body for m in taken] == [bytes([i]) for i in range(5)]
        await eventually(lambda: len(broker.queue("q")) == 85)
        assert receiver.buffered + 5 + len(broker.queue("q")) == 100
        rest = [m async for m in _take(receiver, 95)]
        assert [m.body for m in rest] == [bytes([i]) for i in range(5, 100)]


async def _take(receiver, n):  # type: ignore[no-untyped-def]
    async for message in receiver:
        yield message
        n -= 1
        if n == 0:
            return


async def test_multi_frame_one_mebibyte_message() -> None:
    body = bytes(range(256)) * 4096
    async with Broker() as broker, await connect(broker.url, max_frame_size=4096) as conn:
        sender = await conn.create_sender("big")
        assert isinstance(await sender.send(Message(body)), Accepted)
        receiver = await conn.create_receiver("big", mode="peek-lock")
        [got] = await receiver.receive(1, timeout=10)
        assert got.body == body
        await receiver.accept(got)


async def test_attach_timeout_detaches_cleanly() -> None:
    async with HoldingServer(ignore_attach=True) as server, await connect(server.url) as conn:
        with pytest.raises(AttachTimeout, match="did not answer attach"):
            await conn.create_receiver(None, dynamic=True, timeout=0.3)
        assert not conn.closed


async def test_rcv_second_probe_and_its_retry_share_one_timeout() -> None:
    # The peer refuses rcv-settle-mode second late (0.6 s) and then never answers the
    # retry with first: the caller's 0.8 s bound holds for both, not 0.6 + 0.8 s.
    async with (
        HoldingServer(ignore_attach=True, refuse_rcv_second_after=0.6) as server,
        await connect(server.url) as conn,
    ):
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(AttachTimeout, match=r"within 0\.8 s"):
            await conn.create_receiver("q", mode="peek-lock", timeout=0.8)
        elapsed = loop.time() - started
        assert conn.rcv_second_supported is False
        assert 0.75 < elapsed < 1.3, elapsed  # asyncio may wake a timer a tick early
        assert not conn.closed


async def test_refused_attach_raises_with_condition() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        with pytest.raises(LinkDetachedError) as info:
            await conn.create_sender(None)
        assert info.value.condition == "amqp:not-found"
        sender = await conn.create_sender("still-fine")  # the connection is unharmed
        assert isinstance(await sender.send(b"x"), Accepted)


async def test_dynamic_receiver_gets_the_peer_chosen_address() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        receiver = await conn.create_receiver(None, dynamic=True)
        assert receiver.address and receiver.address.startswith("dynamic-")
        sender = await conn.create_sender(receiver.address)
        await sender.send(b"to-dynamic")
        [got] = await receiver.receive(1, timeout=5)
        assert got.body == b"to-dynamic"


async def test_connection_refused_names_the_url() -> None:
    broker = await Broker().start()
    url = broker.url
    await broker.stop()
    with pytest.raises(ConnectionClosedError, match=r"cannot connect to amqp://127\.0\.0\.1"):
        await connect(url, timeout=2)


async def test_broker_loss_fails_pending_sends_and_receives_without_hanging() -> None:
    async with HoldingServer() as server:
        conn = await connect(server.url)
        sender = await conn.create_sender("q", max_in_flight=3)
        futures = [await sender.send_nowait(b"x") for _ in range(3)]
        blocked = asyncio.ensure_future(sender.send_nowait(b"y"))
        await eventually(lambda: len(server.held) == 3)
        for protocol in server.protocols:
            protocol.abort()
        for future in futures:
            with pytest.raises(ConnectionClosedError, match="connection:forced"):
                await future
        with pytest.raises(ConnectionClosedError):
            await blocked
        with pytest.raises(ConnectionClosedError):
            await sender.send(b"z")
        assert conn.closed
        await conn.close()  # closing a dead connection is harmless


async def test_sasl_plain_credentials_reach_the_server_and_password_is_not_in_repr() -> None:
    async with Broker() as broker:
        url = broker.url.replace("amqp://", "amqp://alice:s3cr%40t@")
        async with await connect(url) as conn:
            assert conn.engine.sasl is not None and conn.engine.sasl.chosen == "PLAIN"
            assert "s3cr" not in repr(conn) and "s3cr" not in repr(conn.endpoint)
            assert conn.endpoint.password == "s3cr@t"


async def test_idle_timeout_heartbeats_keep_a_quiet_connection_open() -> None:
    async with Broker() as broker, await connect(broker.url, idle_timeout=0.2) as conn:
        sender = await conn.create_sender("q")
        await asyncio.sleep(0.7)  # the subject under test: more than three idle periods of silence
        assert not conn.closed
        assert isinstance(await sender.send(b"after-idle"), Accepted)


def test_bad_urls_are_rejected_clearly() -> None:
    from amqplink.aio.url import parse_url

    with pytest.raises(ValueError, match="scheme"):
        parse_url("http://host")
    with pytest.raises(ValueError, match="no host"):
        parse_url("amqp://")
    with pytest.raises(ValueError, match="create_sender"):
        parse_url("amqp://host/queue")
    assert parse_url("amqps://h").port == 5671 and parse_url("amqps://h").tls
    assert "pw" not in repr(parse_url("amqp://u:pw@h:1"))


async def test_modified_annotations_reach_the_peer() -> None:
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q")
        sending = asyncio.ensure_future(sender.send(b"m"))
        await eventually(lambda: len(server.held) == 1)
        server.settle(1, Modified(delivery_failed=True, message_annotations={"x-reason": "busy"}))
        outcome = await sending
        assert isinstance(outcome, Modified) and outcome.delivery_failed


async def test_an_undecodable_message_is_rejected_with_decode_error_and_the_next_arrives() -> None:
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        # A data section announcing 200 bytes but holding 2: no message, whatever the reader.
        await (await sender.send_payload_nowait(b"\x00\x53\x75\xa0\xc8ab"))
        await sender.send(Message(b"good"))
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=10)
        [got] = await receiver.receive(1, timeout=5)
        assert got.body == b"good"  # the malformed one never reached the application
        await receiver.accept(got)
        queue = broker.queue("q")
        await eventually(lambda: len(queue.dead_letters) == 1)
        payload, state = queue.dead_letters[0]
        assert payload == b"\x00\x53\x75\xa0\xc8ab"
        assert isinstance(state, Rejected) and str(state.error.condition) == "amqp:decode-error"
