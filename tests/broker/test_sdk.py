"""The official azure-servicebus SDK, unchanged, against the broker's Service Bus namespace.

The broker reads an emulator-style Config.json document; the SDK connects with the
emulator connection string the broker prints.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageLockLostError

from amqplink.broker import Broker
from amqplink.broker.config import parse_config
from tests.broker.sdkutil import running_broker


def _queue(name: str, **props: object) -> dict[str, object]:
    return {"Name": name, "Properties": props}


CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [_queue(f"q{i}") for i in range(12)]
                + [
                    _queue("short-lock", LockDuration="PT2S"),
                    _queue("three-tries", MaxDeliveryCount=2),
                    _queue("expiring", DeadLetteringOnMessageExpiration=True),
                    _queue("dedup", RequiresDuplicateDetection=True, DuplicateDetectionHistoryTimeWindow="PT1M"),
                    _queue("sessions", RequiresSession=True, LockDuration="PT5S"),
                ],
                "Topics": [
                    {
                        "Name": "orders",
                        "Subscriptions": [
                            {"Name": "all"},
                            {
                                "Name": "sql",
                                "Rules": [
                                    {
                                        "Name": "big",
                                        "Properties": {
                                            "FilterType": "Sql",
                                            "SqlFilter": {"SqlExpression": "sys.Label = 'red' AND size = 'L'"},
                                        },
                                    }
                                ],
                            },
                            {
                                "Name": "red",
                                "Rules": [
                                    {
                                        "Name": "red-only",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {"Label": "red", "Properties": {"size": "L"}},
                                        },
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(parse_config(CONFIG)) as b:
        yield b


@pytest.fixture()
def client(broker: Broker) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(broker.connection_string) as c:
        yield c


def send(client: ServiceBusClient, queue: str, messages: ServiceBusMessage | list[ServiceBusMessage]) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(messages)


def receive_n(receiver: object, n: int, wait: float = 5) -> list[object]:
    out: list[object] = []
    deadline = time.monotonic() + wait
    while len(out) < n and time.monotonic() < deadline:
        out += receiver.receive_messages(max_message_count=n - len(out), max_wait_time=1)  # type: ignore[attr-defined]
    return out


def test_connection_string_is_the_emulators(broker: Broker) -> None:
    assert broker.connection_string == (
        f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
    )


def test_send_receive_complete(client: ServiceBusClient, broker: Broker) -> None:
    send(client, "q0", ServiceBusMessage("hello", message_id="m1", application_properties={"k": "v"}))
    with client.get_queue_receiver("q0") as receiver:
        (msg,) = receive_n(receiver, 1)
        assert str(msg) == "hello" and msg.message_id == "m1"  # type: ignore[attr-defined]
        assert msg.application_properties == {b"k": b"v"}  # type: ignore[attr-defined]
        assert msg.sequence_number == 1 and msg.delivery_count == 0  # type: ignore[attr-defined]
        assert isinstance(msg.lock_token, uuid.UUID)  # type: ignore[attr-defined]
        left = (msg.locked_until_utc - dt.datetime.now(dt.UTC)).total_seconds()  # type: ignore[attr-defined]
        assert 50 < left <= 61
        assert abs((msg.enqueued_time_utc - dt.datetime.now(dt.UTC)).total_seconds()) < 10  # type: ignore[attr-defined]
        receiver.complete_message(msg)  # type: ignore[arg-type]
        assert receiver.peek_messages(max_message_count=5) == []
    assert len(broker.namespace.receiver_source("q0").store) == 0


def test_send_batch(client: ServiceBusClient) -> None:
    with client.get_queue_sender("q1") as sender:
        batch = sender.create_message_batch()
        for i in range(10):
            batch.add_message(ServiceBusMessage(f"b{i}"))
        sender.send_messages(batch)
        sender.send_messages([ServiceBusMessage("l0"), ServiceBusMessage("l1")])
    with client.get_queue_receiver("q1", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 12)
    assert [str(m) for m in got] == [f"b{i}" for i in range(10)] + ["l0", "l1"]
    assert [m.sequence_number for m in got] == list(range(1, 13))  # type: ignore[attr-defined]


def test_receive_and_delete(client: ServiceBusClient, broker: Broker) -> None:
    send(client, "q2", [ServiceBusMessage("a"), ServiceBusMessage("b")])
    with client.get_queue_receiver("q2", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 2)
        assert [str(m) for m in got] == ["a", "b"]
    assert len(broker.namespace.receiver_source("q2").store) == 0


def test_abandon_redelivers_with_delivery_count_plus_one(client: ServiceBusClient) -> None:
    send(client, "q3", ServiceBusMessage("again"))
    with client.get_queue_receiver("q3") as receiver:
        (first,) = receive_n(receiver, 1)
        receiver.abandon_message(first)  # type: ignore[arg-type]
        (second,) = receive_n(receiver, 1)
        assert str(second) == "again"
        assert second.delivery_count == first.delivery_count + 1  # type: ignore[attr-defined]
        assert second.lock_token != first.lock_token  # type: ignore[attr-defined]
        receiver.complete_message(second)  # type: ignore[arg-type]


def test_defer_and_receive_deferred(client: ServiceBusClient) -> None:
    send(client, "q4", ServiceBusMessage("later"))
    with client.get_queue_receiver("q4") as receiver:
        (msg,) = receive_n(receiver, 1)
        seq = msg.sequence_number  # type: ignore[attr-defined]
        receiver.defer_message(msg)  # type: ignore[arg-type]
        assert receiver.receive_messages(max_wait_time=0.3) == []
        (deferred,) = receiver.receive_deferred_messages([seq])
        assert str(deferred) == "later" and deferred.sequence_number == seq
        receiver.complete_message(deferred)
        assert receiver.peek_messages(max_message_count=5) == []


def test_dead_letter_and_read_the_dlq(client: ServiceBusClient) -> None:
    send(client, "q5", ServiceBusMessage("poison"))
    with client.get_queue_receiver("q5") as receiver:
        (msg,) = receive_n(receiver, 1)
        receiver.dead_letter_message(msg, reason="bad-input", error_description="cannot parse")  # type: ignore[arg-type]
    with client.get_queue_receiver("q5", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive_n(dlq, 1)
        assert str(dead) == "poison"
        assert dead.dead_letter_reason == "bad-input"  # type: ignore[attr-defined]
        assert dead.dead_letter_error_description == "cannot parse"  # type: ignore[attr-defined]
        dlq.complete_message(dead)  # type: ignore[arg-type]


def test_max_delivery_count_moves_to_dlq(client: ServiceBusClient) -> None:
    send(client, "three-tries", ServiceBusMessage("flaky"))
    with client.get_queue_receiver("three-tries") as receiver:
        for _ in range(2):
            (msg,) = receive_n(receiver, 1)
            receiver.abandon_message(msg)  # type: ignore[arg-type]
    with client.get_queue_receiver("three-tries", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive_n(dlq, 1)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"  # type: ignore[attr-defined]


def test_renew_lock(client: ServiceBusClient) -> None:
    send(client, "q6", ServiceBusMessage("hold"))
    with client.get_queue_receiver("q6") as receiver:
        (msg,) = receive_n(receiver, 1)
        before = msg.locked_until_utc  # type: ignore[attr-defined]
        time.sleep(0.05)
        after = receiver.renew_message_lock(msg)  # type: ignore[arg-type]
        assert after > before and msg.locked_until_utc == after  # type: ignore[attr-defined]
        receiver.complete_message(msg)  # type: ignore[arg-type]


def test_lock_expiry_gives_lock_lost_and_redelivery(client: ServiceBusClient) -> None:
    send(client, "short-lock", ServiceBusMessage("slow"))
    with client.get_queue_receiver("short-lock") as receiver:
        (msg,) = receive_n(receiver, 1)
        deadline = time.monotonic() + 10
        again: list[object] = []
        while not again and time.monotonic() < deadline:  # the broker redelivers once the lock ran out
            again = receiver.receive_messages(max_wait_time=1)
        assert len(again) == 1 and again[0].delivery_count == 1  # type: ignore[attr-defined]
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(msg)  # type: ignore[arg-type]
        receiver.complete_message(again[0])  # type: ignore[arg-type]


def test_auto_lock_renewer_holds_past_three_lock_durations(client: ServiceBusClient) -> None:
    send(client, "short-lock", ServiceBusMessage("long job"))
    renewer = AutoLockRenewer(max_lock_renewal_duration=30)
    try:
        with client.get_queue_receiver("short-lock", auto_lock_renewer=renewer) as receiver:
            (msg,) = receive_n(receiver, 1)
            time.sleep(6.5)  # the work itself: 3x the 2 s lock duration
            assert receiver.receive_messages(max_wait_time=0.5) == []  # still locked: not redelivered
            receiver.complete_message(msg)  # type: ignore[arg-type]
    finally:
        renewer.close()


def test_peek(client: ServiceBusClient) -> None:
    send(client, "q7", [ServiceBusMessage(f"p{i}") for i in range(4)])
    with client.get_queue_receiver("q7") as receiver:
        first = receiver.peek_messages(max_message_count=2)
        assert [str(m) for m in first] == ["p0", "p1"]
        rest = receiver.peek_messages(max_message_count=10)  # continues after the last peeked
        assert [str(m) for m in rest] == ["p2", "p3"]
        assert [str(m) for m in receiver.peek_messages(max_message_count=10, sequence_number=1)] == [
            "p0", "p1", "p2", "p3"
        ]  # fmt: skip
        assert len(receive_n(receiver, 4)) == 4  # peeking took nothing


def test_schedule_and_cancel(client: ServiceBusClient) -> None:
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=4)
    with client.get_queue_sender("q8") as sender:
        keep, drop = sender.schedule_messages([ServiceBusMessage("on time"), ServiceBusMessage("never")], at)
        sender.cancel_scheduled_messages(drop)
    with client.get_queue_receiver("q8") as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=10)
        assert peeked.sequence_number == keep and str(peeked) == "on time"
        (msg,) = receive_n(receiver, 1, wait=10)
        assert str(msg) == "on time"
        assert msg.enqueued_time_utc >= at - dt.timedelta(milliseconds=1)  # type: ignore[attr-defined]
        assert dt.datetime.now(dt.UTC) >= at
        receiver.complete_message(msg)  # type: ignore[arg-type]
        assert receiver.peek_messages(max_message_count=10) == []  # the cancelled one is gone


def test_ttl_expiry_to_the_dlq(client: ServiceBusClient) -> None:
    send(client, "expiring", ServiceBusMessage("perishable", time_to_live=dt.timedelta(seconds=1)))
    time.sleep(1.2)
    with client.get_queue_receiver("expiring") as receiver:
        assert receiver.receive_messages(max_wait_time=0.3) == []
    with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive_n(dlq, 1)
        assert str(dead) == "perishable" and dead.dead_letter_reason == "TTLExpiredException"  # type: ignore[attr-defined]


def test_duplicate_detection(client: ServiceBusClient, broker: Broker) -> None:
    with client.get_queue_sender("dedup") as sender:
        for body in ("first", "repeat", "other"):
            sender.send_messages(ServiceBusMessage(body, message_id="same" if body != "other" else "other"))
    with client.get_queue_receiver("dedup", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive_n(receiver, 2)
    assert [str(m) for m in got] == ["first", "other"]
    assert len(broker.namespace.receiver_source("dedup").store) == 0  # the repeat was dropped on arrival


def test_topic_with_correlation_and_sql_filters(client: ServiceBusClient, broker: Broker) -> None:
    with client.get_topic_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("big red", subject="red", application_properties={"size": "L"}))
        sender.send_messages(ServiceBusMessage("small red", subject="red", application_properties={"size": "S"}))
        sender.send_messages(ServiceBusMessage("blue", subject="blue"))
    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    with client.get_subscription_receiver("orders", "all", receive_mode=mode) as receiver:
        assert [str(m) for m in receive_n(receiver, 3)] == ["big red", "small red", "blue"]
    with client.get_subscription_receiver("orders", "red", receive_mode=mode) as receiver:
        assert [str(m) for m in receive_n(receiver, 1)] == ["big red"]
    assert len(broker.namespace.receiver_source("orders/Subscriptions/red").store) == 0
    with client.get_subscription_receiver("orders", "sql", receive_mode=mode) as receiver:
        assert [str(m) for m in receive_n(receiver, 1)] == ["big red"]
    assert len(broker.namespace.receiver_source("orders/Subscriptions/sql").store) == 0


def test_sessions_with_state_and_lock_renewal(client: ServiceBusClient) -> None:
    with client.get_queue_sender("sessions") as sender:
        sender.send_messages([ServiceBusMessage(f"a{i}", session_id="A") for i in range(3)])
        sender.send_messages(ServiceBusMessage("b0", session_id="B"))
    with client.get_queue_receiver("sessions", session_id="A") as receiver:
        session = receiver.session
        assert session.session_id == "A"
        assert session.locked_until_utc is not None
        got = receive_n(receiver, 3)
        assert [str(m) for m in got] == ["a0", "a1", "a2"]
        session.set_state(b"progress")
        assert session.get_state() == b"progress"
        before = session.locked_until_utc
        time.sleep(0.05)
        session.renew_lock()
        assert session.locked_until_utc > before
        for m in got:
            receiver.complete_message(m)  # type: ignore[arg-type]
    with client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION) as receiver:
        assert receiver.session.session_id == "B"
        (b0,) = receive_n(receiver, 1)
        assert str(b0) == "b0"
        receiver.complete_message(b0)  # type: ignore[arg-type]


def test_closing_a_receiver_leaves_its_locks_until_they_expire(client: ServiceBusClient) -> None:
    """As Service Bus: the SDK releases only what it buffered on close "so they are not left
    locked at the broker until lock expiry"; a message it handed out stays locked until then."""
    send(client, "short-lock", ServiceBusMessage("held"))
    with client.get_queue_receiver("short-lock") as receiver:
        (msg,) = receive_n(receiver, 1)
        assert msg.delivery_count == 0  # type: ignore[attr-defined]
        locked_until = msg.locked_until_utc  # type: ignore[attr-defined]
    with client.get_queue_receiver("short-lock") as receiver:
        assert receiver.receive_messages(max_wait_time=0.5) == []  # still locked
        (again,) = receive_n(receiver, 1)  # after the 2 s lock
        assert dt.datetime.now(dt.UTC) >= locked_until
        assert str(again) == "held" and again.delivery_count == 1  # type: ignore[attr-defined]
        receiver.complete_message(again)  # type: ignore[arg-type]


