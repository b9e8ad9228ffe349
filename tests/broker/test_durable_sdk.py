"""The official SDK against ``Broker(config, data_dir=...)``, stopped and started again on
the same directory: what it did through ``$management`` and settlements is still there."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue

from amqplink.broker.config import parse_config
from tests.broker.sdkutil import running_broker
from tests.broker.test_sdk import CONFIG, receive_n, send


def test_a_restarted_broker_keeps_what_the_sdk_did(tmp_path: Path) -> None:
    config = parse_config(CONFIG)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with (
        running_broker(config, data_dir=tmp_path) as broker,
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
    ):
        send(client, "q0", [ServiceBusMessage(f"m{i}") for i in range(3)])
        with client.get_queue_receiver("q0") as receiver:
            done, deferred, poison = receive_n(receiver, 3)
            receiver.complete_message(done)  # type: ignore[arg-type]
            receiver.defer_message(deferred)  # type: ignore[arg-type]
            receiver.dead_letter_message(poison, reason="bad-input")  # type: ignore[arg-type]
        with client.get_queue_sender("q1") as sender:
            (scheduled,) = sender.schedule_messages(ServiceBusMessage("in an hour"), later)
        send(client, "sessions", ServiceBusMessage("s", session_id="s1"))
        with client.get_queue_receiver("sessions", session_id="s1") as session_receiver:
            assert session_receiver.session is not None
            session_receiver.session.set_state(b"halfway")
        send(client, "dedup", ServiceBusMessage("once", message_id="dup-1"))
    with (
        running_broker(config, data_dir=tmp_path) as broker,
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
    ):
        with client.get_queue_receiver("q0") as receiver:
            assert receiver.receive_messages(max_wait_time=0.5) == []  # completed stays completed
            (back,) = receiver.receive_deferred_messages([deferred.sequence_number])  # type: ignore[attr-defined]
            assert str(back) == "m1"
            receiver.complete_message(back)
        with client.get_queue_receiver("q0", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = receive_n(dlq, 1)
            assert str(dead) == "m2" and dead.dead_letter_reason == "bad-input"  # type: ignore[attr-defined]
        with client.get_queue_receiver("q1") as receiver:
            (peeked,) = receiver.peek_messages(max_message_count=5)
            assert peeked.sequence_number == scheduled and str(peeked) == "in an hour"
        with client.get_queue_receiver("sessions", session_id="s1") as session_receiver:
            assert session_receiver.session is not None
            assert session_receiver.session.get_state() == b"halfway"
        send(client, "dedup", ServiceBusMessage("twice", message_id="dup-1"))
        mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
        with client.get_queue_receiver("dedup", receive_mode=mode, max_wait_time=1) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_message_count=5, max_wait_time=1)] == ["once"]
        send(client, "q0", ServiceBusMessage("new"))
        with client.get_queue_receiver("q0", receive_mode=mode) as receiver:
            (new,) = receive_n(receiver, 1)
            assert new.sequence_number > poison.sequence_number  # type: ignore[attr-defined]
