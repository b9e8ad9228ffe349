"""amqplink's Service Bus client beyond the SDK's surface: pipelining, recovery, lock loss."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from typing import Any

import pytest

from amqplink.message import Message
from amqplink.servicebus import AzureNamedKeyCredential, ServiceBusMessage, ServiceBusReceivedMessage
from amqplink.servicebus.aio import AutoLockRenewer, ServiceBusClient
from amqplink.servicebus.exceptions import (
    AutoLockRenewFailed,
    MessageLockLostError,
    MessageSizeExceededError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusError,
    SessionLockLostError,
)
from amqplink.servicebus.message import BATCH_MESSAGE_FORMAT
from tests.servicebus.scenario import LOCK, BrokerThread, broker

__all__ = ["broker"]


def client_for(broker: BrokerThread, **options: Any) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(broker.connection_string, **options)


def drop_connection(client: ServiceBusClient) -> None:
    """The socket breaks (no close frame): what a network failure looks like to the client."""
    conn = client._holder._connection
    assert conn is not None
    conn.protocol.abort()


async def receive_all(receiver: Any, wait: float = 1.0) -> list[Any]:
    got: list[Any] = []
    while batch := await receiver.receive_messages(max_message_count=500, max_wait_time=wait):
        got += batch
    return got


async def test_send_nowait_pipelines_under_max_in_flight(broker: BrokerThread) -> None:
    async with client_for(broker) as client:
        async with client.get_queue_sender("plain", max_in_flight=8) as sender:
            futures = [await sender.send_nowait(ServiceBusMessage(f"n{i}")) for i in range(200)]
            assert sender._link is not None and sender._link.in_flight <= 8
            assert await asyncio.gather(*futures) == [None] * 200
        async with client.get_queue_receiver("plain", prefetch_count=100, receive_mode="receiveanddelete") as r:
            assert [str(m) for m in await receive_all(r)] == [f"n{i}" for i in range(200)]


async def test_a_large_iterable_is_split_into_batches_by_the_max_message_size(broker: BrokerThread) -> None:
    sent: list[tuple[int, int]] = []
    async with client_for(broker) as client:
        async with client.get_queue_sender("plain") as sender:
            await sender.create_message_batch()  # attach: the broker's max-message-size is known
            link = sender._link
            assert link is not None and sender.max_message_size == 256 * 1024
            original = link.send_payload_nowait

            async def spy(payload: bytes, *, message_format: int = 0) -> Any:
                sent.append((len(payload), message_format))
                return await original(payload, message_format=message_format)

            link.send_payload_nowait = spy  # type: ignore[method-assign]
            await sender.send_messages(ServiceBusMessage(b"%05d" % i + b"x" * 1000) for i in range(1000))
        assert len(sent) >= 4 and all(fmt == BATCH_MESSAGE_FORMAT for _, fmt in sent)
        assert all(size <= 256 * 1024 for size, _ in sent)
        async with client.get_queue_receiver("plain", prefetch_count=500, receive_mode="receiveanddelete") as r:
            got = await receive_all(r)
        assert [b"".join(m.body)[:5] for m in got] == [b"%05d" % i for i in range(1000)]


async def test_a_partition_key_other_than_the_session_id_is_refused_before_sending(broker: BrokerThread) -> None:
    async with client_for(broker) as client:
        async with client.get_queue_sender("plain") as sender:
            bad = ServiceBusMessage("x", partition_key="p")
            bad.session_id = "s"
            with pytest.raises(ValueError, match="partition_key"):
                await sender.send_messages(bad)
            with pytest.raises(ValueError):
                await sender.send_messages([ServiceBusMessage("ok"), bad])
        async with client.get_queue_receiver("plain") as receiver:
            assert await receiver.receive_messages(max_wait_time=0.3) == []


async def test_a_message_over_the_max_size_is_refused_before_sending(broker: BrokerThread) -> None:
    """amqplink checks the entity's max-message-size (from the attach) before sending; the SDK
    sends and the broker rejects (the scenario suite checks both raise the same error)."""
    async with client_for(broker) as client, client.get_queue_sender("plain") as sender:
        with pytest.raises(MessageSizeExceededError):
            await sender.send_messages(ServiceBusMessage(b"x" * (300 * 1024)))
        await sender.send_messages(ServiceBusMessage("the link is still usable"))


async def test_a_message_over_the_max_size_gets_the_same_error_from_every_route(broker: BrokerThread) -> None:
    """One check refuses a message larger than the entity takes (the link's, against its
    max-message-size): a single send, a gathered one, a list, an async iterable, ``send_nowait``
    and a send in a transaction all raise the same error, naming the same sizes."""
    big = b"x" * (300 * 1024)

    async def one() -> Any:
        yield ServiceBusMessage(big)

    async with client_for(broker) as client, client.get_queue_sender("plain") as sender:
        seen: list[MessageSizeExceededError] = []

        async def refused(send: Any) -> None:
            with pytest.raises(MessageSizeExceededError) as caught:
                await send
            seen.append(caught.value)

        await refused(sender.send_messages(ServiceBusMessage(big)))
        await refused(sender.send_messages([ServiceBusMessage(big)]))
        await refused(sender.send_messages([ServiceBusMessage("fits"), ServiceBusMessage(big)]))
        await refused(sender.send_messages(one()))
        await refused(sender.send_nowait(ServiceBusMessage(big)))
        gathered = asyncio.gather(sender.send_messages(ServiceBusMessage("first")),
                                  refused(sender.send_messages(ServiceBusMessage(big))))  # fmt: skip
        await gathered
        async with client.transaction() as txn:
            await refused(sender.send_messages([ServiceBusMessage(big)], transaction=txn))
        assert len(seen) == 7
        assert len({str(error) for error in seen}) == 1, [str(error) for error in seen]
        assert "exceeds the peer's max-message-size 262144" in str(seen[0])
        await sender.send_messages(ServiceBusMessage("the link is still usable"))


async def test_an_unknown_entity_raises_not_found(broker: BrokerThread) -> None:
    # The token's put is answered 404 (Service Bus's answer, the SDK's authentication error).
    async with client_for(broker) as client:
        sender = client.get_queue_sender("no-such-queue")
        with pytest.raises(ServiceBusAuthenticationError) as refused:
            await sender.send_messages(ServiceBusMessage("x"))
        assert refused.value.status_code == 404 and refused.value.condition == "amqp:not-found"


async def test_the_namespace_and_credential_constructor(broker: BrokerThread) -> None:
    credential = AzureNamedKeyCredential("RootManageSharedAccessKey", "SAS_KEY_VALUE")
    namespace = f"127.0.0.1:{broker.broker.port}"
    async with ServiceBusClient(namespace, credential, use_tls=False) as client:
        async with client.get_queue_sender("plain") as sender:
            await sender.send_messages(Message(b"plain amqplink message"))
        async with client.get_queue_receiver("plain") as receiver:
            (msg,) = await receiver.receive_messages(max_wait_time=5)
            assert b"".join(msg.body) == b"plain amqplink message"


@pytest.mark.parametrize("strict", [False, True])
async def test_a_sender_reconnects_after_the_connection_drops(strict: bool) -> None:
    """Strict broker: the links are attached again only under tokens put on the new connection."""
    namespace = BrokerThread(require_auth=strict)
    try:
        async with client_for(namespace) as client:
            async with client.get_queue_sender("plain") as sender:
                await sender.send_messages(ServiceBusMessage("before"))
                drop_connection(client)
                await sender.send_messages(ServiceBusMessage("after"))
            async with client.get_queue_receiver("plain") as receiver:
                assert [str(m) for m in await receive_all(receiver)] == ["before", "after"]
    finally:
        namespace.stop()


async def test_connection_dropped_mid_send_loses_no_acknowledged_message(broker: BrokerThread) -> None:
    """Batches in flight when the socket breaks are sent again: at least once, never dropped."""
    count = 3000
    async with client_for(broker, retry_backoff_factor=0.01) as client:  # the claim is what arrives, not when
        async with client.get_queue_sender("plain") as sender:
            await sender.create_message_batch()

            async def breaker() -> None:
                link = sender._link
                assert link is not None
                while link.in_flight == 0:
                    await asyncio.sleep(0)
                drop_connection(client)

            task = asyncio.create_task(breaker())
            await sender.send_messages(ServiceBusMessage(b"%05d" % i + b"y" * 600) for i in range(count))
            await task
        async with client.get_queue_receiver("plain", prefetch_count=500, receive_mode="receiveanddelete") as r:
            got = {b"".join(m.body)[:5] for m in await receive_all(r)}
        assert got == {b"%05d" % i for i in range(count)}


async def test_a_broken_connection_loses_every_lock_without_asking(broker: BrokerThread) -> None:
    """The client cannot settle or renew what its lost link held; the broker (as Service Bus)
    holds those locks until they expire, then redelivers, the expired lock counted."""
    async with client_for(broker) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        async with client.get_queue_receiver("locks") as receiver:
            held = await receiver.receive_messages(max_message_count=2, max_wait_time=5)
            assert len(held) == 2
            locked_until = min(m.locked_until_utc for m in held)
            drop_connection(client)
            for msg in held:
                with pytest.raises(MessageLockLostError):
                    await receiver.complete_message(msg)
                with pytest.raises(MessageLockLostError):
                    await receiver.renew_message_lock(msg)
            again: list[Any] = []  # the receiver reattaches; the broker redelivers at expiry
            while len(again) < 2:
                batch = await receiver.receive_messages(max_message_count=2, max_wait_time=LOCK * 3)
                assert batch, "not redelivered after the locks expired"
                again += batch
            assert dt.datetime.now(dt.UTC) >= locked_until
            assert sorted(str(m) for m in again) == ["a", "b"]
            assert all(m.delivery_count == 1 for m in again)
            for msg in again:
                await receiver.complete_message(msg)


async def test_auto_lock_renewal_failure_is_reported(broker: BrokerThread) -> None:
    reported: list[tuple[Any, Any]] = []
    failed = asyncio.Event()

    async def on_failure(renewable: Any, error: Any) -> None:
        reported.append((renewable, error))
        failed.set()

    async with client_for(broker) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages(ServiceBusMessage("x"))
        renewer = AutoLockRenewer(max_lock_renewal_duration=60, on_lock_renew_failure=on_failure)
        async with client.get_queue_receiver("locks", auto_lock_renewer=renewer) as receiver:
            (msg,) = await receiver.receive_messages(max_wait_time=5)
            assert renewer.renewing == 1
            drop_connection(client)
            await asyncio.wait_for(failed.wait(), LOCK * 2)
        await renewer.close()
    ((renewable, error),) = reported
    assert renewable is msg and error is msg.auto_renew_error
    assert isinstance(error, AutoLockRenewFailed) and isinstance(error.error, MessageLockLostError)


async def test_a_settled_message_stops_its_renewal(broker: BrokerThread) -> None:
    async with client_for(broker) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages(ServiceBusMessage("x"))
        renewer = AutoLockRenewer()
        async with renewer, client.get_queue_receiver("locks", auto_lock_renewer=renewer) as receiver:
            (msg,) = await receiver.receive_messages(max_wait_time=5)
            await receiver.complete_message(msg)
            for _ in range(100):
                if renewer.renewing == 0:
                    break
                await asyncio.sleep(0.02)
            assert renewer.renewing == 0 and msg.auto_renew_error is None


async def test_operations_after_close_are_refused(broker: BrokerThread) -> None:
    async with client_for(broker) as client:
        sender = client.get_queue_sender("plain")
        await sender.close()
        with pytest.raises(ValueError, match="shut down"):
            await sender.send_messages(ServiceBusMessage("x"))
        with pytest.raises(ServiceBusError):
            async with AutoLockRenewer() as renewer:
                await renewer.close()
                renewer.register(None, ServiceBusReceivedMessage(Message(b"x")))


def test_locked_until_is_a_utc_datetime() -> None:
    from amqplink.servicebus.session import datetime_from_ticks

    assert datetime_from_ticks(621355968000000000 + 10_000_000) == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)


@pytest.mark.slow  # three lifetimes of a 3 s token: 10 s
async def test_tokens_are_refreshed_before_they_expire_during_a_long_run() -> None:
    """Strict broker: links need a live token and an expired one detaches them. Tokens that
    live 3 s are put again before expiry, so sends keep working for 3x their lifetime."""
    strict = BrokerThread(require_auth=True)
    try:
        async with client_for(strict, token_ttl=3) as client:
            async with client.get_queue_sender("plain") as sender:
                holder = client._holder
                assert holder._cbs is not None
                audience = holder.audience("plain")
                first = holder._cbs.expires_on(audience)
                for i in range(9):
                    await sender.send_messages(ServiceBusMessage(f"t{i}"))
                    await asyncio.sleep(1)
                assert holder._cbs.expires_on(audience) > first + 3  # refreshed at least twice
                assert holder._cbs.last_refresh_error(audience) is None
            async with client.get_queue_receiver("plain") as receiver:
                assert [str(m) for m in await receive_all(receiver)] == [f"t{i}" for i in range(9)]
    finally:
        strict.stop()


async def test_a_refused_token_raises_authentication_error() -> None:
    strict = BrokerThread(require_auth=True)
    try:
        # (strict given no key makes a random one: replace whatever key it printed)
        wrong = re.sub(r"SharedAccessKey=[^;]+", "SharedAccessKey=not-the-key", strict.connection_string)
        async with ServiceBusClient.from_connection_string(wrong, retry_total=0) as client:
            with pytest.raises(ServiceBusAuthenticationError) as info:
                await client.get_queue_sender("plain").send_messages(ServiceBusMessage("x"))
            assert "not-the-key" not in str(info.value)
    finally:
        strict.stop()


@pytest.mark.parametrize("condition", ["amqp:link:detach-forced", "amqp:connection:forced"])
async def test_forced_detach_or_close_is_recovered_transparently(broker: BrokerThread, condition: str) -> None:
    async with (
        client_for(broker) as client,
        client.get_queue_sender("locks") as sender,
        client.get_queue_receiver("locks") as receiver,
    ):
        await sender.send_messages(ServiceBusMessage("first"))
        (held,) = await receiver.receive_messages(max_wait_time=5)
        assert broker.force(condition) >= 1
        await sender.send_messages(ServiceBusMessage("second"))  # reattached (or reconnected) and sent
        with pytest.raises(MessageLockLostError):
            await receiver.complete_message(held)  # its lock went with its link
        got: list[Any] = []  # "first" comes back once its lock expires (the broker holds it, as Service Bus)
        while {str(m) for m in got} != {"first", "second"}:
            batch = await receiver.receive_messages(max_message_count=10, max_wait_time=LOCK * 3)
            assert batch, f"only {[str(m) for m in got]} came back"
            got += batch
        got += await receive_all(receiver, wait=0.3)
        # At least once: a transfer the broker took without answering (its close was on the
        # wire) is sent again, so "second" may come twice; nothing is lost.
        assert {str(m) for m in got} == {"first", "second"} and len(got) <= 3
        for msg in got:
            await receiver.complete_message(msg)


async def test_a_session_receiver_whose_link_is_lost_reports_the_session_lock_lost(broker: BrokerThread) -> None:
    async with client_for(broker, retry_total=0) as client:
        async with client.get_queue_sender("sessions") as sender:
            await sender.send_messages([ServiceBusMessage("a", session_id="s"), ServiceBusMessage("b", session_id="s")])
        async with client.get_queue_receiver("sessions", session_id="s") as receiver:
            (first,) = await receiver.receive_messages(max_wait_time=5)
            assert first.locked_until_utc is None  # a session's messages are locked by the session
            assert broker.force("amqp:link:detach-forced") == 1
            with pytest.raises(SessionLockLostError):
                for _ in range(50):
                    await receiver.receive_messages(max_wait_time=0.1)
            assert receiver.session._lock_expired
            with pytest.raises(SessionLockLostError):
                await receiver.complete_message(first)


def test_the_blocking_send_nowait_returns_futures(broker: BrokerThread) -> None:
    from amqplink.servicebus import ServiceBusClient as BlockingClient

    with BlockingClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("plain", max_in_flight=4) as sender:
            futures = [sender.send_nowait(ServiceBusMessage(f"b{i}")) for i in range(50)]
            assert [f.result(10) for f in futures] == [None] * 50
        with client.get_queue_receiver("plain", receive_mode="receiveanddelete", max_wait_time=1) as receiver:
            assert [str(m) for m in receiver] == [f"b{i}" for i in range(50)]


async def test_server_busy_waits_at_least_four_seconds_then_succeeds(broker: BrokerThread) -> None:
    """docs/protocol.md#retry: com.microsoft:server-busy is transient, wait >= 4 s (even with a tiny backoff factor)."""
    from amqplink.broker.namespace.errors import EntityError

    router = broker.broker.namespace.router
    real_send = router.send
    refusals: list[float] = []

    def busy_once(*args: Any, **kwargs: Any) -> None:
        if not refusals:
            refusals.append(time.monotonic())
            raise EntityError("com.microsoft:server-busy", "the namespace is busy (test)")
        real_send(*args, **kwargs)

    router.send = busy_once  # type: ignore[method-assign]
    async with client_for(broker, retry_backoff_factor=0.01) as client:
        async with client.get_queue_sender("plain") as sender:
            await sender.send_messages(ServiceBusMessage("patient"))
            waited = time.monotonic() - refusals[0]
        assert 4.0 <= waited < 8.0
        async with client.get_queue_receiver("plain") as receiver:
            assert [str(m) for m in await receive_all(receiver)] == ["patient"]


