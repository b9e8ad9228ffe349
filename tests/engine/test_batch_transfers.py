"""A sender link with ``batch_transfers`` queues what it sends until the next
``data_to_send`` (or the next other frame of its session, its detach, the session's end,
the connection's close): the same bytes on the wire, events and deliveries as a link that
writes each delivery as it is sent, whatever the credit, the session window, the sizes
and the calls in between."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqplink.engine import errors
from amqplink.engine.connection import ConnectionConfig
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_UNSETTLED, ReceiverLink, SenderLink
from amqplink.protocol.definitions import Accepted, Target

from .pairs import Pair

Op = tuple[str, int, int]  # (what, which link, a number)

# Sends and pumps most often; a detach now and then; credit read before the next
# data_to_send ("credit now", "peer detach": a read between two sends); the session's end or the
# connection's close, when drawn, last (nothing goes out after them).
KINDS = ["send"] * 6 + ["pump"] * 2 + ["send all", "credit", "credit now", "drain", "available", "settle"]
KINDS += ["detach", "peer detach"]
OPS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 1), st.integers(0, 1200)), min_size=3, max_size=40)
LAST = st.sampled_from([[], [("end", 0, 0)], [("close", 0, 0)]])


def _events(events: list[Any]) -> list[str]:
    return [type(e).__name__ + repr(getattr(e, "deliveries", None) or getattr(e, "delivery", "")) for e in events]


def _run(
    batch: tuple[bool, bool], credit: tuple[int, int], ops: list[Op], window: int, rcv_settle_mode: int
) -> dict[str, Any]:
    # Frames of 512 bytes: the larger payloads take two or three transfer frames each.
    pair = Pair(server_config=ConnectionConfig(container_id="server", incoming_window=window, max_frame_size=512))
    session = pair.open()
    senders: list[SenderLink] = []
    for name, batched in zip(("a", "b"), batch, strict=True):
        sender = session.attach_sender(
            name, target=Target(address=name), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=rcv_settle_mode
        )
        sender.batch_transfers = batched
        senders.append(sender)
    pair.pump()
    receivers = [pair.server_link(name, sender=False) for name in ("a", "b")]
    for receiver, granted in zip(receivers, credit, strict=True):
        assert isinstance(receiver, ReceiverLink)
        receiver.flow(granted)
    pair.pump()
    outcomes: list[Any] = []
    for i, (what, which, n) in enumerate(ops):
        sender, receiver = senders[which], receivers[which]
        assert isinstance(receiver, ReceiverLink)
        try:
            if what == "send":
                delivery = sender.send(bytes([i % 256]) * n)
                outcomes.append((delivery.tag, delivery.size))
            elif what == "send all":  # written at once: after the batched sends made before
                made = sender.send_all([bytes(n % 600)] * 2, [b"%d." % i, b"%d!" % i])
                outcomes.append([d.tag for d in made])
            elif what == "pump":
                pair.pump()
            elif what == "credit":
                receiver.flow(n % 9)
            elif what == "credit now":  # read by this side before its next data_to_send
                receiver.flow(n % 9)
                pair.client_events += pair.client.receive_data(pair.server.data_to_send())
            elif what == "peer detach":  # read by this side before its next data_to_send
                receiver.detach()
                pair.client_events += pair.client.receive_data(pair.server.data_to_send())
            elif what == "drain":
                receiver.flow(n % 9, drain=True)
            elif what == "available":
                sender.announce_available(n % 6)
            elif what == "settle":
                receiver.settle_all(list(receiver.unsettled.values()), Accepted())
            elif what == "detach":
                sender.detach()
            elif what == "end":
                session.end()
            else:
                pair.client.close()
        except errors.EngineStateError as exc:
            outcomes.append(str(exc))
        if what == "pump":  # until then a batched delivery waits in the queue, not yet counted
            outcomes.append([(s.credit, s.link_credit, s.delivery_count, len(s.queue)) for s in senders])
    pair.pump()
    return {
        "wire": pair.wire_c2s,
        "client": _events(pair.client_events),
        "server": _events(pair.server_events),
        "received": [(d.link.name, bytes(d.payload)) for d in pair.deliveries("server")],
        "outcomes": outcomes,
        "held": [[(d.tag, d.delivery_id, d.settled) for d in [*s.unsettled.values(), *s.queue]] for s in senders],
    }


@settings(deadline=None)
@example(  # credit taken back (a flow read) between a batched send and data_to_send
    batch=(True, False),
    credit=(0, 0),
    ops=[("credit now", 0, 1), ("send", 0, 0), ("credit now", 0, 0)],
    last=[],
    window=1,
    rcv_settle_mode=RCV_FIRST,
)
@example(  # send_all on the other link between a batched send and data_to_send
    batch=(True, False),
    credit=(1, 2),
    ops=[("send", 0, 900), ("send all", 1, 0)],
    last=[],
    window=2,
    rcv_settle_mode=RCV_FIRST,
)
@given(
    batch=st.tuples(st.booleans(), st.booleans()).filter(any),
    credit=st.tuples(st.integers(0, 10), st.integers(0, 10)),
    ops=OPS,
    last=LAST,
    window=st.integers(1, 12),
    rcv_settle_mode=st.sampled_from([RCV_FIRST, RCV_SECOND]),
)
def test_batched_sends_write_what_immediate_sends_write(
    batch: tuple[bool, bool], credit: tuple[int, int], ops: list[Op], last: list[Op], window: int, rcv_settle_mode: int
) -> None:
    ops = ops + last
    batched = _run(batch, credit, ops, window, rcv_settle_mode)
    assert batched == _run((False, False), credit, ops, window, rcv_settle_mode)


def test_batched_sends_wait_for_data_to_send_and_count_as_output() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED)
    sender.batch_transfers = True
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(10)
    pair.pump()
    before = pair.client.output_size()
    deliveries = [sender.send(bytes(100)) for _ in range(3)]
    assert [d.delivery_id for d in deliveries] == [None, None, None]  # queued, not written
    assert len(sender.queue) == 3 and sender.credit == 7
    assert pair.client.output_size() == before + 300
    pair.pump()
    assert [d.delivery_id for d in deliveries] == [0, 1, 2] and not sender.queue
    assert pair.client.output_size() == 0
    assert len(pair.deliveries("server")) == 3


def _echo_before_data_to_send(batched: bool) -> list[bytes]:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED)
    sender.batch_transfers = batched
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(5)
    pair.pump()
    sender.send(b"x")
    server_session = receiver.session
    server_session._session_flow(echo=True)
    # The peer's echo request is read before this side's next data_to_send.
    pair.client_events += pair.client.receive_data(pair.server.data_to_send())
    pair.pump()
    return pair.wire_c2s


def test_a_session_flow_answered_before_data_to_send_follows_the_batched_transfers() -> None:
    assert _echo_before_data_to_send(True) == _echo_before_data_to_send(False)
