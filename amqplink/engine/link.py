"""Links (spec 2.6): credit, delivery-count, drain, transfers and settlement.

A :class:`SenderLink` queues deliveries and writes them only while it holds link
credit and its session's remote incoming window is open:

    "The sender MUST NOT send a transfer if the link-credit is zero or less."
    (2.6.7, flow control)

A :class:`ReceiverLink` grants credit with :meth:`ReceiverLink.flow` and settles with
:meth:`ReceiverLink.settle`.

The credit fields carry the spec's names (2.6.7): ``delivery_count``, ``link_credit``,
``available`` and ``drain``; their arithmetic is in :mod:`amqplink.engine.flow`, each
rule beside its quote, and moves in one method per event: :meth:`Session.write_deliveries`
and :meth:`ReceiverLink._count_deliveries` (a transfer moves delivery-count and
link-credit), :meth:`SenderLink.on_flow` (the sender's link-credit from a flow),
:meth:`SenderLink.answer_drain` (drain), :meth:`ReceiverLink.flow` (a grant),
:meth:`ReceiverLink.on_attach` (grants count from the initial-delivery-count) and
:meth:`ReceiverLink._refuse_oversize` (max-message-size).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from amqplink.codec.types import Symbol, UByte, UInt
from amqplink.engine import errors
from amqplink.engine import flow as flow_rules
from amqplink.engine.events import (
    DeliveriesReceived,
    DeliveriesUpdated,
    DeliveryAborted,
    LinkCreditChanged,
    LinkDrained,
    StatefulDeliveriesReceived,
)
from amqplink.engine.states import LINK_TRANSITIONS, LinkState, Step, advance
from amqplink.protocol.definitions import (
    Accepted,
    Attach,
    Coordinator,
    Detach,
    Error,
    Flow,
    Modified,
    Rejected,
    Released,
    Source,
    Target,
    TransactionalState,
    Transfer,
)

if TYPE_CHECKING:
    from amqplink.engine.session import Session

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "RCV_FIRST",
    "RCV_SECOND",
    "SND_MIXED",
    "SND_SETTLED",
    "SND_UNSETTLED",
    "STATE_ON_TRANSFER",
    "Delivery",
    "Link",
    "ReceiverLink",
    "SenderLink",
]

SND_UNSETTLED = 0
SND_SETTLED = 1
SND_MIXED = 2
RCV_FIRST = 0
RCV_SECOND = 1

ROLE_SENDER = False
ROLE_RECEIVER = True
# "delivery-tag: binary ... A delivery-tag can be up to 32 octets of binary data" (2.8.7)
MAX_TAG_SIZE = 32
# The largest message a receiving link accepts unless told otherwise (bytes): the
# largest Service Bus carries (Premium, 100 MB), so a client works with it out of the
# box, while a peer cannot make one delivery grow without bound. "max-message-size:
# the maximum message size supported by the link endpoint" (2.7.3); 0 means no limit.
DEFAULT_MAX_MESSAGE_SIZE = 100 * 1024 * 1024

# Engine-made tags are 8-byte big-endian counters; after 2^64 of them the counter wraps
# and skips the tags of deliveries still unsettled.
_TAG_SPACE = 1 << 64
_LAST_TAG = _TAG_SPACE - 1  # send's counter tags stop short of it: _new_tag wraps there

TERMINAL_OUTCOMES = (Accepted, Rejected, Released, Modified)
STATE_ON_TRANSFER = -1
"""A sent delivery's :attr:`Delivery.offset` before its first frame when that frame must
carry a delivery state (:meth:`SenderLink.send_with_state`): a non-zero offset sends it
through the transfer writer's ``write_frames`` (:mod:`amqplink.engine.transfer_paths`),
which writes the state; the single-frame writers write none."""
_TXN_ID = Symbol("txn-id")  # a flow's properties key asking for transactional acquisition (part 4, 4.4.3)

# Module-level aliases: the hot paths compare states by identity.
_DETACHED = LinkState.DETACHED
_ATTACH_SENT = LinkState.ATTACH_SENT
_ATTACH_RCVD = LinkState.ATTACH_RCVD
_ATTACHED = LinkState.ATTACHED
_DETACH_RCVD = LinkState.DETACH_RCVD
_DETACH_SENT = LinkState.DETACH_SENT
_ENDED = LinkState.ENDED


class Delivery:
    """One message on a link, from its first transfer frame to its settlement."""

    __slots__ = (
        "aborted",
        "chunks",
        "context",
        "delivery_id",
        "link",
        "message_format",
        "offset",
        "payload",
        "rcv_settle_mode",
        "remote_settled",
        "remote_state",
        "settled",
        "size",
        "state",
        "tag",
    )

    def __init__(
        self,
        link: Link,
        tag: bytes,
        payload: Any,
        message_format: int = 0,
        settled: bool = False,
        delivery_id: int | None = None,
        size: int = 0,
    ) -> None:
        self.link = link
        self.tag = tag
        self.payload = payload
        self.message_format = message_format
        self.settled = settled
        self.delivery_id = delivery_id
        self.remote_settled = False
        self.state: Any = None
        self.remote_state: Any = None
        self.aborted = False
        self.rcv_settle_mode: int | None = None  # the transfer's own, if it set one
        self.context: Any = None
        self.size = size
        self.offset = 0
        """Sent: how many bytes of the payload are out in transfer frames (the session
        writes a delivery larger than a frame as the window allows, from here);
        :data:`STATE_ON_TRANSFER` before the first frame of one whose transfers carry its state."""
        self.chunks: list[memoryview] | None = None
        """Received: the payloads of the transfer frames so far of a delivery whose last
        frame is still to come (joined into :attr:`payload` when it comes)."""

    def __repr__(self) -> str:
        return (
            f"Delivery(id={self.delivery_id}, tag={bytes(self.tag).hex()}, settled={self.settled},"
            f" remote_settled={self.remote_settled}, remote_state={self.remote_state!r})"
        )


class Link:
    """State shared by both ends of a link: names, handles, termini, attach/detach.

    Besides the application's calls, a link has one seam, public and named, through which
    its session reaches it (neither touches the other's private members:
    ``tests/test_engine_seams.py``): the peer's frames for the link (:meth:`on_attach`,
    :meth:`on_flow`, :meth:`on_transfer`, :meth:`on_detach`, and the link's part of a
    disposition, ``on_dispositions``), :meth:`attach_frame` (what :meth:`Session.send_attach`
    writes) and :meth:`abandon`; a receiver also takes a run of whole deliveries
    (:meth:`ReceiverLink.deliveries_arrived`) after telling how many may come
    (:meth:`ReceiverLink.credit_room`, :attr:`partial_delivery`); a sender answers a drain
    (:meth:`SenderLink.answer_drain`) and counts the batched sends not written yet
    (:attr:`SenderLink.batched_unwritten`). These are the engine's own wiring: an
    application has no need to call them.
    """

    is_sender: bool = False
    ranged_updates = True
    """Kept one release, changing nothing: the deliveries of a link that one disposition of
    the peer names always come as one :class:`~amqplink.engine.events.DeliveriesUpdated`
    per run (a delivery on its own is a run of one)."""
    partial_delivery: Delivery | None = None
    """Receiver: the delivery whose later transfer frames are still to come."""
    answer_rcv_settle_mode: int | None = None
    """A receiver answering the peer's attach: its own rcv-settle-mode (``None``: the
    peer's). "the receiver's value is the one in force" (2.7.3)."""

    def __init__(
        self,
        session: Session,
        name: str,
        handle: int,
        source: Source | None,
        target: Target | Coordinator | None,
        snd_settle_mode: int,
        rcv_settle_mode: int,
        properties: dict[Any, Any] | None = None,
        max_message_size: int | None = None,
    ) -> None:
        self.session = session
        self.name = name
        self.handle = handle
        self.remote_handle: int | None = None
        self.source = source
        self.target = target
        self.snd_settle_mode = snd_settle_mode
        self.rcv_settle_mode = rcv_settle_mode
        self.properties = properties
        self.max_message_size = max_message_size
        self.state = _DETACHED
        """Where the link is in its attach/detach exchange (:class:`LinkState`)."""
        self.remote_attach: Attach | None = None
        """The peer's attach, as it arrived."""
        self.remote_detach: Detach | None = None
        self._ended_by: str | None = None  # why the link ENDED without a detach of its own
        self.delivery_count = 0
        self.link_credit = 0
        self.drain = False
        self.available = 0
        """Receiver: the sender's last ``available`` report. Sender: the backlog the
        application declared with :meth:`SenderLink.announce_available`."""
        self.context: Any = None
        self.error: Error | None = None
        """The error this side detached the link with."""

    # -- state ---------------------------------------------------------------
    @property
    def is_attached(self) -> bool:
        """Attach sent and received, detach neither."""
        return self.state is _ATTACHED

    @property
    def is_detached(self) -> bool:
        """Detach sent or received, or the session ended: the link carries nothing more."""
        return self.state >= _DETACH_RCVD

    @property
    def attach_sent(self) -> bool:
        """This side's attach is out and the link has not ended (derived from ``state``)."""
        state = self.state
        return state is _ATTACHED or state is _ATTACH_SENT or state is _DETACH_SENT

    @property
    def detach_sent(self) -> bool:
        """This side has detached (or its session or connection ended under the link)."""
        return self.state >= _DETACH_SENT

    def _step(self, step: Step) -> None:
        self.state = advance(LINK_TRANSITIONS, self.state, step, f"link {self.name!r}")

    def _link_error(self, condition: Symbol, description: str) -> errors.LinkProtocolError:
        return errors.LinkProtocolError(self.session.channel, self.handle, condition, description)

    def abandon(self, reason: str) -> None:
        """The session ended or the connection closed: a link lives within its session
        (2.5.5, 2.6.1), so it ends with it; nothing more goes out on this link."""
        if self.state is not _ENDED:
            self._ended_by = reason
            self._step(Step.ABANDON)

    def _unusable(self, action: str) -> errors.EngineStateError:
        """The error for an application call the link's state no longer allows."""
        state = self.state
        if state is _ENDED and self._ended_by is not None:
            why = self._ended_by
        elif state >= _DETACH_RCVD:
            why = "it is detached"
        else:
            why = "this side has not attached it"
        return errors.EngineStateError(f"cannot {action} on link {self.name!r}: {why}")

    @property
    def role(self) -> bool:
        """The spec's role field: ``False`` for a sender, ``True`` for a receiver."""
        return ROLE_RECEIVER if not self.is_sender else ROLE_SENDER

    def __repr__(self) -> str:
        kind = "SenderLink" if self.is_sender else "ReceiverLink"
        return f"{kind}(name={self.name!r}, handle={self.handle}, {self.state.name}, credit={self.link_credit})"

    # -- attach / detach -----------------------------------------------------
    def attach(
        self,
        source: Source | None = None,
        target: Target | Coordinator | None = None,
        *,
        keep: bool = True,
    ) -> None:
        """Send this side's attach.

        For a link the peer attached (:class:`~amqplink.engine.events.LinkAttachRequested`),
        ``keep=True`` answers with this side's termini (``source``/``target`` default
        to the peer's); pass ``None`` termini with ``keep=False`` to answer with a null
        terminus, then :meth:`detach` with an error, as 2.6.3 describes for refusal.

        A receiver answers with :attr:`answer_rcv_settle_mode` when it is set, else
        with the peer's.
        """
        state = self.state
        if state >= _DETACH_RCVD:
            return  # detached or ended first; the engine already answered what it had to
        if state is not _DETACHED and state is not _ATTACH_RCVD:
            raise errors.EngineStateError(f"link {self.name!r} is already attached")
        self._send_attach(source, target, keep=keep)

    def _send_attach(self, source: Source | None, target: Target | Coordinator | None, *, keep: bool) -> None:
        remote = self.remote_attach
        if remote is not None and keep:
            if source is None:
                source = remote.source
            if target is None:
                target = remote.target
            if self.is_sender:
                self.rcv_settle_mode = int(remote.rcv_settle_mode)
                self.snd_settle_mode = int(remote.snd_settle_mode)
            else:
                self.snd_settle_mode = int(remote.snd_settle_mode)
                self.rcv_settle_mode = int(remote.rcv_settle_mode)
        if self.answer_rcv_settle_mode is not None and not self.is_sender:
            self.rcv_settle_mode = self.answer_rcv_settle_mode
        self.source = source
        self.target = target
        self._step(Step.SEND_ATTACH)
        self.session.send_attach(self)

    def detach(self, error: Error | None = None, *, closed: bool = True) -> None:
        """Send detach (``closed=True`` closes the link for good, 2.6.6); no-op once detached.

        A link the peer attached and this side has not answered yet is answered first
        with a null terminus, then detached, as 2.6.3 describes for a refused link: a
        detach alone would name a handle the peer has never seen, and the peer ends
        the session with ``amqp:session:unattached-handle``.
        """
        state = self.state
        if state >= _DETACH_SENT:
            return
        self.error = error
        if state is _DETACHED:
            self.abandon("it was detached before it was attached")
            self.session.forget_link(self)
            return
        if state is _ATTACH_RCVD:
            self._send_attach(None, None, keep=False)
        self._step(Step.SEND_DETACH)
        self.session.send_detach(self, error, closed)

    def on_detach(self, detach: Detach) -> bool:
        """The peer's detach (the session's seam): whether the peer detached first, in
        which case this side's detach answers it (after an attach, when this side had
        not answered the peer's yet: 2.6.3). The session forgets the link and reports it."""
        self.remote_detach = detach
        state = self.state
        by_peer = state < _DETACH_SENT
        self._step(Step.RECV_DETACH)
        if by_peer:
            if state is _ATTACH_RCVD:
                # Detached before this side answered the attach: answer it, then detach.
                self._step(Step.SEND_ATTACH)
                self.session.send_attach(self)
            self._step(Step.SEND_DETACH)
            self.session.send_detach(self, None, bool(detach.closed))
        return by_peer

    def attach_frame(self) -> Attach:
        """This side's attach as it stands (the session writes it: :meth:`Session.send_attach`)."""
        initial = UInt(self.delivery_count) if self.is_sender else None
        return Attach(
            name=self.name,
            handle=UInt(self.handle),
            role=self.role,
            snd_settle_mode=UByte(self.snd_settle_mode),
            rcv_settle_mode=UByte(self.rcv_settle_mode),
            source=self.source,
            target=self.target,
            initial_delivery_count=initial,
            max_message_size=self.max_message_size,
            properties=self.properties,
        )

    def on_attach(self, attach: Attach) -> None:
        """The peer's attach: an answer to this side's, or a new link the peer asks for;
        the settle modes in force (2.7.3)."""
        answer = self.state is not _DETACHED  # the peer answers this side's attach
        self._step(Step.RECV_ATTACH)
        self.remote_attach = attach
        self.remote_handle = int(attach.handle)
        if not self.is_sender:
            # "initial-delivery-count: ... the sender's initial value for delivery-count"
            self.delivery_count = int(attach.initial_delivery_count or 0)
            if answer:
                self.snd_settle_mode = int(attach.snd_settle_mode)
                if self.rcv_settle_mode == RCV_SECOND and int(attach.rcv_settle_mode) != RCV_SECOND:
                    # The receiver's rcv-settle-mode is the one in force (2.7.3), but a
                    # sender that answers first will not settle after our outcome
                    # (qpid-proton's Container does so): settle first, or nothing ends.
                    self.rcv_settle_mode = RCV_FIRST
        elif answer:
            self.rcv_settle_mode = int(attach.rcv_settle_mode)

    def _flow_frame(self, *, echo: bool = False) -> Flow:
        s = self.session
        return Flow(
            next_incoming_id=UInt(s.next_incoming_id) if s.remote_begin is not None else None,
            incoming_window=UInt(s.incoming_window),
            next_outgoing_id=UInt(s.next_outgoing_id),
            outgoing_window=UInt(s.outgoing_window),
            handle=UInt(self.handle),
            delivery_count=UInt(self.delivery_count),
            link_credit=UInt(max(0, self.link_credit)),
            available=None,
            drain=self.drain,
            echo=echo,
        )

    def _send_flow(self, *, echo: bool = False) -> None:
        state = self.state
        if state is not _ATTACHED and state is not _ATTACH_SENT:
            return
        session = self.session
        if session.batched_sends:
            session.write_batched()  # the flow's counters count the transfers sent before it
        session.send_frame(self._flow_frame(echo=echo))

    def on_flow(self, flow: Flow) -> None:
        """The peer's flow for this link (2.6.7): each role reads its own fields."""
        raise NotImplementedError

    def on_transfer(self, transfer: Transfer, payload: memoryview) -> None:
        """A transfer frame for this link; a sender takes none."""
        raise errors.SessionProtocolError(
            self.session.channel,
            errors.NOT_ALLOWED,
            f"transfer received on link {self.name!r} where this side is the sender",
        )


