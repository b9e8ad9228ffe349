"""ServiceBusMessage / ServiceBusReceivedMessage / ServiceBusMessageBatch: the sections and
annotations they map to, checked against the official SDK's own decoder."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from azure.servicebus import ServiceBusReceivedMessage as SdkReceived
from hypothesis import given
from hypothesis import strategies as st

from amqplink.codec.types import Long, Symbol, Timestamp
from amqplink.message import Message
from amqplink.servicebus import ServiceBusMessage, ServiceBusMessageBatch, ServiceBusReceivedMessage
from amqplink.servicebus.exceptions import MessageSizeExceededError
from amqplink.servicebus.message import BATCH_MESSAGE_FORMAT, MESSAGE_PROPERTY_MAX_LENGTH
from amqplink.servicebus.partitioning import check_partition_key, effective_partition_key

WHEN = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_every_field_reads_back_through_the_sdk_decoder() -> None:
    msg = ServiceBusMessage(
        "héllo",
        application_properties={"a": 1, b"b": "x"},
        session_id="s",
        message_id="m",
        content_type="application/json",
        correlation_id="c",
        subject="subj",
        partition_key="s",
        to="t",
        reply_to="r",
        reply_to_session_id="rs",
        time_to_live=dt.timedelta(seconds=90),
        scheduled_enqueue_time_utc=WHEN,
    )
    sdk = SdkReceived.from_bytes(msg.amqplink_message.encode())
    assert str(sdk) == "héllo"
    for name in ("session_id", "message_id", "content_type", "correlation_id", "subject", "partition_key", "to",
                 "reply_to", "reply_to_session_id", "time_to_live", "scheduled_enqueue_time_utc"):  # fmt: skip
        assert getattr(sdk, name) == getattr(msg, name), name
    assert sdk.application_properties == {b"a": 1, b"b": b"x"}
    assert msg.amqplink_message.properties.absolute_expiry_time is not None


def test_defaults_as_the_sdk() -> None:
    msg = ServiceBusMessage(b"x")
    uuid.UUID(msg.message_id)  # every message has an id, as the SDK gives one
    assert msg.session_id is msg.partition_key is msg.time_to_live is msg.scheduled_enqueue_time_utc is None
    assert list(msg.body) == [b"x"] and str(msg) == "x"
    assert ServiceBusMessage(None).body is None
    with pytest.raises(TypeError):
        ServiceBusMessage(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ServiceBusMessage("x", message_id="m" * (MESSAGE_PROPERTY_MAX_LENGTH + 1))


def test_partition_key_rules() -> None:
    """docs/protocol.md#partitioning: SessionId > PartitionKey > MessageId; PartitionKey != SessionId is an error."""
    assert effective_partition_key("s", "p", "m") == "s"
    assert effective_partition_key(None, "p", "m") == "p"
    assert effective_partition_key(None, None, "m") is None
    assert effective_partition_key(None, None, "m", duplicate_detection=True) == "m"
    with pytest.raises(ValueError):
        ServiceBusMessage("x", session_id="s", partition_key="p")
    late = ServiceBusMessage("x", partition_key="p")
    late.session_id = "s"  # the setter order the SDK does not check
    with pytest.raises(ValueError, match="session_id:s"):
        check_partition_key(late)
    session_only = ServiceBusMessage("x", session_id="s")
    check_partition_key(session_only)
    # as the SDK: a session message goes without x-opt-partition-key (the session id decides)
    assert session_only.partition_key is None
    assert Symbol("x-opt-partition-key") not in (session_only.amqplink_message.message_annotations or {})


def _received(**annotations: object) -> ServiceBusReceivedMessage:
    message = Message(b"body", message_annotations={Symbol(k.replace("_", "-")): v for k, v in annotations.items()})
    message.delivery_count = 2
    message.application_properties = {"DeadLetterReason": "why", "DeadLetterErrorDescription": "what"}
    return ServiceBusReceivedMessage(Message.decode(message.encode()))


def test_received_message_reads_the_broker_annotations() -> None:
    locked = Timestamp.from_datetime(WHEN)
    msg = _received(x_opt_sequence_number=Long(42), x_opt_enqueued_time=Timestamp(1_000), x_opt_locked_until=locked,
                    x_opt_enqueue_sequence_number=Long(7), x_opt_deadletter_source="q")  # fmt: skip
    assert msg.sequence_number == 42 and msg.enqueued_sequence_number == 7
    assert msg.enqueued_time_utc == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert msg.locked_until_utc == WHEN
    assert msg.delivery_count == 2
    assert (msg.dead_letter_reason, msg.dead_letter_error_description, msg.dead_letter_source) == ("why", "what", "q")
    assert msg.application_properties == {b"DeadLetterReason": b"why", b"DeadLetterErrorDescription": b"what"}
    settled = ServiceBusReceivedMessage(Message(b"x"), settled=True, lock_token=uuid.uuid4())
    assert settled.lock_token is None and settled.locked_until_utc is None


def test_batch_is_one_data_section_per_encoded_message() -> None:
    batch = ServiceBusMessageBatch(10_000)
    inner = [ServiceBusMessage(f"m{i}", session_id="s") for i in range(3)]
    for m in inner:
        batch.add_message(m)
    outer = Message.decode(batch._payload())
    assert outer.body_type == "data" and len(outer.body) == 3
    assert [Message.decode(chunk) for chunk in outer.body] == [m.amqplink_message for m in inner]
    assert outer.message_id == inner[0].message_id and outer.session_id == "s"
    assert batch._size >= len(batch._payload()) - 8  # the limit is checked against the real transfer
    encoded = [len(m.amqplink_message.encode()) for m in inner]
    assert batch.size_in_bytes == sum(n + (5 if n < 256 else 8) for n in encoded)  # as the SDK counts
    assert BATCH_MESSAGE_FORMAT == 0x80013700


@given(st.lists(st.binary(max_size=600), max_size=40), st.integers(min_value=200, max_value=4000))
def test_batch_size_accounting_never_exceeds_the_maximum(bodies: list[bytes], limit: int) -> None:
    batch = ServiceBusMessageBatch(limit)
    for b in bodies:
        try:
            batch.add_message(ServiceBusMessage(b))
        except MessageSizeExceededError:
            break
    assert len(batch._payload()) <= limit
    assert batch.size_in_bytes <= limit


def test_batch_accepts_a_mapping_and_refuses_other_things() -> None:
    batch = ServiceBusMessageBatch()
    batch.add_message({"body": "from a dict", "subject": "s"})
    assert len(batch) == 1
    with pytest.raises(TypeError):
        batch.add_message(3)  # type: ignore[arg-type]


def test_default_message_ids_are_unique_uuids_also_across_a_fork() -> None:
    import os

    ids = [ServiceBusMessage("x").message_id for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(uuid.UUID(i).version == 4 for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id must not repeat the parent's next one
        os.write(write, str(ServiceBusMessage("x").message_id).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    parent = str(ServiceBusMessage("x").message_id)
    assert child[:24] != parent[:24] and uuid.UUID(child).version == 4
