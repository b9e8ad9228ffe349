"""The blocking facade: same API over the per-process event-loop thread."""

from __future__ import annotations

import threading

import pytest

from amqplink import Message, sync
from amqplink.aio import LinkDetachedError
from amqplink.broker import Broker
from amqplink.protocol.definitions import Accepted
from tests.receiving import receive_exactly_sync


@pytest.fixture()
def broker_url(embedded_broker: Broker) -> str:
    return embedded_broker.url


def test_sync_send_receive_accept(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("q")
        assert isinstance(sender.send(Message(b"a")), Accepted)
        outcomes = sender.send_many(Message(bytes([i % 256])) for i in range(2500))
        assert len(outcomes) == 2500 and all(isinstance(o, Accepted) for o in outcomes)
        future = sender.send_nowait(b"last")
        assert isinstance(future.result(10), Accepted)
        receiver = conn.create_receiver("q", mode="peek-lock", prefetch=100)
        got = []
        for message in receiver:
            got.append(message)
            receiver.accept(message)
            if len(got) == 2502:
                break
        assert got[0].body == b"a" and got[-1].body == b"last"
        assert [m.body for m in got[1:-1]] == [bytes([i % 256]) for i in range(2500)]
        assert receiver.receive(1, timeout=0.1) == []


def test_sync_is_usable_from_several_threads(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("threads")
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                for i in range(200):
                    sender.send(Message(f"{k}-{i}".encode()))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        receiver = conn.create_receiver("threads", mode="receive-and-delete", prefetch=1000)
        bodies = {m.body for m in receive_exactly_sync(receiver, 800, accept=False, batch=800, timeout=5)}
        assert bodies == {f"{k}-{i}".encode() for k in range(4) for i in range(200)}


def test_sync_errors_cross_the_thread_typed(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        with pytest.raises(LinkDetachedError) as info:
            conn.create_sender(None)  # the broker refuses a sender without a target
        assert info.value.condition == "amqp:not-found"
        with pytest.raises(ValueError, match="max_in_flight"):
            conn.create_sender("q", max_in_flight=0)
        assert not conn.closed


def test_the_sync_facade_encodes_bodies_as_message_does(broker_url: str) -> None:
    with sync.connect(broker_url) as conn:
        sender = conn.create_sender("q")
        assert isinstance(sender.send("hello"), Accepted)
        assert isinstance(sender.send_nowait({"k": "v"}).result(10), Accepted)
        assert all(isinstance(o, Accepted) for o in sender.send_many([None, 7, b"x"]))
        receiver = conn.create_receiver("q")
        got = receive_exactly_sync(receiver, 5)
        assert receiver.aio.decode_failures == 0
        assert [m.body for m in got] == ["hello", {"k": "v"}, None, 7, b"x"]
