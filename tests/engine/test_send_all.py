"""``SenderLink.send_all`` queues what ``send(payload, tag=tag, settled=False)`` each would:
the same deliveries, frames and errors, whatever the credit, the session window and the
receiver's max-message-size allow (and ``Session.write_deliveries`` writes a run of
single- and multi-frame deliveries as one at a time did, stopping part-way as the window
closes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine import errors
from amqplink.engine.link import SND_SETTLED, SND_UNSETTLED
from amqplink.protocol.definitions import Target
from tests import profiles

from .pairs import Pair, unsettled_link


def _send(
    together: bool, sizes: list[int], tags: list[bytes], credit: int, window: int, limit: int
) -> tuple[list[Any], list[Any], Any]:
    # Frames of 512 bytes: the larger payloads take two or three transfer frames each.
    pair, _, sender, receiver = unsettled_link(window, 512)
    sender.peer_max_message_size = limit  # as the receiver's attach would have told
    receiver.flow(credit)
    pair.pump()
    payloads = [bytes([i % 256]) * size for i, size in enumerate(sizes)]
    made: list[Any] = []
    error: Any = None
    try:
        if together:
            made = sender.send_all(payloads, tags)
            for payload, tag in list(zip(payloads, tags, strict=True))[len(made) :]:
                made.append(sender.send(payload, tag=tag, settled=False))  # from the one send_all stopped before
        else:
            for payload, tag in zip(payloads, tags, strict=True):
                made.append(sender.send(payload, tag=tag, settled=False))
    except (errors.EngineStateError, errors.MessageSizeExceededError) as exc:
        error = (type(exc), str(exc))
    pair.pump()
    receiver.flow(len(sizes))  # the rest of what was queued
    pair.pump()
    got = [(bytes(d.tag), bytes(d.payload)) for d in pair.deliveries("server")]
    if error is None:
        assert [d.tag for d in made] == tags
        assert all(type(d.tag) is bytes for d in made)
        assert got == list(zip(tags, payloads, strict=True))  # all of them, whole, in order
    # What the link holds (an error part-way leaves the deliveries before it queued).
    kept = [(d.tag, d.delivery_id, d.settled, d.size) for d in [*sender.unsettled.values(), *sender.queue]]
    return got, kept, error


@settings(profiles.HEAVY, deadline=None)
@given(
    data=st.data(),
    sizes=st.lists(st.integers(min_value=0, max_value=1200), min_size=1, max_size=25),
    credit=st.integers(min_value=0, max_value=30),
    window=st.integers(min_value=1, max_value=30),
    limit=st.sampled_from([0, 900]),
)
def test_send_all_sends_as_send_each_does(
    data: st.DataObject, sizes: list[int], credit: int, window: int, limit: int
) -> None:
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))  # send_all copies all but bytes, as send
    tags: list[Any] = [kind(bytes([i, 1])) for i in range(len(sizes))]
    if len(sizes) > 1 and data.draw(st.booleans()):  # a tag in use: an error part-way through
        tags[data.draw(st.integers(min_value=1, max_value=len(sizes) - 1))] = tags[0]
    together = _send(True, sizes, tags, credit, window, limit)
    assert together == _send(False, sizes, tags, credit, window, limit)


def test_send_all_stops_before_a_tag_in_use_or_too_long() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED)
    pair.pump()
    assert [d.tag for d in sender.send_all([b"1", b"2", b"3"], [b"a", b"b", b"a"])] == [b"a", b"b"]
    assert [d.tag for d in sender.send_all([b"4", b"5"], [b"c", bytes(33)])] == [b"c"]
    with pytest.raises(errors.EngineStateError, match="already in use"):
        sender.send(b"3", tag=b"a", settled=False)
    with pytest.raises(ValueError, match="at most 32"):
        sender.send(b"5", tag=bytes(33), settled=False)
    assert [d.tag for d in sender.queue] == [b"a", b"b", b"c"]  # no credit yet: all three wait


def test_send_all_stops_before_a_payload_too_large() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED)
    pair.pump()
    sender.peer_max_message_size = 10
    made = sender.send_all([b"1", b"2", bytes(11), b"4"], [b"a", b"b", b"c", b"d"])
    assert [d.tag for d in made] == [b"a", b"b"]
    with pytest.raises(errors.MessageSizeExceededError):
        sender.send(bytes(11), tag=b"c", settled=False)


def test_send_all_refuses_a_link_that_sends_settled() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_SETTLED)
    pair.pump()
    with pytest.raises(errors.EngineStateError, match="snd-settle-mode settled"):
        sender.send_all([b"x"], [b"t"])
    assert not sender.queue


def test_send_all_on_a_detached_link_raises_as_send_does() -> None:
    pair = Pair()
    session = pair.open()
    sender = session.attach_sender("a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED)
    pair.pump()
    sender.detach()
    with pytest.raises(errors.EngineStateError) as together:
        sender.send_all([b"x"], [b"t"])
    with pytest.raises(errors.EngineStateError) as each:
        sender.send(b"x", tag=b"t", settled=False)
    assert str(together.value) == str(each.value)
