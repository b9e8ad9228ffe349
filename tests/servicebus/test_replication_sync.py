"""The blocking replication API against two embedded namespaces: the passive sender swaps
on the wire's outage conditions only; both failing keeps the roles; the active sender
goes on with one namespace; the de-duplicating receiver yields each id once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from amqplink.broker import Broker
from amqplink.broker.faults import INTERNAL_ERROR, SERVER_BUSY
from amqplink.servicebus import (
    ActiveReplicationSender,
    DeduplicatingReceiver,
    Deduplicator,
    PassiveReplicationSender,
    ReplicationError,
    ServiceBusClient,
    ServiceBusMessage,
)
from amqplink.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusServerBusyError
from tests.broker.sdkutil import running_broker
from tests.servicebus.replication_util import CLIENT_OPTIONS, QUEUE, Namespace

T = TypeVar("T")

Pair = tuple[Broker, Broker, ServiceBusClient, ServiceBusClient]


@contextmanager
def two_namespaces() -> Iterator[Pair]:
    with ExitStack() as stack:
        first = stack.enter_context(running_broker(keys={"RootManageSharedAccessKey": "k1"}))
        second = stack.enter_context(running_broker(keys={"RootManageSharedAccessKey": "k2"}))
        clients = [
            stack.enter_context(ServiceBusClient.from_connection_string(b.connection_string, **CLIENT_OPTIONS))
            for b in (first, second)
        ]
        yield first, second, clients[0], clients[1]


def _stored(broker: Broker) -> int:
    queues = broker.namespace.queues
    return len(queues[QUEUE].store) if QUEUE in queues else 0


def test_passive_swaps_on_internal_error_not_on_server_busy() -> None:
    with two_namespaces() as (first, second, ca, cb):
        a, b = ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE)
        sender = PassiveReplicationSender(a, b)
        busy = first.faults.run(first.faults.entity_unavailable, QUEUE, condition=SERVER_BUSY)
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("busy", message_id="busy"))
        assert sender.active is a and sender.counters.swaps == 0 and _stored(second) == 0
        first.faults.run(first.faults.clear, busy)
        first.faults.run(first.faults.entity_unavailable, QUEUE, condition=INTERNAL_ERROR)
        sender.send_messages(ServiceBusMessage("failed over", message_id="m1"))
        assert sender.active is b and sender.backup is a and sender.counters.swaps == 1
        assert (_stored(first), _stored(second)) == (0, 1)
        sender.close()


def test_passive_both_failing_keeps_the_roles_and_raises() -> None:
    with two_namespaces() as (first, second, ca, cb):
        a, b = ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE)
        sender = PassiveReplicationSender(a, b)
        faults = [
            ns.faults.run(ns.faults.entity_unavailable, QUEUE, condition=INTERNAL_ERROR) for ns in (first, second)
        ]
        with pytest.raises(ReplicationError) as raised:
            sender.send_messages(ServiceBusMessage("nowhere"))
        assert [e.condition for e in raised.value.errors] == [INTERNAL_ERROR, INTERNAL_ERROR]
        assert sender.active is a and sender.counters.swaps == 0 and sender.counters.failed == 1
        for ns, fault in zip((first, second), faults, strict=True):
            ns.faults.run(ns.faults.clear, fault)
        sender.send_messages(ServiceBusMessage("primary again"))
        assert (_stored(first), _stored(second)) == (1, 0)
        sender.close()


def test_passive_does_not_swap_on_an_authentication_error() -> None:
    with (
        running_broker(keys={"RootManageSharedAccessKey": "k1"}, require_auth=True) as first,
        running_broker(keys={"RootManageSharedAccessKey": "k2"}) as second,
    ):
        wrong = first.connection_string.replace("SharedAccessKey=k1", "SharedAccessKey=wrong")
        with (
            ServiceBusClient.from_connection_string(wrong, **CLIENT_OPTIONS) as ca,
            ServiceBusClient.from_connection_string(second.connection_string, **CLIENT_OPTIONS) as cb,
        ):
            a = ca.get_queue_sender(QUEUE)
            sender = PassiveReplicationSender(a, cb.get_queue_sender(QUEUE))
            with pytest.raises(ServiceBusAuthenticationError) as raised:
                sender.send_messages(ServiceBusMessage("refused"))
            assert "wrong" not in str(raised.value)  # the key never in an error
            assert sender.active is a and _stored(second) == 0


def test_active_goes_on_with_one_namespace_and_the_receiver_yields_each_id_once() -> None:
    with two_namespaces() as (first, second, ca, cb):
        sender = ActiveReplicationSender(ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE))
        sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(20)])
        down = first.faults.run(first.faults.entity_unavailable, QUEUE, condition=INTERNAL_ERROR)
        sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(20, 30)])
        assert sender.degraded == (0,) and sender.counters.sent_to_one == 1
        first.faults.run(first.faults.clear, down)
        assert (_stored(first), _stored(second)) == (20, 30)

        yielded: Counter[str] = Counter()
        receivers = [c.get_queue_receiver(QUEUE) for c in (ca, cb)]
        with DeduplicatingReceiver(receivers, deduplicator=Deduplicator(), max_wait_time=0.5) as receiver:
            deadline = time.monotonic() + 30
            while yielded.total() + receiver.duplicates_removed < 50:
                assert time.monotonic() < deadline, f"only {yielded.total()} yielded"
                for message in receiver.receive_messages(10):
                    yielded[str(message.message_id)] += 1
                    receiver.complete_message(message)
            assert receiver.duplicates_removed == 20
        assert yielded == Counter({f"m{i}": 1 for i in range(30)})
        assert _stored(first) == _stored(second) == 0


@contextmanager
def broker_loop() -> Iterator[Callable[[Coroutine[Any, Any, T]], T]]:
    """An event loop in a thread for brokers that are killed and restarted; runs a coroutine there."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="brokers", daemon=True)
    thread.start()
    try:
        yield lambda coro: asyncio.run_coroutine_threadsafe(coro, loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _stored_of(ns: Namespace) -> int:
    return ns.stored()


def test_blocking_passive_and_consumer_restart_with_a_namespace_killed(tmp_path: Path) -> None:
    with broker_loop() as run:
        first = run(Namespace(tmp_path / "primary", "k1").start())
        second = run(Namespace(tmp_path / "secondary", "k2").start())
        ids = [f"m{i}" for i in range(90)]
        try:
            with (
                ServiceBusClient.from_connection_string(first.connection_string, **CLIENT_OPTIONS) as ca,
                ServiceBusClient.from_connection_string(second.connection_string, **CLIENT_OPTIONS) as cb,
            ):
                a, b = ca.get_queue_sender(QUEUE), cb.get_queue_sender(QUEUE)
                with PassiveReplicationSender(a, b) as sender:
                    for i, message_id in enumerate(ids):
                        if i == 30:
                            run(first.kill())
                        if i == 60:
                            run(first.start())
                        sender.send_messages(ServiceBusMessage(message_id, message_id=message_id))
                    assert sender.active is b and sender.counters.swaps == 1
                assert (run(_stored_of(first)), run(_stored_of(second))) == (30, 60)

                yielded: Counter[str] = Counter()
                path = tmp_path / "dedup.sqlite"
                for stop_at in (45, len(ids)):  # a consumer stops midway; the next one uses the same file
                    receivers = [c.get_queue_receiver(QUEUE) for c in (ca, cb)]
                    with (
                        Deduplicator(path=path) as dedup,
                        DeduplicatingReceiver(receivers, deduplicator=dedup, max_wait_time=0.5) as receiver,
                    ):
                        deadline = time.monotonic() + 30
                        while len(yielded) < stop_at:
                            assert time.monotonic() < deadline, f"only {len(yielded)} yielded"
                            for message in receiver.receive_messages(5):
                                yielded[str(message.message_id)] += 1
                                receiver.complete_message(message)
                assert yielded == Counter(ids)
        finally:
            for ns in (first, second):
                if ns.broker is not None:
                    run(ns.kill())
