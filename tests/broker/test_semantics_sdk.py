"""Where the embedded broker follows Service Bus as the official azure-servicebus SDK sees it
(issue 24, C.3, C.4, C.5). The documented behaviour is quoted in each test."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

from amqplink.broker import Broker
from amqplink.broker.config import (
    BrokerConfig,
    EntityProperties,
    NamespaceConfig,
    QueueConfig,
    SubscriptionConfig,
    TopicConfig,
)
from tests.broker.sdkutil import running_broker

pytestmark = pytest.mark.sdk

HOUR = 3600.0
CONFIG = BrokerConfig(
    (
        NamespaceConfig(
            queues=(
                QueueConfig("hourly", EntityProperties(default_message_ttl=HOUR)),
                QueueConfig("src", EntityProperties(forward_to="dst")),
                QueueConfig("dst"),
            ),
            topics=(
                TopicConfig(
                    "t",
                    subscriptions=(
                        SubscriptionConfig("plain"),
                        SubscriptionConfig("sessions", EntityProperties(requires_session=True)),
                    ),
                ),
            ),
        ),
    )
)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG) as running:
        yield running


def test_time_to_live_as_received_is_the_one_in_force(broker: Broker) -> None:
    """Service Bus (``ServiceBusMessage.time_to_live``): "When not set explicitly, the
    assumed value is the DefaultTimeToLive for the respective queue or topic. A
    message-level time-to-live value cannot be longer than the entity's time-to-live
    setting and it is silently adjusted if it does." ``expires_at_utc`` is enqueued time
    plus that time to live."""
    sent = {
        "none": None,
        "longer": datetime.timedelta(hours=2),
        "shorter": datetime.timedelta(minutes=10),
    }
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("hourly") as sender:
            for name, ttl in sent.items():
                message = ServiceBusMessage(name, message_id=name)
                if ttl is not None:
                    message.time_to_live = ttl
                sender.send_messages(message)
        with client.get_queue_receiver("hourly", max_wait_time=5) as receiver:
            got = {}
            while len(got) < len(sent):
                batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                assert batch, f"only {sorted(got)} arrived"
                for message in batch:
                    got[message.message_id] = message
                    receiver.complete_message(message)
    expected = {"none": HOUR, "longer": HOUR, "shorter": 600.0}
    for name, seconds in expected.items():
        message = got[name]
        assert message.time_to_live == datetime.timedelta(seconds=seconds), name
        assert message.enqueued_time_utc is not None
        assert message.expires_at_utc == message.enqueued_time_utc + datetime.timedelta(seconds=seconds), name


def test_a_topic_send_without_session_id_is_dead_lettered_in_the_session_subscription(broker: Broker) -> None:
    """Service Bus's dead-letter queue overview: reason ``Session ID is null.``, "Session
    enabled entity doesn't allow a message whose session identifier is null." The send
    succeeds; the subscriptions that do not require sessions get the message."""
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_topic_sender("t") as sender:
            sender.send_messages(ServiceBusMessage("no session", message_id="nos"))  # not refused
        with client.get_subscription_receiver("t", "plain", max_wait_time=5) as receiver:
            (plain,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert plain.message_id == "nos"
            receiver.complete_message(plain)
        with client.get_subscription_receiver(
            "t", "sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
        ) as receiver:
            (dead,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert dead.message_id == "nos"
            assert dead.dead_letter_reason == "Session ID is null."
            assert dead.dead_letter_error_description == (
                "Session enabled entity doesn't allow a message whose session identifier is null."
            )
            receiver.complete_message(dead)


def test_a_receiver_on_a_forwarding_queue_is_refused(broker: Broker) -> None:
    """Service Bus (``ForwardTo``): "After you set this property on a queue, messages cannot
    be directly received from that queue." What is sent to it arrives in its destination."""
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("src") as sender:
            sender.send_messages(ServiceBusMessage("forwarded"))
        with (
            pytest.raises(ServiceBusError, match="auto-forwarding enabled"),
            client.get_queue_receiver("src", max_wait_time=2) as refused,
        ):
            refused.receive_messages(max_message_count=1, max_wait_time=2)
        with client.get_queue_receiver("dst", max_wait_time=5) as receiver:
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(message) == "forwarded"
            receiver.complete_message(message)


def test_entities_made_over_http_come_back_after_a_restart_with_a_configuration(tmp_path: object) -> None:
    """A broker with ``--config`` and ``--data-dir``: a queue and a subscription (of a
    configured topic) made with the SDK's administration client come back on start, with
    the messages they held; the configured queue stays as the configuration says."""
    from tests.broker.http.test_admin_sdk import admin

    for run in range(2):
        with running_broker(CONFIG, http_port=0, data_dir=tmp_path) as durable, admin(durable) as client:
            if run == 0:
                client.create_queue("made-at-run-time", max_delivery_count=4)
                client.create_subscription("t", "late")
                with ServiceBusClient.from_connection_string(durable.connection_string) as sb:
                    with sb.get_queue_sender("made-at-run-time") as sender:
                        sender.send_messages(ServiceBusMessage("kept"))
                    with sb.get_topic_sender("t") as sender:
                        sender.send_messages(ServiceBusMessage("fanned", session_id="s"))
                continue
            assert client.get_queue("made-at-run-time").max_delivery_count == 4
            assert client.get_queue_runtime_properties("made-at-run-time").active_message_count == 1
            assert client.get_subscription_runtime_properties("t", "late").active_message_count == 1
            assert client.get_queue("dst").max_delivery_count == 10  # as configured


def test_a_message_scheduled_on_a_forwarding_queue_is_forwarded_when_due(broker: Broker) -> None:
    """Service Bus forwards what reaches a ``ForwardTo`` queue; a scheduled message reaches it
    when it comes due (before: it stayed in the forwarding queue, where no receiver may go)."""
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("src") as sender:
            due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
            (seq,) = sender.schedule_messages(ServiceBusMessage("scheduled", message_id="sched"), due)
            assert seq > 0
        with client.get_queue_receiver("dst", max_wait_time=10) as receiver:
            got = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert [m.message_id for m in got] == ["sched"]
            assert got[0].enqueued_time_utc is not None and got[0].enqueued_time_utc >= due.replace(microsecond=0)
            receiver.complete_message(got[0])
