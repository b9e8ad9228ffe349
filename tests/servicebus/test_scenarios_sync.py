"""The blocking clients, one suite for both: ``azure.servicebus`` and ``amqplink.servicebus``
(only the import differs), against the embedded Service Bus broker."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from typing import Any

import pytest

from tests.servicebus.scenario import LOCK, Api, BrokerThread, api, body, broker

__all__ = ["api", "broker"]  # fixtures


def receive_n(receiver: Any, n: int, wait: float = 5.0) -> list[Any]:
    got: list[Any] = []
    while len(got) < n:
        batch = receiver.receive_messages(max_message_count=n - len(got), max_wait_time=wait)
        assert batch, f"only {len(got)} of {n} messages came"
        got += batch
    return got


def test_send_receive_settle(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    with sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("plain") as sender:
            sender.send_messages(sb.ServiceBusMessage("one", application_properties={"k": "v"}))
            sender.send_messages([sb.ServiceBusMessage("two"), sb.ServiceBusMessage("three")])
            batch = sender.create_message_batch()
            batch.add_message(sb.ServiceBusMessage("four"))
            sender.send_messages(batch)
        with client.get_queue_receiver("plain", max_wait_time=1) as receiver:
            msgs = receive_n(receiver, 4)
            assert [body(m) for m in msgs] == [b"one", b"two", b"three", b"four"]
            assert msgs[0].application_properties == {b"k": b"v"}
            receiver.complete_message(msgs[0])
            receiver.abandon_message(msgs[1])
            receiver.dead_letter_message(msgs[2], reason="r", error_description="d")
            seq = msgs[3].sequence_number
            receiver.defer_message(msgs[3])
            (again,) = receive_n(receiver, 1)
            assert str(again) == "two" and again.delivery_count == 1
            receiver.complete_message(again)
            (deferred,) = receiver.receive_deferred_messages([seq])
            receiver.complete_message(deferred)
            assert list(receiver) == []  # iteration ends after max_wait_time without a message
        with client.get_queue_receiver("plain", sub_queue=sb.ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = receive_n(dlq, 1)
            assert (str(dead), dead.dead_letter_reason, dead.dead_letter_error_description) == ("three", "r", "d")
            dlq.complete_message(dead)


def test_session_receiver(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    with sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages([sb.ServiceBusMessage(f"m{i}", session_id="order-7") for i in range(3)])
        with client.get_queue_receiver("sessions", session_id=sb.NEXT_AVAILABLE_SESSION) as receiver:
            assert receiver.session.session_id == "order-7"
            msgs = receive_n(receiver, 3)
            assert [str(m) for m in msgs] == ["m0", "m1", "m2"]
            for m in msgs:
                receiver.complete_message(m)
            receiver.session.set_state("done")
            assert receiver.session.get_state() == b"done"
            assert receiver.session.renew_lock() > dt.datetime.now(dt.UTC)


def _burn_cpu(seconds: float) -> int:
    """A blocking, CPU-bound callback: hashing, never sleeping or yielding."""
    end = time.monotonic() + seconds
    rounds = 0
    digest = b"seed"
    while time.monotonic() < end:
        digest = hashlib.sha256(digest).digest()
        rounds += 1
    return rounds


@pytest.mark.slow  # five lock lifetimes of CPU: 15 s
def test_auto_lock_renewer_outlasts_a_cpu_bound_callback(api: Api, broker: BrokerThread) -> None:
    """The lock (LOCK s) is held 5x its duration while this thread burns CPU without yielding."""
    sb = api.sb
    failures: list[Any] = []
    with sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("locks") as sender:
            sender.send_messages(sb.ServiceBusMessage("long job"))
        renewer = sb.AutoLockRenewer(
            max_lock_renewal_duration=60, on_lock_renew_failure=lambda r, e: failures.append(e)
        )
        with client.get_queue_receiver("locks", auto_lock_renewer=renewer) as receiver:
            (msg,) = receive_n(receiver, 1)
            first_until = msg.locked_until_utc
            assert _burn_cpu(LOCK * 5) > 0
            assert msg.locked_until_utc > first_until + dt.timedelta(seconds=LOCK * 3)
            receiver.complete_message(msg)
            assert failures == [] and msg.auto_renew_error is None
        renewer.close()


def test_auto_lock_renewer_stops_after_its_duration(api: Api, broker: BrokerThread) -> None:
    sb = api.sb
    called = threading.Event()
    with sb.ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("expiring") as sender:
            sender.send_messages(sb.ServiceBusMessage("short"))
        renewer = sb.AutoLockRenewer(max_lock_renewal_duration=0.5, on_lock_renew_failure=lambda r, e: called.set())
        with client.get_queue_receiver("expiring", auto_lock_renewer=renewer) as receiver:
            (msg,) = receive_n(receiver, 1)
            deadline = time.monotonic() + 10
            while msg.auto_renew_error is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert isinstance(msg.auto_renew_error, api.exceptions.AutoLockRenewTimeout)
            with pytest.raises(api.exceptions.MessageLockLostError):
                time.sleep(1.5)  # the lock (1 s) is no longer renewed
                receiver.complete_message(msg)
        renewer.close()
        assert not called.is_set()  # a renewal that ran its course is not a failure
