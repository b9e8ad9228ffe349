"""The peer's dispositions come as one ``DeliveriesUpdated`` per run of a link's deliveries
that one disposition names (in delivery-id order; a run ends where the range passes to a
delivery of another link, so a delivery on its own is a run of one): each event is checked
against a model made from the disposition frames on the wire. The deliveries' states end
as when the peer settles them one disposition each. ``SenderLink.settle_all`` settles as
``settle`` each would, in first..last ranges."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.codec.types import Symbol
from amqplink.engine.events import DeliveriesUpdated
from amqplink.engine.link import RCV_FIRST, RCV_SECOND, SND_UNSETTLED, Delivery, ReceiverLink, SenderLink
from amqplink.protocol.definitions import Accepted, Disposition, Error, Modified, Rejected, Released, Target
from tests import profiles

from .pairs import Pair, performatives

OUTCOMES = [
    Accepted(),
    Released(),
    Modified(delivery_failed=True),
    Rejected(error=Error(condition=Symbol("amqp:internal-error"))),
]


def _updates(taken: list[Any], deliveries: list[Any]) -> list[Any]:
    """(link name, indices in ``deliveries``, state, settled) of each update event, in order."""
    updates: list[Any] = []
    for event in taken:
        if isinstance(event, DeliveriesUpdated):
            assert all(d.link is event.link for d in event.deliveries)
            indices = [deliveries.index(d) for d in event.deliveries]
            updates.append((event.link.name, indices, event.state, event.settled))
    return updates


def _model(dispositions: list[Disposition], deliveries: list[Any]) -> list[Any]:
    """What :func:`_updates` should find: for each disposition, the deliveries its range
    names in delivery-id order, one event per run of one link's."""
    by_id = {d.delivery_id: d for d in deliveries}
    expected: list[Any] = []
    for p in dispositions:
        last = int(p.first if p.last is None else p.last)
        named = [by_id[i] for i in range(int(p.first), last + 1) if i in by_id]
        for link, run in groupby(named, key=lambda d: d.link):
            expected.append((link.name, [deliveries.index(d) for d in run], p.state, bool(p.settled)))
    return expected


def _run(
    apart: bool,
    links: list[int],
    chosen: list[int],
    outcome: int,
    rcv_settle_mode: int,
    auto_settle: bool,
) -> tuple[list[Any], list[Any], list[Any]]:
    """Send on two links of one session in the order ``links`` names, let the peer settle
    the deliveries ``chosen`` (indices) with one outcome (``apart``: one disposition each);
    the update events the sender's side saw, the deliveries' states, and the model of the
    events made from the peer's dispositions."""
    pair = Pair()
    session = pair.open()
    senders: list[SenderLink] = []
    for name in ("a", "b"):
        sender = session.attach_sender(
            name, target=Target(address=name), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=rcv_settle_mode
        )
        sender.auto_settle = auto_settle
        senders.append(sender)
    pair.pump()
    for name in ("a", "b"):
        receiver = pair.server_link(name, sender=False)
        assert isinstance(receiver, ReceiverLink)
        receiver.flow(len(links))
    pair.pump()
    sent = [senders[which].send(bytes([i % 256])) for i, which in enumerate(links)]
    pair.pump()
    received = {bytes(d.tag) + d.link.name.encode(): d for d in pair.deliveries("server")}
    pair.take()
    before = len(pair.wire_s2c)
    for i in chosen:  # queued together: they leave as ranges spanning both links
        delivery = sent[i]
        peer = received[bytes(delivery.tag) + delivery.link.name.encode()]
        peer.link.settle(peer, OUTCOMES[outcome])  # type: ignore[attr-defined]
        if apart:
            pair.pump()
    pair.pump()
    updates = _updates(pair.take(), sent)
    states = [(d.settled, d.remote_settled, d.remote_state, d.state, d.delivery_id) for d in sent]
    return updates, states, _model(performatives(pair.wire_s2c[before:], Disposition), sent)


@settings(profiles.HEAVY, deadline=None)
@given(
    data=st.data(),
    links=st.lists(st.integers(min_value=0, max_value=1), min_size=1, max_size=30),
    outcome=st.integers(min_value=0, max_value=len(OUTCOMES) - 1),
    rcv_settle_mode=st.sampled_from([RCV_FIRST, RCV_SECOND]),
    auto_settle=st.booleans(),
)
def test_a_sender_hears_of_a_range_as_one_event_per_run_of_a_link(
    data: st.DataObject, links: list[int], outcome: int, rcv_settle_mode: int, auto_settle: bool
) -> None:
    chosen = data.draw(st.lists(st.sampled_from(range(len(links))), unique=True, min_size=1))
    updates, states, model = _run(False, links, chosen, outcome, rcv_settle_mode, auto_settle)
    assert updates == model
    assert sorted(i for u in updates for i in u[1]) == sorted(chosen)  # every settled delivery was told of
    apart = _run(True, links, chosen, outcome, rcv_settle_mode, auto_settle)
    assert apart[1] == states  # the same states as one disposition each ...
    assert [u[1] for u in apart[0]] == [[i] for i in chosen]  # ... which are runs of one, in that order


def test_a_range_over_one_link_is_one_event() -> None:
    updates, states, _ = _run(False, [0] * 10, list(range(10)), 0, RCV_SECOND, False)
    assert [u[1] for u in updates] == [list(range(10))]
    # Neither side settled: the outcome is recorded, the deliveries stay unsettled here.
    assert all(not settled and remote_state == Accepted() for settled, _, remote_state, _, _ in states)


