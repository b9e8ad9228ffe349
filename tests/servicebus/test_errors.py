"""The condition table, the SDK's exception names, and conversion of aio exceptions."""

from __future__ import annotations

import azure.servicebus.exceptions as sdk_exceptions
import pytest

from amqplink import Message
from amqplink.aio import AttachTimeout, ConnectionClosedError, LinkDetachedError, MessageRejected, connect
from amqplink.aio.errors import AMQPError, SettlementError
from amqplink.broker import Broker
from amqplink.servicebus import exceptions
from amqplink.servicebus.errors import ERROR_TABLE, from_amqp_error, from_management_status
from amqplink.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
    ServiceBusServerBusyError,
    SessionLockLostError,
)

# docs/protocol.md#error-conditions
TRANSIENT = [
    "com.microsoft:server-busy",
    "com.microsoft:timeout",
    "com.microsoft:operation-cancelled",
    "amqp:internal-error",
    "amqp:connection:forced",
    "amqp:link:detach-forced",
    "amqp:link:transfer-limit-exceeded",
    "com.microsoft:container-close",
]
PERMANENT = [
    "com.microsoft:message-lock-lost",
    "com.microsoft:session-lock-lost",
    "amqp:not-found",
    "amqp:unauthorized-access",
    "amqp:not-allowed",
    "amqp:link:message-size-exceeded",
    "amqp:resource-limit-exceeded",
    "com.microsoft:entity-disabled",
    "com.microsoft:argument-error",
    "com.microsoft:argument-out-of-range",
    "amqp:decode-error",
    "amqp:precondition-failed",
]
SDK_NAMES = sorted(
    name
    for name in dir(sdk_exceptions)
    if isinstance(getattr(sdk_exceptions, name), type)
    and issubclass(getattr(sdk_exceptions, name), Exception)
    and name != "AzureError"
)


@pytest.mark.parametrize("condition", TRANSIENT + PERMANENT)
def test_every_protocol_condition_has_a_row_with_its_retryability(condition: str) -> None:
    kind = ERROR_TABLE[condition]
    assert kind.retryable is (condition in TRANSIENT)
    exc = from_amqp_error(LinkDetachedError("detached", condition=condition, description="why"), entity="q")
    assert isinstance(exc, kind.cls)
    assert (exc.condition, exc.description, exc.entity, exc.retryable) == (condition, "why", "q", kind.retryable)
    assert str(exc).startswith("q: why") and f"[{condition}]" in str(exc)


@pytest.mark.parametrize(
    ("condition", "cls"),
    [
        ("com.microsoft:server-busy", ServiceBusServerBusyError),
        ("com.microsoft:timeout", OperationTimeoutError),
        ("amqp:connection:forced", ServiceBusConnectionError),
        ("amqp:link:detach-forced", ServiceBusConnectionError),
        ("com.microsoft:message-lock-lost", MessageLockLostError),
        ("com.microsoft:session-lock-lost", SessionLockLostError),
        ("amqp:not-found", MessagingEntityNotFoundError),
        ("amqp:link:message-size-exceeded", MessageSizeExceededError),
        ("amqp:resource-limit-exceeded", exceptions.ServiceBusQuotaExceededError),
        ("amqp:unauthorized-access", exceptions.ServiceBusAuthorizationError),
        ("com.microsoft:entity-disabled", exceptions.MessagingEntityDisabledError),
        ("com.microsoft:message-not-found", MessageNotFoundError),
    ],
)
def test_classes_of_the_main_conditions(condition: str, cls: type[ServiceBusError]) -> None:
    assert ERROR_TABLE[condition].cls is cls


@pytest.mark.parametrize("name", SDK_NAMES)
def test_every_sdk_exception_name_exists(name: str) -> None:
    ours = getattr(exceptions, name)
    assert name in exceptions.__all__
    exc = ours(description="d", condition="c", entity="e")
    assert (exc.description, exc.condition, exc.entity) == ("d", "c", "e")
    assert isinstance(exc.retryable, bool)
    # the same base classes a user might catch: ServiceBusError or ValueError
    theirs = getattr(sdk_exceptions, name)
    assert issubclass(ours, ServiceBusError) is issubclass(theirs, sdk_exceptions.ServiceBusError)
    assert issubclass(ours, ValueError) is issubclass(theirs, ValueError)