async def test_a_ready_made_sas_credential_covers_the_namespace() -> None:
    from amqplink.servicebus import AzureSasCredential
    from amqplink.servicebus.sas import generate_sas_token

    strict = BrokerThread(require_auth=True)
    try:
        assert strict.broker.servicebus is not None
        key = strict.broker.servicebus.keys["RootManageSharedAccessKey"]  # (strict given no key: a random one)
        namespace = f"127.0.0.1:{strict.broker.port}"
        # the audience keeps the namespace's port, as the SDK's (without TLS): sign for it
        token = generate_sas_token(
            f"sb://{namespace}/", "RootManageSharedAccessKey", key, int(time.time()) + 600
        )
        async with ServiceBusClient(namespace, AzureSasCredential(token), use_tls=False) as client:
            async with client.get_queue_sender("plain") as sender:
                await sender.send_messages(ServiceBusMessage("signed"))
            async with client.get_queue_receiver("plain") as receiver:
                assert [str(m) for m in await receive_all(receiver)] == ["signed"]
    finally:
        strict.stop()


async def test_a_send_the_broker_never_answers_times_out(broker: BrokerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operation timeout bounds the wait for an outcome (one watchdog per sender, no timer
    per send); the silent link is replaced."""
    from amqplink.broker.connection.ingest import Ingest

    async with client_for(broker, timeout=1, retry_total=0) as client, client.get_queue_sender("plain") as sender:
        await sender.send_messages(ServiceBusMessage("answered"))
        monkeypatch.setattr(Ingest, "on_sent", lambda *_: None)
        started = time.monotonic()
        with pytest.raises(OperationTimeoutError):
            await sender.send_messages(ServiceBusMessage("ignored"))
        assert 0.9 <= time.monotonic() - started < 3
        monkeypatch.undo()
        await sender.send_messages(ServiceBusMessage("on a new link"))  # the silent link was replaced


async def test_many_locks_are_renewed_in_one_request(broker: BrokerThread) -> None:
    """``renew_message_locks``: every lock extended, in one ``renew-lock`` request; a lock
    known lost (its link gone) raises before anything is asked."""
    async with client_for(broker) as client:
        async with client.get_queue_sender("locks") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        async with client.get_queue_receiver("locks") as receiver:
            held = await receiver.receive_messages(max_message_count=5, max_wait_time=5)
            assert len(held) == 5
            before = [m.locked_until_utc for m in held]
            renewed = await receiver.renew_message_locks(held)
            assert len(renewed) == 5 and all(a > b for a, b in zip(renewed, before, strict=True))
            assert [m.locked_until_utc for m in held] == renewed
            assert await receiver.renew_message_locks([]) == []
            lost = client._holder._connection
            assert lost is not None
            drop_connection(client)
            await lost.wait_closed()  # the client knows its link is gone
            with pytest.raises(MessageLockLostError):
                await receiver.renew_message_locks(held)