class SenderLink(Link):
    """The sending end of a link: queues deliveries and sends them as credit allows."""

    is_sender = True
    hold_drain = False
    """When true, a drain is answered only after :meth:`drained` (for an application
    that keeps its messages outside the link's queue, as a broker does)."""
    _drain_held = False
    batch_transfers = False
    """When true, :meth:`send` only queues: the deliveries sent until the next
    :meth:`Connection.data_to_send` leave then, together, under the same credit and
    session-window rules and in the same order (before any other frame of the session,
    and before this link's detach), for an application that sends many messages between
    two writes to the socket, as the asyncio client does."""
    batched_unwritten = 0
    """Deliveries at the end of :attr:`queue` that batched sends put there and the
    session has not yet written as those sends would have (:meth:`Session.write_batched`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.queue: deque[Delivery] = deque()
        self.auto_settle = True
        self._next_tag = 0
        self.unsettled: dict[int, Delivery] = {}
        self.initial_delivery_count: int | None = None
        """The delivery-count this side's attach announced; ``None`` until it is written."""
        self.peer_max_message_size = 0
        """The receiver's max-message-size from its attach (0: none given)."""
        self._tags: dict[bytes, Delivery] | None = None
        """The tags of the unsettled deliveries, kept from the first time a tag could
        collide (a caller's tag, or the engine's counter wrapping); until then every
        tag is the engine's counter and unique by construction."""

    @property
    def credit(self) -> int:
        """Credit left after the deliveries already queued."""
        return self.link_credit - len(self.queue)

    def announce_available(self, backlog: int) -> None:
        """Tell the receiver how many messages wait for credit and send a flow.

        "available: the number of messages awaiting credit at the link sender
        endpoint" (2.7.4): the deliveries queued here plus ``backlog``, messages the
        application holds and has not handed to :meth:`send` yet. Every later flow
        from this side reports it too.
        """
        if backlog < 0:
            raise ValueError(f"backlog must not be negative: {backlog}")
        self.available = backlog
        self._send_flow()

    def _flow_frame(self, *, echo: bool = False) -> Flow:
        frame = super()._flow_frame(echo=echo)
        frame.available = UInt(min(0xFFFFFFFF, self.available + len(self.queue)))
        return frame

    def attach_frame(self) -> Attach:
        # "initial-delivery-count: ... the sender's initial value for delivery-count" (2.7.3)
        self.initial_delivery_count = self.delivery_count
        if self.drain:
            self.session.answer_drain_later(self)  # a drain that arrived before this attach
        return super().attach_frame()

    def on_attach(self, attach: Attach) -> None:
        super().on_attach(attach)
        self.peer_max_message_size = int(attach.max_message_size or 0)

    def send(
        self,
        payload: bytes | bytearray | memoryview,
        *,
        tag: bytes | None = None,
        settled: bool | None = None,
        message_format: int = 0,
        context: Any = None,
    ) -> Delivery:
        """Queue one message; it goes out as soon as credit and the session window allow.

        ``settled`` defaults from the link's sender settle mode (``settled`` ->
        pre-settled, else unsettled). With snd-settle-mode ``settled`` "the sender
        will send all deliveries settled to the receiver" (2.8.2). A payload larger
        than the receiver's max-message-size raises
        :class:`~amqplink.engine.errors.MessageSizeExceededError` ("Any attempt to
        deliver a message larger than this results in a message-size-exceeded
        link-error", 2.7.3): send a smaller message.

        Raises :class:`~amqplink.engine.errors.EngineStateError` at once, naming the
        link, once it is detached or its session or connection has ended (nothing is
        queued that could never leave), and for a ``tag`` already held by an unsettled
        delivery of this link ("delivery-tag ... MUST be unique amongst all deliveries
        that could be considered unsettled", 2.8.7). Without ``tag`` the engine makes
        one that is.
        """
        state = self.state
        if state is not _ATTACHED and state is not _ATTACH_SENT:
            raise self._unusable("send")
        mode = self.snd_settle_mode
        if settled is None:
            settled = mode == SND_SETTLED
        elif settled:
            if mode == SND_UNSETTLED:
                raise errors.EngineStateError(f"link {self.name!r} has snd-settle-mode unsettled")
        elif mode == SND_SETTLED:
            raise errors.EngineStateError(f"link {self.name!r} has snd-settle-mode settled")
        size = len(payload)
        limit = self.peer_max_message_size
        if limit and size > limit:
            raise errors.MessageSizeExceededError(
                f"link {self.name!r}: a message of {size} bytes exceeds the receiver's"
                f" max-message-size {limit} ({errors.MESSAGE_SIZE_EXCEEDED})"
            )
        if message_format and not 0 <= message_format <= 0xFFFFFFFF:
            # "message-format: uint" (2.7.5)
            raise ValueError(f"link {self.name!r}: message_format must be a uint (0..2**32-1), not {message_format}")
        tags = self._tags
        if tag is not None:
            tag = self._check_tag(tag, settled)
            tags = self._tags  # _check_tag may have started the table
        elif tags is None and (n := self._next_tag) < _LAST_TAG:
            tag = n.to_bytes(8, "big")  # the counter alone: unique by construction
            self._next_tag = n + 1
        else:
            tag = self._new_tag()
            tags = self._tags  # _new_tag starts the table when the counter wraps
        delivery = Delivery(self, tag, payload, message_format, settled)
        delivery.size = size
        delivery.context = context
        if tags is not None and not settled:
            tags[tag] = delivery
        if self.batch_transfers:
            self.queue.append(delivery)
            self.batched_unwritten += 1
            self.session.write_later(self, size)
            return delivery
        queue = self.queue
        session = self.session
        if session.batched_sends:
            session.write_batched()  # deliveries sent before this one leave first
        if queue or state is not _ATTACHED:
            queue.append(delivery)
            session.send_queued(self)
        elif not session.write_deliveries(self, (delivery,)):  # nothing waits: straight out
            queue.append(delivery)
        elif self.drain and self.link_credit > 0:
            self.session.answer_drain_later(self)  # as send_queued does once the queue is empty
        return delivery

    def send_with_state(
        self,
        payload: bytes | bytearray | memoryview,
        state: Any,
        *,
        tag: bytes | None = None,
        settled: bool | None = None,
        message_format: int = 0,
        context: Any = None,
    ) -> Delivery:
        """:meth:`send`, each of the delivery's transfers carrying ``state`` ("the state of
        the delivery at the sender", 2.7.5): a ``transactional-state`` posts the message in a
        transaction, and "if delivery is split across several transfer frames then all frames
        MUST be explicitly associated with the same transaction" (part 4, 4.4.1).

        The delivery is queued as a batched send is (:attr:`batch_transfers`: it leaves at
        the next :meth:`Connection.data_to_send`, in order with the link's other sends) and
        written by the transfer writer's ``write_frames``, which writes the state; the
        single-frame writers of the usual sends, which write none, are not touched. Raises as :meth:`send` does."""
        held = self.batch_transfers
        self.batch_transfers = True  # queued, not written: its state is set first
        try:
            delivery = self.send(payload, tag=tag, settled=settled, message_format=message_format, context=context)
        finally:
            self.batch_transfers = held
        delivery.state = state
        delivery.offset = STATE_ON_TRANSFER
        return delivery

    def send_all(self, payloads: Sequence[bytes | bytearray | memoryview], tags: Sequence[bytes]) -> list[Delivery]:
        """Queue unsettled messages, ``payloads[i]`` with delivery-tag ``tags[i]``: what
        ``send(payload, tag=tag, settled=False)`` does for each in turn, with the link's state
        and settle mode checked once; they go out together as far as credit and the session
        window allow. The deliveries, in order.

        Raises as :meth:`send` does for the link's state and its settle mode. Stops before a
        message :meth:`send` would refuse (larger than the receiver's max-message-size, a tag
        too long or in use): fewer deliveries than payloads come back, and sending that one
        with :meth:`send` raises its error.
        """
        state = self.state
        if state is not _ATTACHED and state is not _ATTACH_SENT:
            raise self._unusable("send")
        if self.snd_settle_mode == SND_SETTLED:
            raise errors.EngineStateError(f"link {self.name!r} has snd-settle-mode settled")
        limit = self.peer_max_message_size
        check_tag = self._check_tag
        made: list[Delivery] = []
        tags_in_use = self._tags
        for payload, tag in zip(payloads, tags, strict=True):
            size = len(payload)
            if limit and size > limit:
                break
            # _check_tag's answer for a bytes tag of an allowed size that is not in use: the tag itself
            if type(tag) is not bytes or len(tag) > MAX_TAG_SIZE or tags_in_use is None or tag in tags_in_use:
                try:
                    tag = check_tag(tag, False)
                except (ValueError, errors.EngineStateError):
                    break
                tags_in_use = self._tags
            delivery = Delivery(self, tag, payload)
            delivery.size = size
            tags_in_use[tag] = delivery  # type: ignore[index]  # _check_tag made the table
            made.append(delivery)
        if made:
            session = self.session
            if session.batched_sends:
                session.write_batched()  # deliveries batched before these leave first
            queue = self.queue
            # First in line on an attached link: what can go out at once is written straight away.
            written = session.write_deliveries(self, made, fresh=True) if not queue and state is _ATTACHED else 0
            queue.extend(made[written:] if written else made)
            session.send_queued(self)
        return made

    def detach(self, error: Error | None = None, *, closed: bool = True) -> None:
        if self.batched_unwritten:
            self.session.write_batched()  # what was sent before the detach leaves before it
        super().detach(error, closed=closed)

    def _new_tag(self) -> bytes:
        """The engine's next tag: "delivery-tag ... MUST be unique amongst all deliveries
        that could be considered unsettled by either end of the link" (2.8.7)."""
        n = self._next_tag
        tags = self._tags
        if tags is None:
            self._next_tag = n + 1
            if n + 1 == _TAG_SPACE:
                self._next_tag = 0
                self._tags = self._unsettled_tags()
            return n.to_bytes(8, "big")
        while True:
            tag = n.to_bytes(8, "big")
            n = (n + 1) % _TAG_SPACE
            if tag not in tags:
                self._next_tag = n
                return tag

    def _check_tag(self, tag: bytes, settled: bool) -> bytes:
        """A caller's tag, as bytes, once it is known not to collide with an unsettled one."""
        if len(tag) > MAX_TAG_SIZE:
            raise ValueError(f"delivery-tag of {len(tag)} bytes: at most {MAX_TAG_SIZE} are allowed (2.8.7)")
        if type(tag) is not bytes:
            tag = bytes(tag)  # a bytearray or memoryview: hashable, and immune to later changes
        if settled:
            return tag
        tags = self._tags
        if tags is None:
            tags = self._tags = self._unsettled_tags()
        if tag in tags:
            raise errors.EngineStateError(
                f"cannot send on link {self.name!r}: delivery-tag {bytes(tag).hex()} is already in use"
                " by an unsettled delivery (2.8.7); pass another tag or settle that delivery first"
            )
        return tag

    def _unsettled_tags(self) -> dict[bytes, Delivery]:
        tags = {d.tag: d for d in self.unsettled.values() if not d.settled}
        tags.update((d.tag, d) for d in self.queue if not d.settled)
        return tags

    def abort(self, delivery: Delivery) -> None:
        """Abort a delivery: drop it if no frame is out yet, else end it with an aborted
        transfer ("the delivery MUST be discarded by the recipient", 2.6.14)."""
        if delivery.aborted or delivery not in self.queue:
            return
        delivery.aborted = True
        delivery.settled = True
        if delivery.delivery_id is None:
            self.queue.remove(delivery)
            self._forget(delivery)  # its tag only: it has no delivery-id
            return
        self._forget(delivery)
        self.session.send_queued(self)

    # -- flow control (2.6.7) --------------------------------------------------------
    def on_flow(self, flow: Flow) -> None:
        # "link-credit(snd) := delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)"
        # (2.6.7). A flow without delivery-count comes from a receiver that has not seen
        # our attach (2.7.4: it "MUST NOT be set"): its grant counts from our
        # initial-delivery-count.
        if flow.delivery_count is not None:
            rcv_count = int(flow.delivery_count)
        elif self.initial_delivery_count is not None:
            rcv_count = self.initial_delivery_count
        else:
            rcv_count = self.delivery_count  # our attach (and its initial count) is still to come
        if flow.properties is not None and _TXN_ID in flow.properties:
            # "If the link endpoint does not support transactional acquisition, the link MUST
            # be terminated with a not-implemented error." (part 4, 4.4.3)
            raise self._link_error(
                errors.NOT_IMPLEMENTED,
                f"link {self.name!r} does not support transactional acquisition (a txn-id in a flow's properties);"
                " receive outside the transaction and settle in it",
            )
        if flow.link_credit is not None:
            self.link_credit = flow_rules.sender_credit(rcv_count, int(flow.link_credit), self.delivery_count)
        self.drain = bool(flow.drain)
        self._drain_held = self.drain and self.hold_drain
        self.session.connection.event_queue.append(LinkCreditChanged(self, self.link_credit, self.drain))
        self.session.send_queued(self)
        if self.drain:
            self.session.answer_drain_later(self)
        if flow.echo:
            self._send_flow()

    def answer_drain(self) -> None:
        """Give back the credit a drain left unused, once the application had its turn.

        "If the sender's drain flag is set and there are no available messages, the
        sender MUST advance the delivery-count until link-credit is zero, and send its
        updated flow state to the receiver." (2.6.7) The session calls this at the next
        :meth:`Connection.data_to_send`, so deliveries the application sends on
        :class:`~amqplink.engine.events.LinkCreditChanged` use the credit first; a
        drain that arrives before this side's attach is answered after it, and one held
        by :attr:`hold_drain` once the application calls :meth:`drained`.
        """
        if (
            not self.drain
            or self._drain_held
            or self.queue
            or self.link_credit <= 0
            or self.initial_delivery_count is None  # this side's attach is still to come
            or self.detach_sent
        ):
            return
        self.link_credit, self.delivery_count = flow_rules.drain(self.link_credit, self.delivery_count)
        self._send_flow()

    def drained(self) -> None:
        """Answer a drain held by ``hold_drain``, now that the application has sent what
        it had: credit left once the queued deliveries are out is given back (2.6.7)."""
        if self._drain_held:
            self._drain_held = False
            self.session.send_queued(self)
            self.session.answer_drain_later(self)

    def on_dispositions(self, deliveries: list[Delivery], settled: bool, state: Any, batchable: bool) -> None:
        """One disposition naming deliveries of this link (a run of its range, in delivery-id
        order): each one's state as :meth:`_disposition_arrived` sets it, and one
        :class:`DeliveriesUpdated` for them all."""
        if settled:
            self._settled_by_peer(deliveries, state)
        elif self.auto_settle:
            for delivery in deliveries:
                self._disposition_arrived(delivery, settled, state, batchable)
        else:  # all _disposition_arrived does when neither the peer nor the engine settles
            for delivery in deliveries:
                delivery.remote_state = state
        self.session.connection.event_queue.append(DeliveriesUpdated(self, deliveries, state, settled, batchable))

    def _disposition_arrived(self, delivery: Delivery, settled: bool, state: Any, batchable: bool) -> None:
        """A delivery's state as the peer's disposition sets it (the event is the caller's)."""
        if settled:
            self._settled_by_peer((delivery,), state)
            return
        delivery.remote_state = state
        if self.auto_settle and (isinstance(state, TERMINAL_OUTCOMES) or _provisional(state)) and not delivery.settled:
            # Receiver settles second: settle on its terminal outcome (2.6.12), or on the
            # provisional one of a transaction (part 4, 4.4.1): the discharge decides the rest.
            delivery.settled = True
            self._forget(delivery)
            assert delivery.delivery_id is not None
            # The settlement is as urgent as the outcome that asked for it.
            self.session.queue_disposition(ROLE_SENDER, delivery.delivery_id, True, state, batchable)

    def _settled_by_peer(self, deliveries: Sequence[Delivery], state: Any) -> None:
        """The peer's disposition settled ``deliveries`` with ``state``: settled here too
        (nothing is left to settle), and forgotten."""
        for delivery in deliveries:
            delivery.remote_state = state
            delivery.remote_settled = True
            delivery.settled = True
        self._forget_all(deliveries)

    def _forget(self, delivery: Delivery) -> None:
        """A delivery settled or aborted: its tag is free again, its delivery-id forgotten."""
        self._forget_all((delivery,))

    def _forget_all(self, deliveries: Sequence[Delivery]) -> None:
        """:meth:`_forget` each of ``deliveries``."""
        tags = self._tags
        if tags is not None:
            for delivery in deliveries:
                if tags.get(delivery.tag) is delivery:
                    del tags[delivery.tag]
        unsettled = self.unsettled
        outgoing = self.session.outgoing_unsettled
        for delivery in deliveries:
            delivery_id = delivery.delivery_id
            if delivery_id is not None:
                unsettled.pop(delivery_id, None)
                outgoing.pop(delivery_id, None)

    def settle(self, delivery: Delivery, state: Any = None, *, batchable: bool = False) -> None:
        """Settle a delivery from the sender's side (only needed without auto_settle).

        ``batchable=True`` tells the peer "there is no need ... to urgently communicate
        updated delivery state" (2.7.6).
        """
        if delivery.settled or delivery.delivery_id is None:
            return
        delivery.settled = True
        delivery.state = state
        self._forget(delivery)
        self.session.queue_disposition(ROLE_SENDER, delivery.delivery_id, True, state, batchable)

    def update(self, delivery: Delivery, state: Any, *, batchable: bool = False) -> None:
        """Tell the receiver ``state`` for a delivery without settling it (a disposition with
        settled false, 2.7.6): a transaction's provisional outcome of a transactional
        disposition (part 4, 4.4.2), applied or not when the transaction is discharged."""
        if delivery.settled or delivery.delivery_id is None:
            return
        delivery.state = state
        self.session.queue_disposition(ROLE_SENDER, delivery.delivery_id, False, state, batchable)

    def settle_all(self, deliveries: list[Delivery], state: Any = None) -> None:
        """:meth:`settle` each of ``deliveries`` with one ``state``: the same settlements, and
        a disposition per run of consecutive delivery-ids (one first..last range) rather
        than one each."""
        queue = self.session.queue_disposition
        first = last = -1
        settling: list[Delivery] = []
        for delivery in deliveries:
            delivery_id = delivery.delivery_id
            if delivery.settled or delivery_id is None:
                continue
            delivery.settled = True
            delivery.state = state
            settling.append(delivery)
            if delivery_id == last + 1 and first >= 0:
                last = delivery_id
                continue
            if first >= 0:
                queue(ROLE_SENDER, first, True, state, False, last)
            first = last = delivery_id
        if first >= 0:
            queue(ROLE_SENDER, first, True, state, False, last)
        self._forget_all(settling)  # as settle's _forget, once for them all


