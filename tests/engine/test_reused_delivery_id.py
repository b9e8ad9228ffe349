"""A delivery-id reused while the delivery that had it is unsettled: refused by default;
taken, on the one link that asks for it, as a new delivery (``tolerate_reused_delivery_ids``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.protocol.definitions import Accepted, Disposition

from .pairs import received_in
from .test_violations import server_with_session, session_ended_with, transfer, with_receiver, written


def test_the_default_link_refuses_a_reused_delivery_id() -> None:
    """ "delivery-id ... MUST be unique among the deliveries on the session that are
    unsettled" (2.7.5): the session ends with ``amqp:not-allowed``, one read or two."""
    for reads in ([transfer(0, 7) + transfer(0, 7)], [transfer(0, 7), transfer(0, 7)]):
        server, session = server_with_session()
        link = with_receiver(server)
        received = [d for data in reads for d in received_in(server.receive_data(data))]
        assert len(received) == 1
        assert link.reused_delivery_ids == 0
        session_ended_with(server, session, "amqp:not-allowed")


def test_a_tolerant_link_takes_the_reused_id_as_a_new_delivery() -> None:
    server, session = server_with_session()
    link = with_receiver(server)
    link.tolerate_reused_delivery_ids = True
    events = server.receive_data(transfer(0, 7, b"first") + transfer(0, 7, b"second") + transfer(0, 9, b"third"))
    first, second, third = received_in(events)
    assert [bytes(d.payload) for d in (first, second, third)] == [b"first", b"second", b"third"]
    assert link.reused_delivery_ids == 1 and session.is_mapped
    assert first.remote_settled and not second.remote_settled
    assert set(link.unsettled) == {7, 9} and link.unsettled[7] is second
    # The older one settles without a disposition; the newer one with its own.
    link.settle(first, Accepted())
    assert first.settled and written(server, Disposition) == []
    link.settle(second, Accepted())
    (disposition,) = written(server, Disposition)
    assert int(disposition.first) == 7 and disposition.settled
    assert set(link.unsettled) == {9}


def test_a_tolerant_link_still_refuses_an_id_held_by_another_link() -> None:
    """The leniency covers one link's own requests: an id another link's unsettled
    delivery holds is a violation as before."""
    server, session = server_with_session()
    other = with_receiver(server, handle=0)
    tolerant = with_receiver(server, handle=1)
    tolerant.tolerate_reused_delivery_ids = True
    server.receive_data(transfer(0, 3))
    assert other.unsettled and not tolerant.unsettled
    server.receive_data(transfer(1, 3))
    assert tolerant.reused_delivery_ids == 0
    session_ended_with(server, session, "amqp:not-allowed")


@settings(deadline=None)
@given(
    st.lists(
        st.one_of(st.tuples(st.just("transfer"), st.integers(0, 3)), st.tuples(st.just("settle"), st.integers(0, 40))),
        max_size=60,
    )
)
def test_tolerant_link_against_a_model(ops: list[tuple[str, int]]) -> None:
    """Any mix of transfers (ids from a small set, so often reused) and settlements on a
    tolerant link: the unsettled map holds the latest delivery of each id still unsettled;
    a superseded delivery settles silently, any other with one disposition of its id."""
    server, session = server_with_session()
    link = with_receiver(server)
    link.tolerate_reused_delivery_ids = True
    received: list[Any] = []
    held: dict[int, Any] = {}
    superseded: set[int] = set()
    for op, n in ops:
        if op == "transfer":
            (delivery,) = received_in(server.receive_data(transfer(0, n)))
            if n in held:
                superseded.add(id(held[n]))
            held[n] = delivery
            received.append(delivery)
        elif n < len(received) and not received[n].settled:
            delivery = received[n]
            link.settle(delivery, Accepted())
            dispositions = written(server, Disposition)
            if id(delivery) in superseded:
                assert dispositions == []
            else:
                assert [int(d.first) for d in dispositions] == [delivery.delivery_id]
                del held[delivery.delivery_id]
        assert {k: id(v) for k, v in link.unsettled.items()} == {k: id(v) for k, v in held.items()}
    assert session.is_mapped
    assert link.reused_delivery_ids == len(superseded)