def _settled_by(use_all: bool, count: int, chosen: list[int], pre_settled: list[int]) -> tuple[list[Any], list[Any]]:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender(
        "a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
    )
    sender.auto_settle = False
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    receiver.flow(count)
    pair.pump()
    sent = [sender.send(bytes([i]), tag=bytes([i, 7])) for i in range(count)]
    pair.pump()
    for i in pre_settled:
        sender.settle(sent[i], Released())
    pair.pump()
    before = len(pair.wire_c2s)
    picked: list[Delivery] = [sent[i] for i in chosen]
    if use_all:
        sender.settle_all(picked, Accepted())
    else:
        for delivery in picked:
            sender.settle(delivery, Accepted())
    pair.pump()
    states = [(d.settled, d.state, d.delivery_id) for d in sent]
    frames = performatives(pair.wire_c2s[before:], Disposition)
    assert not sender._tags or all(not d.settled for d in sender._tags.values())  # settled tags are free again
    return states, frames


@settings(profiles.HEAVY, deadline=None)
@given(data=st.data(), count=st.integers(min_value=1, max_value=30))
def test_settle_all_settles_as_settle_each_does(data: st.DataObject, count: int) -> None:
    chosen = data.draw(st.permutations(range(count)))[: data.draw(st.integers(min_value=0, max_value=count))]
    pre_settled = data.draw(st.lists(st.sampled_from(range(count)), unique=True))
    assert _settled_by(True, count, chosen, pre_settled) == _settled_by(False, count, chosen, pre_settled)


def test_settle_all_sends_consecutive_ids_as_one_range() -> None:
    _, frames = _settled_by(True, 10, [0, 1, 2, 3, 5, 6, 7], [])
    assert [(int(d.first), None if d.last is None else int(d.last)) for d in frames] == [(0, 3), (5, 7)]
    assert all(d.settled and d.state == Accepted() for d in frames)


# -- the receiver's side: the sender's settlements of a range ------------------------------
def _receive_run(
    apart: bool, links: list[int], settle_first: list[int], chosen: list[int], outcome: int, state: bool
) -> tuple[list[Any], list[Any], list[Any]]:
    """Deliver on two receiver links of one session in the order ``links`` names; this side
    settles ``settle_first`` (rcv-settle-mode second: they wait for the peer), then the peer
    sends one outcome for the deliveries ``chosen`` (settled, or with ``state`` only an
    unsettled state; ``apart``: one disposition each); what the receiving side saw, as
    :func:`_run`."""
    pair = Pair()
    session = pair.open()
    receivers: list[ReceiverLink] = []
    for name in ("a", "b"):
        receiver = session.attach_receiver(
            name, target=Target(address=name), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
        )
        receivers.append(receiver)
    pair.pump()
    senders = []
    for name, receiver in zip(("a", "b"), receivers, strict=True):
        sender = pair.server_link(name, sender=True)
        assert isinstance(sender, SenderLink)
        sender.auto_settle = False
        senders.append(sender)
        receiver.flow(len(links))
    pair.pump()
    sent = [senders[which].send(bytes([i % 256])) for i, which in enumerate(links)]
    pair.pump()
    got = pair.deliveries()
    pair.take()
    assert [d.link.name for d in got] == [d.link.name for d in sent]
    for i in settle_first:
        got[i].link.settle(got[i], Released())  # type: ignore[attr-defined]
    pair.pump()
    before = len(pair.wire_s2c)
    for i in chosen:  # queued together: they leave as ranges spanning both links
        if state:  # role false: the sender speaks
            sent[i].link.session.queue_disposition(False, sent[i].delivery_id, False, OUTCOMES[outcome])
        else:
            sent[i].link.settle(sent[i], OUTCOMES[outcome])  # type: ignore[attr-defined]
        if apart:
            pair.pump()
    pair.pump()
    updates = _updates(pair.take(), got)
    states = [
        (d.settled, d.remote_settled, d.remote_state, d.state, d.delivery_id in d.link.unsettled)  # type: ignore[attr-defined]
        for d in got
    ]
    states.append(sorted(session.incoming_unsettled))
    return updates, states, _model(performatives(pair.wire_s2c[before:], Disposition), got)


@settings(profiles.HEAVY, deadline=None)
@given(
    data=st.data(),
    links=st.lists(st.integers(min_value=0, max_value=1), min_size=1, max_size=30),
    outcome=st.integers(min_value=0, max_value=len(OUTCOMES) - 1),
    state=st.booleans(),
)
def test_a_receiver_hears_of_a_range_as_one_event_per_run_of_a_link(
    data: st.DataObject, links: list[int], outcome: int, state: bool
) -> None:
    chosen = data.draw(st.lists(st.sampled_from(range(len(links))), unique=True, min_size=1))
    settle_first = data.draw(st.lists(st.sampled_from(range(len(links))), unique=True))
    updates, states, model = _receive_run(False, links, settle_first, chosen, outcome, state)
    assert updates == model
    assert sorted(i for u in updates for i in u[1]) == sorted(chosen)
    apart = _receive_run(True, links, settle_first, chosen, outcome, state)
    assert apart[1] == states
    assert [u[1] for u in apart[0]] == [[i] for i in chosen]


def test_a_range_settled_by_the_sender_is_one_event_on_a_receiver() -> None:
    updates, states, _ = _receive_run(False, [0] * 10, list(range(10)), list(range(10)), 0, False)
    assert [u[1] for u in updates] == [list(range(10))]
    # This side settled first (second mode): the peer's settlement ends each delivery here.
    assert all(s == (True, True, Accepted(), Released(), False) for s in states[:-1])
    assert states[-1] == []