class ReceiverLink(Link):
    """The receiving end of a link: grants credit, assembles transfers, settles."""

    is_sender = False
    deliver_in_runs = True
    """Kept one release, changing nothing: whole deliveries always come as runs
    (:class:`~amqplink.engine.events.DeliveriesReceived`; a delivery on its own is a run of one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partial_delivery: Delivery | None = None
        self.unsettled: dict[int, Delivery] = {}
        # The grant is "delivery-count + link-credit" (2.6.7): the latest one, and the
        # highest ever made (a delivery beyond that one exceeds every grant).
        self._grant_limit = 0
        self._delivery_limit = 0
        self.excess_transfers = 0  # deliveries the sender made beyond any credit granted
        self.tolerate_reused_delivery_ids = False
        """Take a transfer whose delivery-id is held by an unsettled, whole delivery of this
        same link as a new delivery, the older one counting as settled by the sender, instead
        of ending the session with ``amqp:not-allowed``. Off by default: a delivery-id "MUST
        be unique among the deliveries on the session that are unsettled" (2.7.5's
        delivery-id field). The broker sets it on ``$management`` request links only, for
        azure-servicebus's aio session, which numbers concurrent requests alike (it reads
        next-outgoing-id before an ``await`` and increments it after). A sender may reuse an
        id only once it has settled the delivery that had it, so the older one is taken as
        settled: the application may still settle it, and that sends no disposition
        (:attr:`reused_delivery_ids` counts them)."""
        self.reused_delivery_ids = 0
        """Transfers taken under :attr:`tolerate_reused_delivery_ids`."""

    # -- credit (2.6.7) ------------------------------------------------------------------
    def flow(self, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        """Set link-credit to ``credit`` and tell the sender (2.6.7); no-op once detached.

        With ``drain=True`` the sender is asked to use all of it or give it back; a
        :class:`~amqplink.engine.events.LinkDrained` event follows when it has (at once
        for ``credit=0``: there is nothing to use). ``echo=True`` asks the sender to
        answer with its own flow state.
        """
        if credit < 0 or credit > 0xFFFFFFFF:
            raise ValueError(f"credit out of range: {credit}")
        if self.is_detached:
            return  # nothing more can arrive: a grant would be meaningless, not an error
        self.link_credit = credit
        self.drain = drain
        # Transfers the sender sent before it saw a lower grant are still legal: only a
        # delivery beyond the highest limit ever advertised breaks the rules.
        self._grant_limit = flow_rules.grant_limit(self.delivery_count, credit)
        self._delivery_limit = flow_rules.later_limit(self._delivery_limit, self._grant_limit)
        self._send_flow(echo=echo)
        self._drained_if_done()

    def add_credit(self, credit: int) -> None:
        """Grant ``credit`` more (the usual way to replenish as messages are consumed)."""
        self.flow(self.link_credit + credit, drain=self.drain)

    def on_attach(self, attach: Attach) -> None:
        super().on_attach(attach)
        # "initial-delivery-count: ... the sender's initial value for delivery-count"
        # (2.7.3). Grants made before it was known counted from zero, and the sender
        # read them from its initial value (2.7.4): move them onto it.
        initial = self.delivery_count
        self._grant_limit = flow_rules.grant_limit(initial, self._grant_limit)
        self._delivery_limit = flow_rules.grant_limit(initial, self._delivery_limit)

    def _flow_frame(self, *, echo: bool = False) -> Flow:
        frame = super()._flow_frame(echo=echo)
        if self.remote_attach is None:
            # "In the event that the receiving link endpoint has not yet seen the initial
            # attach frame from the sender this field MUST NOT be set." (2.7.4, delivery-count)
            frame.delivery_count = None
        return frame

    def on_flow(self, flow: Flow) -> None:
        if flow.delivery_count is not None:
            # A drain answer advances the sender's delivery-count past the deliveries
            # it made; the credit left is what remains of this side's latest grant.
            self.delivery_count = int(flow.delivery_count)
            self.link_credit = flow_rules.credit_left(self._grant_limit, self.delivery_count)
        self.available = int(flow.available or 0)
        self._drained_if_done()
        if flow.echo:
            self._send_flow()

    def _drained_if_done(self) -> None:
        # "the sender ... MUST either use all the available credit or ... advance the
        # delivery-count" (2.6.7): credit at zero, by transfers or by its flow, ends a drain.
        if self.drain and self.link_credit == 0:
            self.drain = False
            self.session.connection.event_queue.append(LinkDrained(self))

    # -- settlement ------------------------------------------------------------------------
    def settle(self, delivery: Delivery, state: Any = None, *, batchable: bool = False) -> None:
        """Settle with an outcome (``Accepted()``, ``Rejected(error=...)``, ...).

        With rcv-settle-mode ``first`` the disposition settles at once; with ``second``
        "the receiver will only settle after the sender has settled" (2.8.3): the
        outcome is sent unsettled and the sender's settlement ends it. A transfer's own
        rcv-settle-mode, when it sets one, overrides the link's for that delivery.
        ``batchable=True`` marks the disposition as not urgent (2.7.6).
        """
        self.settle_all((delivery,), state, batchable=batchable)

    def settle_all(self, deliveries: Iterable[Delivery], state: Any = None, *, batchable: bool = False) -> None:
        """:meth:`settle` each of ``deliveries`` with the same outcome, in order; a run of
        consecutive delivery-ids goes to the session's disposition queue as one range."""
        link_settles_now = self.rcv_settle_mode != RCV_SECOND
        pop_unsettled = self.unsettled.pop
        pop_incoming = self.session.incoming_unsettled.pop
        queue = self.session.queue_disposition
        first = last = -2
        run_settled = False
        for delivery in deliveries:
            if delivery.settled or delivery.link is not self:
                continue
            delivery.state = state
            if delivery.remote_settled:
                delivery.settled = True
                continue
            delivery_id: int = delivery.delivery_id  # type: ignore[assignment]  # set: it arrived
            # rcv-settle-mode second: "the receiver will only settle after the sender has
            # settled" (2.8.3); a transfer's own mode overrides the link's for its delivery.
            mode = delivery.rcv_settle_mode
            settle_now = link_settles_now if mode is None else mode != RCV_SECOND
            if settle_now:
                delivery.settled = True
                pop_unsettled(delivery_id, None)
                pop_incoming(delivery_id, None)
            if delivery_id == last + 1 and settle_now is run_settled:
                last = delivery_id
                continue
            if first >= 0:
                queue(ROLE_RECEIVER, first, run_settled, state, batchable, last)
            first = last = delivery_id
            run_settled = settle_now
        if first >= 0:
            queue(ROLE_RECEIVER, first, run_settled, state, batchable, last)

    # -- transfers (2.7.5) ---------------------------------------------------------------
    def on_transfer(self, transfer: Transfer, payload: memoryview) -> None:
        delivery = self.partial_delivery
        if delivery is None:
            delivery = self._first_transfer(transfer)
        else:
            self._continuation(delivery, transfer)
        if transfer.rcv_settle_mode is not None:
            self._transfer_settle_mode(delivery, int(transfer.rcv_settle_mode))
        if transfer.state is not None:
            delivery.remote_state = transfer.state  # "the state of the delivery at the sender" (2.7.5)
        if transfer.aborted:
            self._discard(delivery)
            return
        size = delivery.size = delivery.size + len(payload)
        limit = self.max_message_size
        if limit and size > limit:
            self._refuse_oversize(delivery)
        if transfer.more:
            chunks = delivery.chunks
            if chunks is None:
                chunks = delivery.chunks = []
            chunks.append(payload)
            self.partial_delivery = delivery
            return
        self._complete(delivery, payload)

    def deliveries_arrived(self, deliveries: list[Delivery], credit_room: int) -> None:
        """A run of whole single-frame deliveries, each checked and entered among the
        unsettled by :meth:`Session.on_transfer_run` (the hot path); ``credit_room`` is
        what :meth:`credit_room` said before the first. They are counted against the
        link's credit (:meth:`_count_deliveries`) and reported (:meth:`_report`)."""
        self._count_deliveries(len(deliveries), credit_room)
        self._report(deliveries)

    def _first_transfer(self, transfer: Transfer) -> Delivery:
        """A new delivery: its id and tag, its credit, and its place among the unsettled."""
        delivery_id = transfer.delivery_id
        tag = transfer.delivery_tag
        if delivery_id is None or tag is None:
            raise self._link_error(errors.NOT_ALLOWED, "first transfer of a delivery lacks delivery-id or delivery-tag")
        return self._start_delivery(int(delivery_id), bytes(tag), int(transfer.message_format or 0), transfer.settled)

    def credit_room(self) -> int:
        """How many more deliveries the highest grant ever made allows (serial_diff of that
        limit and delivery-count): zero or less, and the next one is excess (2.6.7)."""
        return flow_rules.credit_room(self._delivery_limit, self.delivery_count)

    def _count_deliveries(self, count: int, credit_room: int) -> None:
        """``count`` deliveries began (``credit_room``: what :meth:`credit_room` said before
        the first): each increments delivery-count and decrements link-credit (2.6.7); those
        beyond ``credit_room`` are excess, let in because the connection's config says so."""
        excess = count - max(credit_room, 0)
        if excess > 0:
            self.excess_transfers += excess
        credit, delivery_count = flow_rules.receiver_counted(self.link_credit, self.delivery_count, count)
        self.link_credit, self.delivery_count = credit, delivery_count

    def _start_delivery(self, delivery_id: int, tag: bytes, message_format: int, settled: bool | None) -> Delivery:
        """A delivery's first transfer: it increments delivery-count and decrements
        link-credit (2.6.7); one beyond every grant made is excess."""
        room = self.credit_room()
        if room <= 0 and self.session.connection.config.on_excess_transfer == "detach":
            # "the receiver MAY either handle the excess messages normally or detach
            # the link with a transfer-limit-exceeded error code" (2.6.7): the
            # connection's config chooses (RabbitMQ 3.x overshoots under load; the
            # session window still bounds the frames in flight).
            raise self._link_error(
                errors.TRANSFER_LIMIT_EXCEEDED,
                f"delivery-id {delivery_id} arrived with no link credit"
                f" (delivery-count {self.delivery_count}, limit {self._delivery_limit})",
            )
        self._count_deliveries(1, room)
        delivery = Delivery(self, tag, None, message_format)
        delivery.delivery_id = delivery_id
        if settled:
            delivery.remote_settled = True
        else:
            incoming = self.session.incoming_unsettled
            held = incoming.get(delivery_id)
            if held is not None:
                if not self.tolerate_reused_delivery_ids or held.link is not self:
                    raise errors.SessionProtocolError(
                        self.session.channel, errors.NOT_ALLOWED, f"delivery-id {delivery_id} is already in use"
                    )
                held.remote_settled = True  # the sender reused its id: it has settled it
                self.reused_delivery_ids += 1
            incoming[delivery_id] = delivery
            self.unsettled[delivery_id] = delivery
        return delivery

    def _continuation(self, delivery: Delivery, transfer: Transfer) -> None:
        if transfer.delivery_id is not None and int(transfer.delivery_id) != delivery.delivery_id:
            # "It is an error if the delivery-id on a continuation transfer differs
            # from the delivery-id on the first transfer of a delivery." (2.7.5)
            raise self._link_error(
                errors.NOT_ALLOWED,
                f"continuation transfer has delivery-id {int(transfer.delivery_id)},"
                f" the delivery began as {delivery.delivery_id}",
            )
        if transfer.settled:
            delivery.remote_settled = True

    def _transfer_settle_mode(self, delivery: Delivery, mode: int) -> None:
        if mode == RCV_SECOND and self.rcv_settle_mode == RCV_FIRST:
            # "If the negotiated link value is first, then it is illegal to set this
            # field to second." (2.7.5)
            raise self._link_error(
                errors.NOT_ALLOWED, "transfer asks rcv-settle-mode second on a link negotiated first"
            )
        # "If not set, this value is defaulted to the value negotiated on link attach."
        delivery.rcv_settle_mode = mode

    def _discard(self, delivery: Delivery) -> None:
        # "an aborted delivery ... MUST be discarded by the recipient" (2.6.14)
        self.partial_delivery = None
        delivery.chunks = None
        delivery.aborted = True
        delivery.settled = True
        if delivery.delivery_id is not None:
            self.unsettled.pop(delivery.delivery_id, None)
            self.session.forget_incoming(delivery)
        self.session.connection.event_queue.append(DeliveryAborted(self, delivery))
        self._drained_if_done()

    def _refuse_oversize(self, delivery: Delivery) -> None:
        """ "Any attempt to deliver a message larger than this results in a
        message-size-exceeded link-error." (2.7.3, max-message-size): the frames held so
        far are dropped and the link detaches."""
        self.partial_delivery = None
        delivery.chunks = None
        raise self._link_error(
            errors.MESSAGE_SIZE_EXCEEDED,
            f"link {self.name!r}: a message of {delivery.size} bytes or more exceeds max-message-size"
            f" {self.max_message_size}; the sender must send smaller messages or the receiver allow larger ones",
        )

    def _complete(self, delivery: Delivery, payload: memoryview) -> None:
        """The last transfer of a delivery: join its payload and hand it on."""
        self.partial_delivery = None
        chunks = delivery.chunks
        if chunks:
            chunks.append(payload)
            delivery.payload = b"".join(chunks)
            delivery.chunks = None
        else:
            delivery.payload = payload
        if delivery.remote_settled:
            # "settled ... MUST be interpreted as true if ... the settled flag on any of the
            # preceding transfers was true" (2.7.5): a delivery settled on a later frame
            # than its first leaves the unsettled map.
            if self.unsettled.pop(delivery.delivery_id, None) is not None:  # type: ignore[arg-type]  # set: it arrived
                self.session.forget_incoming(delivery)
            if self.snd_settle_mode != SND_SETTLED:
                delivery.settled = True
        if delivery.remote_state is None:
            self._report([delivery])
        else:  # its transfers carried a state (a transaction's): a run of their own kind
            self._report([delivery], StatefulDeliveriesReceived)
        if self.drain:
            self._drained_if_done()

    def _report(self, deliveries: list[Delivery], kind: type[DeliveriesReceived] = DeliveriesReceived) -> None:
        """Whole deliveries for the application, as a run: the last event's, when it is this
        link's run of the same ``kind`` and no other event came since, or a new one."""
        events = self.session.connection.event_queue
        if events and type(run := events[-1]) is kind and run.link is self:
            run.deliveries.extend(deliveries)  # the run goes on: no other event since
        else:
            events.append(kind(self, deliveries))

    def on_dispositions(self, deliveries: list[Delivery], settled: bool, state: Any, batchable: bool) -> None:
        """One disposition naming deliveries of this link (a run of its range, in
        delivery-id order): their states, and one :class:`DeliveriesUpdated` for them all."""
        self._dispositions_arrived(deliveries, settled, state)
        self.session.connection.event_queue.append(DeliveriesUpdated(self, deliveries, state, settled, batchable))

    def _dispositions_arrived(self, deliveries: Iterable[Delivery], settled: bool, state: Any) -> None:
        """The deliveries' states as one disposition of the peer sets them (the event is the caller's)."""
        if settled:
            unsettled = self.unsettled
            incoming = self.session.incoming_unsettled
            for delivery in deliveries:
                if state is not None:
                    delivery.remote_state = state
                delivery.remote_settled = True
                # The peer settling ends a delivery this side has given its outcome to
                # (rcv-settle-mode second, 2.8.3).
                if not delivery.settled and delivery.state is not None:
                    delivery.settled = True
                delivery_id: int = delivery.delivery_id  # type: ignore[assignment]  # set: it was sent or arrived
                unsettled.pop(delivery_id, None)
                incoming.pop(delivery_id, None)
        elif state is not None:
            for delivery in deliveries:
                delivery.remote_state = state

    def discard_partial(self) -> None:
        """Forget a half-received delivery and its frames at once (the transport is gone)."""
        delivery = self.partial_delivery
        if delivery is not None:
            self.partial_delivery = None
            delivery.chunks = None


def _provisional(state: Any) -> bool:
    """A ``transactional-state`` carrying a terminal outcome: the outcome the transaction's
    discharge will apply (part 4, 4.4.1)."""
    return type(state) is TransactionalState and isinstance(state.outcome, TERMINAL_OUTCOMES)


def error(condition: str, description: str | None = None, info: dict[Any, Any] | None = None) -> Error:
    """An :class:`Error` with a symbol condition (convenience for callers)."""
    return Error(condition=Symbol(condition), description=description, info=info)
