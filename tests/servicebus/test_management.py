"""$management client: the exact request maps and properties of each operation, response
parsing, status handling, and lock-token byte order — against the in-test responder."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink import Message
from amqplink.aio import connect
from amqplink.codec.types import AMQPType, Array, Int, Long, Timestamp, UInt
from amqplink.servicebus.exceptions import (
    MessageLockLostError,
    MessageNotFoundError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
    SessionLockLostError,
)
from amqplink.servicebus.lock_token import delivery_tag_from_lock_token, lock_token_from_delivery_tag
from amqplink.servicebus.management_node import (
    DispositionStatus,
    ManagementClient,
    Operation,
    ScheduledMessage,
    management_address,
)
from tests.responder import Responder

TOKEN = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
TAG = bytes.fromhex("5bad8f0fcbd99f46a1657086772895 0e".replace(" ", ""))
WHEN = dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC)


def ok(body: Any = None, code: int = 200) -> Message:
    return Message(body, application_properties={"statusCode": code, "statusDescription": "OK"})


@asynccontextmanager
async def management(
    answer: Callable[[Message], Message | None], **kwargs: Any
) -> AsyncIterator[tuple[Responder, ManagementClient]]:
    def handler(node: str, request: Message) -> Message | None:
        assert node == "orders/$management"
        return answer(request)

    async with Responder(handler) as responder, await connect(responder.url) as conn:
        client = await ManagementClient.open(conn, "orders", **kwargs)
        try:
            yield responder, client
        finally:
            await client.close()


def only_request(responder: Responder) -> Message:
    [(_, request)] = responder.requests
    return request


# -- lock tokens ---------------------------------------------------------------------


def test_protocol_example_lock_token_and_tag() -> None:
    assert delivery_tag_from_lock_token(TOKEN) == TAG
    assert delivery_tag_from_lock_token(str(TOKEN)) == TAG
    assert lock_token_from_delivery_tag(TAG) == TOKEN
    with pytest.raises(ValueError, match="16 bytes"):
        lock_token_from_delivery_tag(b"\x00" * 8)


@given(st.binary(min_size=16, max_size=16))
def test_tag_round_trip(tag: bytes) -> None:
    assert delivery_tag_from_lock_token(lock_token_from_delivery_tag(tag)) == tag


def test_management_address() -> None:
    assert management_address("orders") == "orders/$management"
    assert management_address("t/Subscriptions/s/") == "t/Subscriptions/s/$management"


# -- operations: request maps exactly as PROTOCOL.md ----------------------------------


async def test_renew_lock_request_properties_and_response() -> None:
    expiry = Timestamp.from_datetime(WHEN)
    async with management(
        lambda r: ok({"expirations": Array([expiry], AMQPType.TIMESTAMP)}),
        associated_link_name="receiver-link-1",
        server_timeout=5,
    ) as (responder, client):
        assert await client.renew_lock([TOKEN]) == [WHEN]
        request = only_request(responder)
        assert request.application_properties == {
            "operation": "com.microsoft:renew-lock",
            "com.microsoft:server-timeout": UInt(5000),
            "associated-link-name": "receiver-link-1",
        }
        assert isinstance(request.application_properties["com.microsoft:server-timeout"], UInt)
        assert request.body == {"lock-tokens": Array([TOKEN], AMQPType.UUID)}
        assert request.body["lock-tokens"].element_type is AMQPType.UUID
        assert request.message_id is not None and request.reply_to == client.pair.reply_to


async def test_peek() -> None:
    payloads = [Message(b"one").encode(), Message(b"two").encode()]
    async with management(lambda r: ok({"messages": [{"message": p} for p in payloads]})) as (responder, client):
        assert await client.peek_messages(7, 2) == payloads
        body = only_request(responder).body
        assert body == {"from-sequence-number": 7, "message-count": 2}
        # long decodes as a plain int (amqplink's default integer type), int as Int
        assert type(body["from-sequence-number"]) is int and type(body["message-count"]) is Int
        assert "associated-link-name" not in only_request(responder).application_properties


async def test_peek_no_content_is_empty() -> None:
    async with management(lambda r: ok(None, 204)) as (_, client):
        assert await client.peek_messages(1, 10) == []


async def test_schedule_and_cancel() -> None:
    encoded = Message(b"later").encode()

    def answer(request: Message) -> Message:
        if request.application_properties["operation"] == Operation.SCHEDULE_MESSAGE:
            return ok({"sequence-numbers": Array([Long(41), Long(42)], AMQPType.LONG)})
        return ok(None)

    async with management(answer) as (responder, client):
        entries = [ScheduledMessage("m1", encoded), ScheduledMessage("m2", encoded, session_id="s", partition_key="s")]
        assert await client.schedule_messages(entries) == [41, 42]
        await client.cancel_scheduled_messages([41, 42])
        (_, schedule), (_, cancel) = responder.requests
        assert schedule.body == {
            "messages": [
                {"message-id": "m1", "message": encoded},
                {"message-id": "m2", "message": encoded, "session-id": "s", "partition-key": "s"},
            ]
        }
        assert cancel.application_properties["operation"] == "com.microsoft:cancel-scheduled-message"
        assert cancel.body == {"sequence-numbers": Array([41, 42], AMQPType.LONG)}


async def test_receive_by_sequence_number() -> None:
    encoded = Message(b"deferred").encode()
    async with management(lambda r: ok({"messages": [{"lock-token": TOKEN, "message": encoded}]})) as (
        responder,
        client,
    ):
        got = await client.receive_by_sequence_number([5], receiver_settle_mode=1, session_id="s1")
        assert got == [(TOKEN, encoded)]
        body = only_request(responder).body
        assert body == {"sequence-numbers": Array([5], AMQPType.LONG), "receiver-settle-mode": 1, "session-id": "s1"}
        assert isinstance(body["receiver-settle-mode"], UInt)


@pytest.mark.parametrize(
    ("status", "wire"),
    [
        (DispositionStatus.COMPLETED, "completed"),
        (DispositionStatus.ABANDONED, "abandoned"),
        (DispositionStatus.SUSPENDED, "suspended"),
        (DispositionStatus.DEFERRED, "defered"),
    ],
)
async def test_update_disposition(status: DispositionStatus, wire: str) -> None:
    async with management(lambda r: ok(None, 204)) as (responder, client):
        await client.update_disposition(
            status,
            [TOKEN],
            dead_letter_reason="bad" if status is DispositionStatus.SUSPENDED else None,
            dead_letter_description="worse" if status is DispositionStatus.SUSPENDED else None,
            properties_to_modify={"k": 1},
        )
        body = only_request(responder).body
        expected: dict[str, Any] = {
            "disposition-status": wire,
            "lock-tokens": Array([TOKEN], AMQPType.UUID),
            "properties-to-modify": {"k": 1},
        }
        if status is DispositionStatus.SUSPENDED:
            expected |= {"deadletter-reason": "bad", "deadletter-description": "worse"}
        assert body == expected


async def test_session_operations() -> None:
    state: dict[str, bytes | None] = {"s1": None}

    def answer(request: Message) -> Message:
        op = request.application_properties["operation"]
        sid = request.body["session-id"]
        if op == Operation.RENEW_SESSION_LOCK:
            return ok({"expiration": Timestamp.from_datetime(WHEN)})
        if op == Operation.SET_SESSION_STATE:
            state[sid] = request.body["session-state"]
            return ok(None)
        return ok({"session-state": state[sid]})

    async with management(answer) as (responder, client):
        assert await client.renew_session_lock("s1") == WHEN
        assert await client.get_session_state("s1") is None
        await client.set_session_state("s1", b"\x01state")
        assert await client.get_session_state("s1") == b"\x01state"
        ops = [r.application_properties["operation"] for _, r in responder.requests]
        assert ops == [
            "com.microsoft:renew-session-lock",
            "com.microsoft:get-session-state",
            "com.microsoft:set-session-state",
            "com.microsoft:get-session-state",
        ]
        assert responder.requests[2][1].body == {"session-id": "s1", "session-state": b"\x01state"}


# -- statuses and failures --------------------------------------------------------------


def failing(code: int, condition: str | None = None, kebab: bool = False) -> Callable[[Message], Message]:
    props: dict[str, Any] = (
        {"status-code": code, "status-description": "it failed"}
        if kebab
        else {"statusCode": code, "statusDescription": "it failed"}
    )
    if condition:
        props["errorCondition"] = condition
    return lambda request: Message(None, application_properties=props)


@pytest.mark.parametrize("kebab", [False, True])
async def test_410_on_renew_lock_is_lock_lost(kebab: bool) -> None:
    async with management(failing(410, kebab=kebab)) as (_, client):
        with pytest.raises(MessageLockLostError) as info:
            await client.renew_lock([TOKEN])
        assert (info.value.status_code, info.value.entity, info.value.description) == (410, "orders", "it failed")


async def test_410_on_a_session_operation_is_session_lock_lost() -> None:
    async with management(failing(410)) as (_, client):
        with pytest.raises(SessionLockLostError):
            await client.renew_session_lock("s1")


async def test_error_condition_decides_over_status() -> None:
    async with management(failing(404, "com.microsoft:message-not-found")) as (_, client):
        with pytest.raises(MessageNotFoundError) as info:
            await client.receive_by_sequence_number([1], receiver_settle_mode=1)
        assert info.value.condition == "com.microsoft:message-not-found"
    async with management(failing(404)) as (_, client):
        with pytest.raises(MessagingEntityNotFoundError):
            await client.peek_messages(1, 1)
    async with management(failing(503, "com.microsoft:server-busy")) as (_, client):
        with pytest.raises(ServiceBusServerBusyError) as busy:
            await client.peek_messages(1, 1)
        assert busy.value.retryable


async def test_a_response_without_status_is_an_error() -> None:
    async with management(lambda r: Message({"x": 1})) as (_, client):
        with pytest.raises(ServiceBusError, match="no statusCode"):
            await client.peek_messages(1, 1)


async def test_no_answer_is_an_operation_timeout() -> None:
    async with management(lambda r: None, server_timeout=0.05) as (responder, client):
        with pytest.raises(OperationTimeoutError) as info:
            await client.renew_lock([TOKEN])
        assert info.value.entity == "orders" and info.value.retryable
        assert only_request(responder).application_properties["com.microsoft:server-timeout"] == 50


async def test_connection_loss_is_a_connection_error() -> None:
    async with management(lambda r: None) as (responder, client):
        renewing = asyncio.ensure_future(client.renew_lock([TOKEN]))
        await responder.wait_until(lambda: len(responder.held) == 1)
        responder.drop_connections()
        with pytest.raises(ServiceBusConnectionError):
            await renewing
        assert client.closed