def test_message_above_256_kb_is_refused(client: ServiceBusClient) -> None:
    from azure.servicebus.exceptions import MessageSizeExceededError

    with client.get_queue_sender("q10") as sender:
        sender.send_messages(ServiceBusMessage(b"x" * 200_000))
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * 300_000))


def test_next_available_session_when_none_is_free(client: ServiceBusClient) -> None:
    from azure.servicebus.exceptions import OperationTimeoutError

    receiver = client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1)
    with pytest.raises(OperationTimeoutError), receiver:
        receiver.receive_messages(max_wait_time=1)


def test_topic_schedule_reaches_subscriptions_on_time(client: ServiceBusClient) -> None:
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    with client.get_topic_sender("orders") as sender:
        (seq,) = sender.schedule_messages([ServiceBusMessage("scheduled", subject="red")], at)
        assert isinstance(seq, int)
    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    with client.get_subscription_receiver("orders", "all", receive_mode=mode) as receiver:
        (msg,) = receive_n(receiver, 1, wait=10)
        assert str(msg) == "scheduled" and dt.datetime.now(dt.UTC) >= at


def test_closing_the_sdk_client_closes_its_connection_cleanly(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    # When the SDK closes a receiver that used $management (peek here), it ends the
    # session and then sends the management link's detach on the same channel; the
    # broker drops the straggler instead of closing the connection with
    # amqp:not-allowed (and a WARNING for every client that closes).
    caplog.set_level("DEBUG", logger="amqplink")
    with ServiceBusClient.from_connection_string(broker.connection_string) as own:
        with own.get_queue_sender("q11") as sender:
            sender.send_messages(ServiceBusMessage("one"))
            with own.get_queue_receiver("q11") as receiver:
                (msg,) = receive_n(receiver, 1)
                receiver.complete_message(msg)  # type: ignore[arg-type]
                assert receiver.peek_messages(max_message_count=1) == []
            sender.send_messages(ServiceBusMessage("two"))
        with own.get_queue_receiver("q11") as receiver:
            (msg,) = receive_n(receiver, 1)
            assert str(msg) == "two"
    deadline = time.monotonic() + 10
    while broker._protocols and time.monotonic() < deadline:  # the broker has seen the client go
        time.sleep(0.01)
    assert not broker._protocols
    assert [r.getMessage() for r in caplog.records if "after the peer ended its session" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")], caplog.text