def test_unknown_condition_is_a_retryable_service_bus_error() -> None:
    exc = from_amqp_error(AMQPError("x", condition="com.microsoft:something-new"))
    assert type(exc) is ServiceBusError and exc.retryable


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (400, ServiceBusError, False),
        (401, ServiceBusAuthenticationError, False),
        (403, exceptions.ServiceBusAuthorizationError, False),
        (404, MessagingEntityNotFoundError, False),
        (408, OperationTimeoutError, True),
        (410, MessageLockLostError, False),
        (413, MessageSizeExceededError, False),
        (418, ServiceBusError, False),
        (500, ServiceBusError, True),
        (503, ServiceBusServerBusyError, True),
        (504, OperationTimeoutError, True),
        (599, ServiceBusError, True),
    ],
)
def test_management_status_codes(status: int, cls: type[ServiceBusError], retryable: bool) -> None:
    exc = from_management_status(status, "the description", entity="q")
    assert type(exc) is cls
    assert (exc.status_code, exc.retryable, exc.description, exc.entity) == (status, retryable, "the description", "q")
    assert "the description" in str(exc) and f"status {status}" in str(exc)


def test_management_condition_beats_status_and_session_410() -> None:
    assert type(from_management_status(404, None, "com.microsoft:message-not-found")) is MessageNotFoundError
    assert type(from_management_status(400, None, "com.microsoft:session-lock-lost")) is SessionLockLostError
    assert type(from_management_status(410, None, None, session=True)) is SessionLockLostError
    unknown_condition = from_management_status(400, None, "com.microsoft:new-thing")
    assert type(unknown_condition) is ServiceBusError and not unknown_condition.retryable


def test_conversion_of_errors_without_a_condition() -> None:
    assert type(from_amqp_error(ConnectionClosedError("socket gone"))) is ServiceBusConnectionError
    assert from_amqp_error(ConnectionClosedError("socket gone")).retryable
    assert type(from_amqp_error(AttachTimeout("no answer"))) is OperationTimeoutError
    assert type(from_amqp_error(TimeoutError())) is OperationTimeoutError
    assert type(from_amqp_error(ConnectionResetError("reset"))) is ServiceBusConnectionError
    closed_not_found = from_amqp_error(ConnectionClosedError("x", condition="amqp:not-found"))
    assert type(closed_not_found) is ServiceBusCommunicationError
    rejected = from_amqp_error(MessageRejected("r", condition="amqp:link:message-size-exceeded"))
    assert type(rejected) is MessageSizeExceededError
    odd = from_amqp_error(RuntimeError("boom"))
    assert type(odd) is ServiceBusError and not odd.retryable
    same = MessageLockLostError(entity="q")
    assert from_amqp_error(same) is same


async def test_settlement_errors_from_the_real_receiver() -> None:
    """Pins aio's SettlementError wording that from_amqp_error reads."""
    async with Broker() as broker, await connect(broker.url) as conn:
        sender = await conn.create_sender("q")
        for body in (b"a", b"b"):
            await sender.send(Message(body))
        receiver = await conn.create_receiver("q", mode="peek-lock", prefetch=2)
        first, second = await receiver.receive(2, timeout=5)
        await receiver.accept(first)
        with pytest.raises(SettlementError) as twice:
            await receiver.accept(first)
        converted = from_amqp_error(twice.value, entity="q")
        assert type(converted) is MessageAlreadySettled and isinstance(converted, ValueError)
        assert converted.entity == "q" and not converted.retryable
        await receiver.close()
        with pytest.raises(SettlementError) as gone:
            await receiver.accept(second)
        lost = from_amqp_error(gone.value, entity="q")
        assert type(lost) is MessageLockLostError and not lost.retryable


def test_base_defaults_mirror_the_sdk() -> None:
    assert not ServiceBusError("x").retryable
    assert ServiceBusConnectionError().retryable and ServiceBusServerBusyError().retryable
    assert str(MessageLockLostError()).startswith("The lock on the message")
    assert ServiceBusError(message="plain").message == "plain"
