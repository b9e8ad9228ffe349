"""Flow-control arithmetic in one place: link credit and delivery-count (2.6.7), session
windows (2.5.6), as h2 keeps its own in ``windows.py``.

Every function is pure arithmetic on plain ints, each next to the sentence of the AMQP 1.0
specification that decides it; the session and the links keep the state (under the spec's
names, ``link_credit``, ``delivery_count``, ``incoming_window``...) and call these to move
it. Ids and counts are sequence numbers, "32-bit RFC-1982 serial number[s]" (2.8.9), so
they wrap at 2**32 (:mod:`amqplink.engine.serial`); windows and credit are uints.

``tests/engine/test_flow.py`` checks each rule against a model that counts with
unbounded integers.
"""

from __future__ import annotations

from amqplink.engine.serial import SERIAL_MOD, serial_add, serial_diff

__all__ = [
    "credit_left",
    "credit_room",
    "deliveries_sent",
    "drain",
    "grant_limit",
    "later_limit",
    "receiver_counted",
    "remote_incoming_window",
    "sender_credit",
    "sender_sent",
    "session_received",
    "session_sent",
    "window_admits",
    "window_to_reopen",
]

_HALF = 1 << 31


# -- link credit and delivery-count (2.6.7) ---------------------------------------------
def sender_credit(rcv_delivery_count: int, rcv_link_credit: int, snd_delivery_count: int) -> int:
    """The sender's link-credit from a receiver's flow.

    "link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)"
    (2.6.7); never below zero: transfers in flight may have used more than a lowered grant.
    """
    return max(0, serial_diff(serial_add(rcv_delivery_count, rcv_link_credit), snd_delivery_count))


def sender_sent(link_credit: int, delivery_count: int, count: int) -> tuple[int, int]:
    """The sender's (link-credit, delivery-count) after ``count`` deliveries went out.

    delivery-count "is incremented whenever a message is sent" (2.6.7), and link-credit
    follows from "link-credit(snd) := delivery-count(rcv) + link-credit(rcv) -
    delivery-count(snd)"; the caller sent none beyond its credit ("If the link-credit is
    less than or equal to zero ... a sender MUST NOT send more messages").
    """
    return link_credit - count, (delivery_count + count) % SERIAL_MOD


def deliveries_sent(link_credit: int, delivery_count: int, next_delivery_id: int, count: int) -> tuple[int, int, int]:
    """:func:`sender_sent`, and the session's next delivery-id, after ``count`` new
    deliveries went out on one link: (link-credit, delivery-count, next delivery-id).

    A session numbers its deliveries in turn: "delivery-id: ... sequence-no" (2.7.5), a
    "32-bit RFC-1982 serial number" (2.8.9), so it wraps at 2**32 as the delivery-count does.
    """
    return link_credit - count, (delivery_count + count) % SERIAL_MOD, (next_delivery_id + count) % SERIAL_MOD


def drain(link_credit: int, delivery_count: int) -> tuple[int, int]:
    """The sender's (link-credit, delivery-count) after it answers a drain.

    "If the sender's drain flag is set and there are no available messages, the sender
    MUST advance the delivery-count until link-credit is zero" (2.6.7).
    """
    return 0, (delivery_count + link_credit) % SERIAL_MOD


def grant_limit(delivery_count: int, link_credit: int) -> int:
    """The delivery-count a receiver's grant lets the sender reach: delivery-count(rcv) +
    link-credit(rcv), the sum "link-credit(snd) := delivery-count(rcv) + link-credit(rcv)
    - delivery-count(snd)" counts from (2.6.7)."""
    return (delivery_count + link_credit) % SERIAL_MOD


def later_limit(limit: int, other: int) -> int:
    """The later of two grant limits (serial numbers): transfers the sender made before it
    saw a lower grant stay legal; only those beyond every grant made are excess (2.6.7)."""
    return other if serial_diff(other, limit) > 0 else limit


def credit_room(delivery_limit: int, delivery_count: int) -> int:
    """How many more deliveries the highest grant ever made allows the sender; zero or
    less: the next is an excess delivery, one "the receiver MAY ... detach the link with
    a transfer-limit-exceeded error" for (2.6.7)."""
    return (delivery_limit - delivery_count + _HALF) % SERIAL_MOD - _HALF


def credit_left(limit: int, delivery_count: int) -> int:
    """The receiver's link-credit once the sender's delivery-count is known (its flow, a
    drain's answer): what remains of the latest grant, never below zero. The receiver's
    delivery-count "is calculated based on the last known value from the sender and any
    subsequent messages received on the link" (2.6.7)."""
    return max(0, serial_diff(limit, delivery_count))


def receiver_counted(link_credit: int, delivery_count: int, count: int) -> tuple[int, int]:
    """The receiver's (link-credit, delivery-count) after ``count`` deliveries began.

    The receiver's delivery-count "is calculated based on the last known value from the
    sender and any subsequent messages received on the link" (2.6.7): one more for each,
    and one less credit; an excess delivery leaves the credit at zero.
    """
    credit = link_credit - count if link_credit > count else 0
    return credit, (delivery_count + count) % SERIAL_MOD


# -- session windows (2.5.6) -------------------------------------------------------------
def remote_incoming_window(flow_next_incoming_id: int, flow_incoming_window: int, next_outgoing_id: int) -> int:
    """The remote-incoming-window a peer's flow (or begin) sets.

    "remote-incoming-window := next-incoming-id(flow) + incoming-window(flow) -
    next-outgoing-id(endpoint)" (2.5.6); the ids are serial numbers, the window a uint (a
    peer may advertise 2**32-1 for "unlimited").
    """
    return serial_diff(flow_next_incoming_id, next_outgoing_id) + flow_incoming_window


def session_sent(next_outgoing_id: int, remote_incoming_window: int, frames: int) -> tuple[int, int]:
    """(next-outgoing-id, remote-incoming-window) after ``frames`` transfer frames went out.

    "Upon sending a transfer, the sending endpoint will increment its next-outgoing-id,
    decrement its remote-incoming-window" (2.5.6).
    """
    return (next_outgoing_id + frames) % SERIAL_MOD, remote_incoming_window - frames


def window_admits(incoming_window: int, frames: int) -> bool:
    """Whether ``frames`` more transfer frames fit the incoming window: "the maximum number
    of incoming transfer frames that the endpoint can currently receive" (2.5.6); one
    beyond it is ``amqp:session:window-violation``, "The peer violated incoming window for
    the session." (2.8.15)."""
    return incoming_window >= frames


def session_received(
    next_incoming_id: int, incoming_window: int, remote_outgoing_window: int, frames: int
) -> tuple[int, int, int]:
    """(next-incoming-id, incoming-window, remote-outgoing-window) after ``frames`` transfer
    frames arrived (the caller checked :func:`window_admits`).

    "Upon receiving a transfer, the receiving endpoint will increment the next-incoming-id
    ... as well as decrementing the remote-outgoing-window, and MAY (depending on policy)
    decrement its incoming-window." (2.5.6): this side's policy does.
    """
    return (next_incoming_id + frames) % SERIAL_MOD, incoming_window - frames, remote_outgoing_window - frames


def window_to_reopen(incoming_window: int, max_incoming_window: int) -> bool:
    """Whether the incoming window is used up far enough (half) to send a flow reopening it.

    When to is this side's policy: the spec bounds only what arrives by the window it
    advertised (2.5.6, incoming-window).
    """
    return incoming_window <= max_incoming_window // 2
