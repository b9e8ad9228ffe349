"""A message id that is not a string reads back as the SDK reads it (issue 30, item 5): a
``uuid.UUID`` as a ``UUID``, a ulong as an ``int``, binary as text when it is UTF-8 (else the
bytes), on the message sent and on the message received."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient

IDS = st.one_of(
    st.uuids(),
    st.integers(min_value=0, max_value=2**64 - 1),
    st.binary(min_size=1, max_size=20),
    st.text(min_size=1, max_size=20),
)


def as_the_sdk_reads_it(value: Any) -> Any:
    """The SDK's ``message_id`` getter: ``value.decode("UTF-8")``, else the value itself."""
    try:
        return value.decode("UTF-8")
    except (AttributeError, UnicodeDecodeError):
        return value


@given(IDS)
def test_a_message_id_set_reads_back_as_the_sdk_reads_it(value: Any) -> None:
    got = ServiceBusMessage("x", message_id=value).message_id
    if not value:  # an empty id (0, "", b"") is replaced by a new one, as the SDK does
        assert isinstance(got, str) and uuid.UUID(got)
        return
    assert got == as_the_sdk_reads_it(value) and type(got) is type(as_the_sdk_reads_it(value))


async def test_a_received_message_id_keeps_its_type() -> None:
    ids: list[Any] = [uuid.uuid4(), 7, 2**64 - 1, b"raw-\xff", b"utf8", "text"]
    async with Broker(servicebus=True) as broker:
        conn = (
            f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        )
        async with ServiceBusClient.from_connection_string(conn) as client:
            async with client.get_queue_sender("q") as sender:
                await sender.send_messages([ServiceBusMessage(str(i), message_id=v) for i, v in enumerate(ids)])
            got: list[Any] = []
            async with client.get_queue_receiver("q") as receiver:
                while len(got) < len(ids):
                    for message in await receiver.receive_messages(10, max_wait_time=5):
                        got.append(message.message_id)
                        await receiver.complete_message(message)
    expected = [as_the_sdk_reads_it(v) for v in ids]
    assert got == expected
    assert [type(g) for g in got] == [uuid.UUID, int, int, bytes, str, str]


@pytest.mark.sdk
@settings(deadline=None)  # (the first example imports the SDK)
@given(IDS)
def test_the_sdk_reads_a_message_id_set_as_we_do(value: Any) -> None:
    from azure.servicebus import ServiceBusMessage as SdkMessage

    sdk, ours = SdkMessage("x", message_id=value).message_id, ServiceBusMessage("x", message_id=value).message_id
    if value:
        assert sdk == ours
    else:  # an empty id (0, "", b"") is replaced by a new one, in UUID form, by both
        assert uuid.UUID(sdk) and uuid.UUID(ours) and sdk != ours
