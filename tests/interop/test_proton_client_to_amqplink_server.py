"""qpid-proton's client against amqplink's engine in the server role (the embedded broker)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from proton import Condition, Delivery, Link, symbol
from proton import Message as PMessage
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container
from proton.utils import BlockingConnection

from amqplink import Message
from amqplink.broker import Broker
from amqplink.codec.types import Symbol
from amqplink.protocol.definitions import Modified, Rejected


def _link_name() -> str:
    return f"proton-{uuid.uuid4()}"


def test_proton_sends_and_receives_through_the_embedded_broker(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("q", name=_link_name())
        for i in range(50):
            sender.send(
                PMessage(
                    body=f"m{i}".encode(),
                    inferred=True,
                    id=f"id-{i}",
                    subject="s",
                    group_id="g",
                    properties={"i": i},
                    annotations={"x-opt-partition-key": "pk"},
                )
            )
        receiver = conn.create_receiver("q", name=_link_name(), credit=10)
        for i in range(50):
            got = receiver.receive(timeout=10)
            assert bytes(got.body) == f"m{i}".encode()
            assert got.id == f"id-{i}" and got.subject == "s" and got.group_id == "g"
            assert got.properties == {"i": i} and got.annotations == {"x-opt-partition-key": "pk"}
            receiver.accept()
        assert len(embedded_broker.queue("q")) == 0
    finally:
        conn.close()


def test_proton_release_is_redelivered_and_presettled_sends_arrive(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("r", name=_link_name(), options=AtMostOnce())
        sender.send(PMessage(body=b"once", inferred=True))
        sender.send(PMessage(body=b"twice", inferred=True))
        receiver = conn.create_receiver("r", name=_link_name(), credit=1)
        first = receiver.receive(timeout=10)
        assert bytes(first.body) == b"once"
        receiver.release()
        again = receiver.receive(timeout=10)
        assert bytes(again.body) in (b"once", b"twice")
        receiver.accept()
        last = receiver.receive(timeout=10)
        receiver.accept()
        assert {bytes(again.body), bytes(last.body)} == {b"once", b"twice"}
    finally:
        conn.close()


def test_one_mebibyte_from_proton_is_reassembled_by_the_engine(embedded_broker: Broker) -> None:
    body = bytes(range(256)) * 4096
    conn = BlockingConnection(embedded_broker.url, timeout=20)
    try:
        conn.create_sender("big", name=_link_name()).send(PMessage(body=body, inferred=True))
    finally:
        conn.close()
    [payload] = embedded_broker.queue("big").messages
    message = Message.decode(payload)
    assert message.body == body


class _Bounded(MessagingHandler):
    """A Container handler whose run ends when its connection closes, or fails after ``DEADLINE`` s."""

    DEADLINE = 30.0
    timed_out = False

    def _arm(self, container: Any) -> None:
        container.schedule(self.DEADLINE, self)

    def on_timer_task(self, event: Any) -> None:
        self.timed_out = True
        event.container.stop()

    def on_connection_closed(self, event: Any) -> None:
        event.container.stop()  # both closes are through: do not wait for the deadline timer

    def run(self) -> None:
        Container(self).run()
        assert not self.timed_out, f"{type(self).__name__} did not finish within {self.DEADLINE} s"


class _PipelinedSender(_Bounded):
    """Sends ``total`` messages as fast as credit allows; counts the outcomes."""

    def __init__(self, url: str, address: str, total: int) -> None:
        super().__init__()
        self.url, self.address, self.total = url, address, total
        self.sent = 0
        self.outcomes: Counter[str] = Counter()

    def on_start(self, event: Any) -> None:
        self._arm(event.container)
        event.container.create_sender(event.container.connect(self.url), self.address, name=_link_name())

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        while sender.credit and self.sent < self.total:
            sender.send(PMessage(body=self.sent.to_bytes(4, "big"), inferred=True, id=self.sent))
            self.sent += 1

    def _count(self, event: Any, outcome: str) -> None:
        self.outcomes[outcome] += 1
        if sum(self.outcomes.values()) == self.total:
            event.connection.close()

    def on_accepted(self, event: Any) -> None:
        self._count(event, "accepted")

    def on_rejected(self, event: Any) -> None:
        self._count(event, "rejected")

    def on_released(self, event: Any) -> None:
        self._count(event, "released")


class _Consumer(_Bounded):
    """Receives ``total`` messages with a credit window (0: one credit at a time).

    ``settle(delivery, body, n)`` settles each message itself (``n``: how often this
    body was seen before); without it, proton accepts each one.
    """

    def __init__(
        self,
        url: str,
        address: str,
        total: int,
        settle: Callable[[Any, bytes, int], None] | None = None,
        window: int = 0,
    ) -> None:
        super().__init__(prefetch=window, auto_accept=settle is None)
        self.url, self.address, self.total, self.settle_with, self.window = url, address, total, settle, window
        self.bodies: list[bytes] = []
        self.ids: list[Any] = []

    def on_start(self, event: Any) -> None:
        self._arm(event.container)
        receiver = event.container.create_receiver(event.container.connect(self.url), self.address, name=_link_name())
        if not self.window:
            receiver.flow(1)

    def on_message(self, event: Any) -> None:
        body = bytes(event.message.body)
        if self.settle_with is not None:
            self.settle_with(event.delivery, body, self.bodies.count(body))
        self.bodies.append(body)
        self.ids.append(event.message.id)
        if len(self.bodies) == self.total:
            event.connection.close()
        elif not self.window:
            event.receiver.flow(1)


def test_ten_thousand_pipelined_from_a_proton_container_sender(embedded_broker: Broker) -> None:
    total = 10_000
    sender = _PipelinedSender(embedded_broker.url, "bulk", total)
    sender.run()
    assert sender.outcomes == {"accepted": total}
    stored = [Message.decode(p) for p in embedded_broker.queue("bulk").messages]
    assert [int.from_bytes(m.body, "big") for m in stored] == list(range(total))
    assert [m.message_id for m in stored] == list(range(total))
    consumer = _Consumer(embedded_broker.url, "bulk", total, window=500)
    consumer.run()
    assert [int.from_bytes(b, "big") for b in consumer.bodies] == list(range(total))
    assert consumer.ids == list(range(total))
    assert len(embedded_broker.queue("bulk")) == 0


def test_presettled_proton_receiver_gets_at_most_once(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("amo", name=_link_name())
        for i in range(20):
            sender.send(PMessage(body=bytes([i]), inferred=True))
        receiver = conn.create_receiver("amo", name=_link_name(), credit=20, options=AtMostOnce())
        assert receiver.link.remote_snd_settle_mode == Link.SND_SETTLED  # the engine answered settled
        # Keep each Message alive while reading its body: proton's memoryview points into it.
        messages = [receiver.receive(timeout=10) for _ in range(20)]
        assert [bytes(m.body) for m in messages] == [bytes([i]) for i in range(20)]
        receiver.close()  # nothing was settled by proton, and nothing comes back
        assert len(embedded_broker.queue("amo")) == 0
    finally:
        conn.close()


def test_proton_receiver_outcomes_reach_the_embedded_broker(embedded_broker: Broker) -> None:
    conn = BlockingConnection(embedded_broker.url, timeout=10)
    try:
        sender = conn.create_sender("outcomes", name=_link_name())
        for body in (b"a", b"b", b"c"):
            sender.send(PMessage(body=body, inferred=True))
    finally:
        conn.close()

    def settle(delivery: Any, body: bytes, seen: int) -> None:
        local = delivery.local
        if body == b"a" and seen == 0:  # modified, may come back here: redelivered
            local.failed = True
            delivery.update(Delivery.MODIFIED)
        elif body == b"a":  # modified, not here: dead-lettered
            local.failed = True
            local.undeliverable = True
            delivery.update(Delivery.MODIFIED)
        elif body == b"b":  # rejected with an error: dead-lettered
            local.condition = Condition("app:bad", "cannot parse", {symbol("line"): 3})
            delivery.update(Delivery.REJECTED)
        elif seen == 0:  # c, released: redelivered
            delivery.update(Delivery.RELEASED)
        else:
            delivery.update(Delivery.ACCEPTED)
        delivery.settle()

    consumer = _Consumer(embedded_broker.url, "outcomes", 5, settle)
    consumer.run()
    # proton writes a flow before the disposition it settles with, so a redelivered
    # message may come after the next one; each body's own history is what counts.
    assert sorted(consumer.bodies) == [b"a", b"a", b"b", b"c", b"c"]
    queue = embedded_broker.queue("outcomes")
    assert len(queue) == 0
    dead = {Message.decode(payload).body: state for payload, state in queue.dead_letters}
    assert set(dead) == {b"a", b"b"}
    rejected, modified = dead[b"b"], dead[b"a"]
    assert isinstance(rejected, Rejected) and rejected.error is not None
    assert str(rejected.error.condition) == "app:bad" and rejected.error.description == "cannot parse"
    assert rejected.error.info == {Symbol("line"): 3}
    assert isinstance(modified, Modified) and modified.undeliverable_here and modified.delivery_failed
