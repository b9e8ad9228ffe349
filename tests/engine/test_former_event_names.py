"""The one-delivery events' names and the flags that chose them, kept one release: the
names are the run classes (importing them warns), ``event.delivery`` is the delivery of a
run of one and fails loudly on a longer run, and the flags change nothing."""

from __future__ import annotations

import importlib

import pytest

from amqplink.engine import events
from amqplink.engine.errors import RunOfManyError
from amqplink.engine.events import DeliveriesReceived, DeliveriesUpdated, Event
from amqplink.protocol.definitions import Accepted

from .pairs import Pair, received_in, unsettled_link


@pytest.mark.parametrize(
    ("former", "run"), [("DeliveryReceived", DeliveriesReceived), ("DeliveryUpdated", DeliveriesUpdated)]
)
def test_a_former_name_is_the_run_class_and_warns(former: str, run: type) -> None:
    with pytest.warns(DeprecationWarning, match=f"{former} is {run.__name__}"):
        assert getattr(importlib.import_module("amqplink.engine.events"), former) is run
    with pytest.raises(AttributeError):
        events.DeliveryAborts  # type: ignore[attr-defined]  # noqa: B018  (only the two former names)


def _sent(count: int, *, flags: bool | None = None) -> tuple[Pair, list[Event], list[Event]]:
    """``count`` messages sent in one go and accepted in one go: the receiver's and the sender's events."""
    pair, _, sender, receiver = unsettled_link(window=100, max_frame_size=4096)
    if flags is not None:
        receiver.deliver_in_runs = flags
        sender.ranged_updates = flags
    receiver.flow(count)
    pair.pump()
    for i in range(count):
        sender.send(bytes([i]))
    pair.pump()
    received = pair.take("server")
    receiver.settle_all(received_in(received), Accepted())
    pair.pump()
    return pair, received, pair.take()


def test_delivery_is_the_one_delivery_of_a_run_of_one() -> None:
    _, received, updated = _sent(1)
    (run,) = [e for e in received if isinstance(e, DeliveriesReceived)]
    (update,) = [e for e in updated if isinstance(e, DeliveriesUpdated)]
    assert run.delivery is run.deliveries[0] and bytes(run.delivery.payload) == b"\x00"
    assert update.delivery is update.deliveries[0] and isinstance(update.state, Accepted)


def test_delivery_of_a_longer_run_raises() -> None:
    _, received, updated = _sent(3)
    (run,) = [e for e in received if isinstance(e, DeliveriesReceived)]
    (update,) = [e for e in updated if isinstance(e, DeliveriesUpdated)]
    assert len(run.deliveries) == len(update.deliveries) == 3
    for event in (run, update):
        with pytest.raises(RunOfManyError, match="holds 3 deliveries, not one"):
            _ = event.delivery  # type: ignore[attr-defined]


@pytest.mark.parametrize("flags", [False, True])
def test_the_former_flags_change_nothing(flags: bool) -> None:
    def shapes(taken: list[Event]) -> list[tuple[str, int]]:
        return [(type(e).__name__, len(getattr(e, "deliveries", ()))) for e in taken]

    _, received, updated = _sent(4, flags=flags)
    _, received_default, updated_default = _sent(4)
    assert shapes(received) == shapes(received_default) and ("DeliveriesReceived", 4) in shapes(received)
    assert shapes(updated) == shapes(updated_default) and ("DeliveriesUpdated", 4) in shapes(updated)
