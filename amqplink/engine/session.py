"""Sessions (spec 2.5): transfer windows, link handles, deliveries and dispositions.

The window arithmetic of 2.5.6 is in :mod:`amqplink.engine.flow`, each rule beside its
quote; the session keeps the state under the spec's names and moves it in one method per
event:

- on begin (:meth:`Session.on_begin`): "next-incoming-id := next-outgoing-id(begin)",
  "remote-incoming-window := incoming-window(begin)", "remote-outgoing-window :=
  outgoing-window(begin)";
- on flow (:meth:`Session._update_remote_window`, :func:`flow.remote_incoming_window`);
- on sending transfer frames (:meth:`Session._frames_sent`, :func:`flow.session_sent`);
  none is sent while the window is 0 (:meth:`Session.write_deliveries`);
- on receiving them (:meth:`Session._transfer_arrived`, for one transfer or a run:
  :func:`flow.window_admits`, :func:`flow.session_received`); a transfer while
  incoming-window is 0 is a ``amqp:session:window-violation``.

Link credit is spent in :meth:`write_deliveries`, the one write path (a delivery's first
frame, :func:`flow.deliveries_sent`: credit, delivery-count and the next delivery-id) and
counted in :meth:`ReceiverLink._count_deliveries`;
a drain is answered in one place, :meth:`SenderLink.answer_drain`, at the next
:meth:`Connection.data_to_send`.

The incoming window is reopened (to its configured size, once half of it is used:
:func:`flow.window_to_reopen`) by a flow written at the next :meth:`Connection.data_to_send`:
a grant counts from the moment it leaves, so a peer that sends past what it has been
told is caught.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from amqplink.codec.encode import encode
from amqplink.codec.types import UInt, UShort
from amqplink.engine import errors
from amqplink.engine import flow as flow_rules
from amqplink.engine.events import LinkAttached, LinkAttachRequested, LinkDetached, SessionEnded
from amqplink.engine.frames import write_disposition
from amqplink.engine.hot_decode import (
    TransferFields,
    TransferLayout,
    scan_like,
    scan_transfer,
    transfer_from_fields,
    transfer_layout,
)
from amqplink.engine.link import (
    RCV_FIRST,
    SND_MIXED,
    SND_SETTLED,
    Delivery,
    Link,
    ReceiverLink,
    SenderLink,
)
from amqplink.engine.serial import SERIAL_MOD, serial_diff, serial_range
from amqplink.engine.states import SESSION_TRANSITIONS, LinkState, SessionState, Step, advance
from amqplink.engine.transactions import CoordinatorLink
from amqplink.engine.transfer_paths import SETTLED_TAIL, TRANSFER_OVERHEAD, UNSETTLED_TAIL
from amqplink.protocol.definitions import (
    Accepted,
    Attach,
    Begin,
    Coordinator,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Released,
    Source,
    Target,
    Transfer,
)

if TYPE_CHECKING:
    from amqplink.engine.connection import Connection

__all__ = ["Session"]

INITIAL_OUTGOING_ID = 0
_NO_LIMIT = float("inf")  # max-message-size 0 (or none): "no maximum" (2.7.3)

_MAPPED = SessionState.MAPPED
_END_RCVD = SessionState.END_RCVD
_END_SENT = SessionState.END_SENT
_ENDED = SessionState.ENDED
_LINK_ATTACH_SENT = LinkState.ATTACH_SENT
_LINK_ATTACHED = LinkState.ATTACHED
_LINK_DETACH_SENT = LinkState.DETACH_SENT
_LINK_ENDED = LinkState.ENDED


class Session:
    """One session on a connection: created by :meth:`Connection.begin_session`.

    Besides the application's calls (:meth:`attach_sender`, :meth:`attach_receiver`,
    :meth:`end`), a session has two seams, public and named, through which its
    collaborators reach it (they touch none of its private members:
    ``tests/test_engine_seams.py`` reads the source to keep it so):

    - what its connection asks of it: the peer's performatives, one handler each
      (:meth:`on_begin`, :meth:`on_attach`, :meth:`on_flow`, :meth:`on_transfer`, and
      :meth:`on_transfer_run` for the fast reader's run of transfers,
      :meth:`on_disposition`, :meth:`on_detach`, :meth:`on_end`), and :meth:`send_begin`,
      :meth:`flush_pending` (at :meth:`Connection.data_to_send`, once the session asked
      with :meth:`Connection.schedule_flush`), :meth:`flush_writes` (before a close),
      :meth:`abandon`, :meth:`abandon_links` and :meth:`discard_partial_deliveries`;
    - what a link may ask of its session: frames (:meth:`send_frame`, :meth:`send_attach`,
      :meth:`send_detach`), its deliveries written (:meth:`send_queued`,
      :meth:`write_deliveries`, the one write path, and for batched sends
      :meth:`write_later`, :meth:`write_batched`, :attr:`batched_sends`), a disposition
      queued (:meth:`queue_disposition`), a drain answered (:meth:`answer_drain_later`),
      and the session's unsettled deliveries by delivery-id
      (:attr:`incoming_unsettled`, :attr:`outgoing_unsettled`, :meth:`forget_incoming`,
      :meth:`forget_link`).

    These are the engine's own wiring: an application has no need to call them.
    """

    def __init__(
        self,
        connection: Connection,
        channel: int,
        *,
        incoming_window: int,
        outgoing_window: int,
        handle_max: int,
    ) -> None:
        self.connection = connection
        self.channel = channel
        self.remote_channel: int | None = None
        self.remote_begin: Begin | None = None
        self.remote_end: End | None = None
        self.state = SessionState.UNMAPPED
        """Where the session is in its begin/end exchange (:class:`SessionState`, 2.5.5)."""
        # 2.5.6 session state
        self.next_outgoing_id = INITIAL_OUTGOING_ID
        self.incoming_window = incoming_window
        self.max_incoming_window = incoming_window
        self.outgoing_window = outgoing_window
        self.next_incoming_id = 0
        self.remote_incoming_window = 0
        self.remote_outgoing_window = 0
        self.handle_max = handle_max
        self.context: Any = None
        self.links: dict[int, Link] = {}
        self._remote_links: dict[int, Link] = {}
        self._by_name: dict[tuple[str, bool], Link] = {}
        self._next_delivery_id = 0
        self.outgoing_unsettled: dict[int, Delivery] = {}
        """The unsettled deliveries this side sent, by delivery-id: delivery-ids are the
        session's ("unique among the deliveries on the session that are unsettled", 2.7.5),
        so the peer's dispositions name them here; a sender link removes the ones it settles."""
        self.incoming_unsettled: dict[int, Delivery] = {}
        """The unsettled deliveries this side received, by delivery-id (as
        :attr:`outgoing_unsettled`); a receiver link enters and removes them."""
        # Queued dispositions as runs [role, first, last, settled, state, batchable]: a
        # settlement that continues the last run extends it in place.
        self._dispositions: list[list[Any]] = []
        # Sender links waiting for the remote incoming window to open, each once.
        self._blocked: dict[SenderLink, None] = {}
        self.batched_sends: list[SenderLink] = []
        """The links of the sends made with ``batch_transfers`` since the last
        ``data_to_send``, in order (read-only for a link: a link that finds it non-empty
        calls :meth:`write_batched` before anything it writes must follow)."""
        # Sender links with a drain to answer at the next data_to_send (2.6.7).
        self._drains: dict[SenderLink, None] = {}
        self._pending = False  # registered with the connection for the next data_to_send
        self.error: Error | None = None
        """The error this side ended the session with."""

    def __repr__(self) -> str:
        return f"Session(channel={self.channel}, remote_channel={self.remote_channel}, {self.state.name})"

    @property
    def is_mapped(self) -> bool:
        """Begin sent and received, end neither."""
        return self.state is _MAPPED

    @property
    def is_ended(self) -> bool:
        """End sent or received (or the connection closed under the session)."""
        return self.state >= _END_RCVD

    @property
    def begin_sent(self) -> bool:
        """This side's begin is out (derived from ``state``)."""
        return self.state is not SessionState.UNMAPPED and self.state is not SessionState.BEGIN_RCVD

    @property
    def end_sent(self) -> bool:
        """This side has ended the session (or the connection closed under it)."""
        return self.state >= _END_SENT

    def _step(self, step: Step) -> None:
        self.state = advance(SESSION_TRANSITIONS, self.state, step, f"session {self.channel}")

    def abandon(self, reason: str) -> None:
        """The connection is over: the session and its links end with it."""
        self._step(Step.ABANDON)
        self.abandon_links(reason)

    def abandon_links(self, reason: str) -> None:
        """This side can send nothing more on the session: its links end, so a send on
        one raises at once (a link lives within its session: 2.5.5, 2.6.1)."""
        for link in self.links.values():
            link.abandon(reason)

    def discard_partial_deliveries(self) -> None:
        """The transport is gone: the links' half-received deliveries and their frames are
        let go of at once (:meth:`ReceiverLink.discard_partial`)."""
        for link in self.links.values():
            if isinstance(link, ReceiverLink):
                link.discard_partial()

    # -- frames out ------------------------------------------------------------
    def send_frame(self, frame: Any, payload: Any = None) -> None:
        """A frame on this session's channel (a link's flow, attach or detach): after the
        transfers of earlier batched sends and, unless it is one itself, the queued
        dispositions, so frames leave in the order they were made; nothing once this side
        has ended the session."""
        if self.state >= _END_SENT:
            return  # END SENT: "The endpoint MAY receive frames, but cannot send them." (2.5.5)
        if self.batched_sends:
            self.write_batched()  # the transfers of earlier sends go first
        if self._dispositions and type(frame) is not Disposition:
            self._flush_dispositions()
        self.connection.send_frame(self.channel, frame, payload)

    def _begin_frame(self) -> Begin:
        return Begin(
            remote_channel=UShort(self.remote_channel) if self.remote_channel is not None else None,
            next_outgoing_id=UInt(self.next_outgoing_id),
            incoming_window=UInt(self.incoming_window),
            outgoing_window=UInt(self.outgoing_window),
            handle_max=UInt(self.handle_max),
        )

    def send_begin(self) -> None:
        """This side's begin (2.5.2): the connection's, as it begins or answers a session."""
        self._step(Step.SEND_BEGIN)
        self.send_frame(self._begin_frame())

    def _session_flow(self, *, echo: bool = False) -> None:
        if self.batched_sends:
            self.write_batched()  # the flow's next-outgoing-id counts the transfers sent before it
        self.send_frame(
            Flow(
                next_incoming_id=UInt(self.next_incoming_id) if self.remote_begin is not None else None,
                incoming_window=UInt(self.incoming_window),
                next_outgoing_id=UInt(self.next_outgoing_id),
                outgoing_window=UInt(self.outgoing_window),
                echo=echo,
            )
        )

    def end(self, error: Error | None = None) -> None:
        """Send end; detaches every link of the session implicitly (2.5.5).

        With an error the session is DISCARDING: frames that arrive before the peer's
        end are dropped. A send on one of its links raises at once from now on.
        """
        if self.state >= _END_SENT:
            return
        self.flush_writes()
        self._step(Step.SEND_END_ERROR if error is not None else Step.SEND_END)
        self.error = error
        self.connection.send_frame(self.channel, End(error=error))
        self.abandon_links(f"session {self.channel} has ended")
        if self.state is _ENDED:
            self.connection.forget_session(self)

    # -- links -------------------------------------------------------------------
    def _allocate_handle(self) -> int:
        limit = self.handle_max
        if self.remote_begin is not None:
            limit = min(limit, int(self.remote_begin.handle_max))
        for handle in range(len(self.links) + 1):
            if handle not in self.links:
                if handle > limit:
                    break
                return handle
        raise errors.EngineStateError(f"session {self.channel}: all {limit + 1} link handles are in use")

    def _new_link(
        self,
        cls: type[Link],
        name: str,
        source: Source | None,
        target: Target | Coordinator | None,
        snd_settle_mode: int,
        rcv_settle_mode: int,
        properties: dict[Any, Any] | None,
        max_message_size: int | None,
    ) -> Link:
        if self.is_ended:
            raise errors.EngineStateError(f"session {self.channel} has ended")
        if max_message_size is None and not cls.is_sender:
            max_message_size = self.connection.config.max_message_size or None
        key = (name, cls.is_sender)
        if key in self._by_name:
            raise errors.EngineStateError(f"a link named {name!r} with this role already exists")
        link = cls(
            self,
            name,
            self._allocate_handle(),
            source,
            target,
            snd_settle_mode,
            rcv_settle_mode,
            properties,
            max_message_size,
        )
        self.links[link.handle] = link
        self._by_name[key] = link
        return link

    def attach_sender(
        self,
        name: str,
        *,
        source: Source | None = None,
        target: Target | Coordinator | None = None,
        snd_settle_mode: int = SND_MIXED,
        rcv_settle_mode: int = RCV_FIRST,
        properties: dict[Any, Any] | None = None,
        max_message_size: int | None = None,
        initial_delivery_count: int = 0,
        link_class: type[SenderLink] = SenderLink,
    ) -> SenderLink:
        """Create a sending link and send its attach (2.6.3).

        ``initial_delivery_count`` is "the sender's initial value for delivery-count"
        (2.7.3), any serial number (RabbitMQ 4 starts at 2**32-5). ``link_class``: a
        :class:`SenderLink` that does more (a transaction controller's link,
        :func:`~amqplink.engine.transactions.attach_controller`).
        """
        link = self._new_link(
            link_class, name, source, target, snd_settle_mode, rcv_settle_mode, properties, max_message_size
        )
        assert isinstance(link, SenderLink)
        if not 0 <= initial_delivery_count <= 0xFFFFFFFF:
            raise ValueError(f"initial_delivery_count must be a sequence-no (0..2**32-1): {initial_delivery_count}")
        link.delivery_count = initial_delivery_count
        link.attach(source, target)
        return link

    def attach_receiver(
        self,
        name: str,
        *,
        source: Source | None = None,
        target: Target | Coordinator | None = None,
        snd_settle_mode: int = SND_MIXED,
        rcv_settle_mode: int = RCV_FIRST,
        properties: dict[Any, Any] | None = None,
        max_message_size: int | None = None,
    ) -> ReceiverLink:
        """Create a receiving link and send its attach; grant credit with ``flow``."""
        link = self._new_link(
            ReceiverLink, name, source, target, snd_settle_mode, rcv_settle_mode, properties, max_message_size
        )
        assert isinstance(link, ReceiverLink)
        link.attach(source, target)
        return link

    def send_attach(self, link: Link) -> None:
        """``link``'s attach (:meth:`Link.attach_frame`), for the link."""
        self.send_frame(link.attach_frame())

    def send_detach(self, link: Link, error: Error | None, closed: bool) -> None:
        """``link``'s detach on its handle (2.6.6), for the link."""
        self.send_frame(Detach(handle=UInt(link.handle), closed=closed, error=error))

    def forget_link(self, link: Link) -> None:
        """``link`` is over: its handles and name are free again, and its unsettled
        deliveries leave the session's (delivery-ids are the session's: 2.7.5)."""
        self.links.pop(link.handle, None)
        if link.remote_handle is not None and self._remote_links.get(link.remote_handle) is link:
            del self._remote_links[link.remote_handle]
        self._by_name.pop((link.name, link.is_sender), None)
        table = self.outgoing_unsettled if link.is_sender else self.incoming_unsettled
        for delivery_id in list(getattr(link, "unsettled", {})):
            table.pop(delivery_id, None)

    # -- frames in ---------------------------------------------------------------
    def on_begin(self, begin: Begin) -> None:
        """The peer's begin: "next-incoming-id := next-outgoing-id(begin)", and the
        remote windows from it (2.5.6)."""
        self._step(Step.RECV_BEGIN)
        self.remote_begin = begin
        self.next_incoming_id = int(begin.next_outgoing_id)
        self.remote_incoming_window = int(begin.incoming_window)
        self.remote_outgoing_window = int(begin.outgoing_window)

    def _link_for(self, handle: Any) -> Link:
        link = self._remote_links.get(int(handle))
        if link is None:
            self._check_handle(int(handle))
            raise errors.SessionProtocolError(
                self.channel, errors.UNATTACHED_HANDLE, f"no link is attached on handle {int(handle)}"
            )
        return link

    def _check_handle(self, handle: int) -> None:
        if handle > self.handle_max:
            # "A peer that receives a handle outside the supported range MUST close the
            # connection with the framing-error error-code." (2.7.2)
            raise errors.ConnectionProtocolError(
                errors.FRAMING_ERROR, f"handle {handle} on channel {self.channel} exceeds handle-max {self.handle_max}"
            )

    def on_attach(self, attach: Attach) -> None:
        """The peer's attach: the answer to this side's (:class:`LinkAttached`) or a new
        link the peer asks for (:class:`LinkAttachRequested`)."""
        handle = int(attach.handle)
        self._check_handle(handle)
        if handle in self._remote_links:
            raise errors.SessionProtocolError(
                self.channel, errors.HANDLE_IN_USE, f"handle {handle} is already attached"
            )
        peer_is_sender = not attach.role
        # The local end of a link has the opposite role of the peer's end.
        link = self._by_name.get((attach.name, not peer_is_sender))
        if link is not None and link.state is _LINK_ENDED:
            return  # the peer's answer crossed this side's close
        events = self.connection.event_queue
        if (
            link is not None
            and link.remote_attach is None
            and (link.state is _LINK_ATTACH_SENT or link.state is _LINK_DETACH_SENT)
        ):
            # The peer answers this side's attach (perhaps one this side has detached
            # since: the peer's detach follows and ends the link).
            self._remote_links[handle] = link
            link.on_attach(attach)
            if link.state is _LINK_ATTACHED:
                events.append(LinkAttached(link))
                self._send_queued_if(link)
            return
        if link is not None:
            raise errors.SessionProtocolError(
                self.channel, errors.NOT_ALLOWED, f"link {attach.name!r} is already attached"
            )
        cls: type[Link] = ReceiverLink if peer_is_sender else SenderLink
        if peer_is_sender and type(attach.target) is Coordinator:
            cls = CoordinatorLink  # a control link (part 4, 4.2): the peer is a transaction controller
        try:
            new = self._new_link(
                cls,
                attach.name,
                attach.source,
                attach.target,
                int(attach.snd_settle_mode),
                int(attach.rcv_settle_mode),
                None,
                None,
            )
        except errors.EngineStateError as exc:  # no handle of ours left within the peer's handle-max
            raise errors.SessionProtocolError(self.channel, errors.RESOURCE_LIMIT_EXCEEDED, str(exc)) from None
        self._remote_links[handle] = new
        new.on_attach(attach)
        events.append(LinkAttachRequested(new))

    def on_detach(self, detach: Detach) -> None:
        """The peer's detach: the link answers it (:meth:`Link.on_detach`) and is forgotten;
        :class:`LinkDetached` reports it."""
        if self.batched_sends:
            self.write_batched()  # sent before the peer's detach was read: out before the answer
        link = self._link_for(detach.handle)
        if link.state is _LINK_ENDED:
            return  # the peer's detach crossed this side's close
        by_peer = link.on_detach(detach)
        self.forget_link(link)
        error = detach.error if by_peer else link.error
        self.connection.event_queue.append(LinkDetached(link, error, bool(detach.closed), by_peer))

    def on_flow(self, flow: Flow) -> None:
        """The peer's flow: the remote window (2.5.6), then its link's credit (2.6.7) or
        an echo; senders the window held back write again."""
        if self.batched_sends:
            self.write_batched()  # sent under the credit and window in force before this flow
        self._update_remote_window(flow)
        if flow.handle is not None:
            link = self._link_for(flow.handle)
            if link.state < _LINK_DETACH_SENT:
                link.on_flow(flow)
        elif flow.echo:
            self._session_flow()
        if self._blocked and self.remote_incoming_window > 0:
            blocked, self._blocked = self._blocked, {}
            for sender in blocked:
                self.send_queued(sender)

    def _update_remote_window(self, flow: Flow) -> None:
        """ "remote-incoming-window := next-incoming-id(flow) + incoming-window(flow) -
        next-outgoing-id(endpoint)", with initial-outgoing-id when next-incoming-id is
        unset (2.5.6). The ids are serial numbers, but the window is a uint: a peer may
        advertise up to 2**32-1 (Microsoft's stack does, for "unlimited")."""
        next_incoming = INITIAL_OUTGOING_ID if flow.next_incoming_id is None else int(flow.next_incoming_id)
        self.remote_incoming_window = flow_rules.remote_incoming_window(
            next_incoming, int(flow.incoming_window), self.next_outgoing_id
        )
        # "it MUST update the next-incoming-id directly from the next-outgoing-id of the
        # frame, and ... the remote-outgoing-window directly from the outgoing-window" (2.5.6)
        self.next_incoming_id = int(flow.next_outgoing_id)
        self.remote_outgoing_window = int(flow.outgoing_window)

    def on_transfer(self, transfer: Transfer, payload: memoryview) -> None:
        """One transfer frame, decoded (the reference reader's way in, and the fast
        reader's for any frame a run does not take): counted against the incoming window,
        then its link's (:meth:`Link.on_transfer`)."""
        link = self._link_for(transfer.handle)
        self._transfer_arrived()
        if link.state < _LINK_DETACH_SENT:
            link.on_transfer(transfer, payload)

    def on_transfer_run(
        self,
        fields: TransferFields,
        payload: memoryview,
        frames: Sequence[tuple[int, int, memoryview]],
        at: int,
        channel: int,
    ) -> int:
        """A transfer read by :func:`~amqplink.engine.hot_decode.scan_transfer`, and the
        transfers that follow it in ``frames`` from index ``at`` (all on ``channel``); the
        index of the first frame left for the caller.

        Whole single-frame deliveries on one attached receiving link with no delivery
        part-way in and no drain under way are taken as a run (the hot path): each is
        checked as it comes, the window, credit and delivery-count arithmetic is done
        once for the run, and the link reports them together
        (:meth:`ReceiverLink.deliveries_arrived`). A run stops before any frame that is
        not such a delivery or that would break a rule: that frame is left to the caller,
        which takes it through here again, where the first transfer of a run that cannot
        start goes to :meth:`on_transfer` (as a ``Transfer``), the one place that raises
        each error. So every rule holds at the very transfer that breaks it."""
        handle, delivery_id, tag, message_format, settled, more, _ = fields
        link: Any = self._remote_links.get(handle)
        if (
            link is None
            or more
            or delivery_id is None
            or tag is None
            or link.state is not _LINK_ATTACHED
            or link.is_sender
            or link.partial_delivery is not None
            or link.drain
        ):
            self.on_transfer(transfer_from_fields(fields), payload)
            return at
        # How many may come: the incoming window (2.5.6) and, where an excess delivery
        # detaches the link, the room left in every grant made (2.6.7).
        room = self.incoming_window
        credit_room = link.credit_room()
        if self.connection.config.on_excess_transfer == "detach" and credit_room < room:
            room = credit_room
        if room <= 0:
            self.on_transfer(transfer_from_fields(fields), payload)
            return at
        limit = link.max_message_size or _NO_LIMIT
        incoming = self.incoming_unsettled
        unsettled = link.unsettled
        # "settled ... MUST be interpreted as true" (2.7.5): a delivery the sender settled
        # is settled here too, unless the link's sender settles only (ReceiverLink._complete).
        settles = link.snd_settle_mode != SND_SETTLED
        deliveries: list[Delivery] = []
        append = deliveries.append
        stop = min(len(frames), at + room - 1)  # the frame index at which the run is full
        message_format = message_format or 0
        layout: TransferLayout | None = None
        fresh = True  # the layout is to be read from the transfer just taken
        while True:
            size = len(payload)
            if size > limit or delivery_id in incoming:
                # too large, or a delivery-id in use: the general path names the error
                if deliveries:
                    at -= 1
                    break
                self.on_transfer(transfer_from_fields(fields), payload)
                return at
            delivery = Delivery(link, tag, payload, message_format, False, delivery_id, size)
            if settled:
                delivery.remote_settled = True
                if settles:
                    delivery.settled = True
            else:
                incoming[delivery_id] = unsettled[delivery_id] = delivery
            append(delivery)
            if at >= stop:
                break
            frame_type, frame_channel, body = frames[at]
            if frame_type or frame_channel != channel:
                break
            if fresh:
                layout = transfer_layout(frames[at - 1][2])
                rest = slice(None if layout is None else layout[0], None)  # the payload after it
                fresh = False
            if layout is not None and (like := scan_like(body, layout)) is not None:
                delivery_id, tag = like  # laid out as the last one: only its delivery-id and tag differ
                payload = body[rest]
            else:
                if len(body) <= 5 or body[2] != 0x14:
                    break
                next_fields = scan_transfer(body)
                if next_fields is None:
                    break
                next_handle, delivery_id, tag, message_format, settled, more, offset = next_fields
                if next_handle != handle or more or delivery_id is None or tag is None:
                    break
                message_format = message_format or 0
                payload = body[offset:]
                fresh = True
            at += 1
        self._transfer_arrived(len(deliveries))
        link.deliveries_arrived(deliveries, credit_room)
        return at

    def _transfer_arrived(self, frames: int = 1) -> None:
        """The one place transfer frames received are counted (2.5.6): next-incoming-id
        goes up, incoming-window and remote-outgoing-window down, by one per frame; a
        transfer while incoming-window is 0 is a window violation (a run of ``frames``
        is counted once the caller has checked that the window holds them all). Once
        half the window is used, a flow reopening it goes out at the next ``data_to_send``."""
        if not flow_rules.window_admits(self.incoming_window, frames):
            raise errors.SessionProtocolError(
                self.channel,
                errors.WINDOW_VIOLATION,
                f"transfer received with incoming-window 0 (next-incoming-id {self.next_incoming_id})",
            )
        self.next_incoming_id, self.incoming_window, self.remote_outgoing_window = flow_rules.session_received(
            self.next_incoming_id, self.incoming_window, self.remote_outgoing_window, frames
        )
        if not self._pending and flow_rules.window_to_reopen(self.incoming_window, self.max_incoming_window):
            self._mark_pending()

    def on_disposition(self, disposition: Disposition) -> None:
        """The peer's disposition (2.7.6): apply its range ``first..last`` to this session's
        deliveries of that role, a run per link."""
        first = int(disposition.first)
        last = disposition.last  # None: one delivery (the usual, a settlement in turn)
        count = 1 if last is None else serial_diff(int(last), first) + 1
        if count <= 0:
            raise errors.SessionProtocolError(
                self.channel, errors.NOT_ALLOWED, f"disposition range {first}..{last} is empty"
            )
        # role true: the receiver speaks, about deliveries this side sent.
        table = self.outgoing_unsettled if disposition.role else self.incoming_unsettled
        settled = bool(disposition.settled)
        state = disposition.state
        batchable = bool(disposition.batchable)
        named: list[Delivery]
        if last is None:  # (the usual: one delivery-id)
            one = table.get(first)
            if one is None:
                return
            named = [one]
        else:
            ids: Any
            if count <= len(table):
                ids = serial_range(first, count)
            else:
                ids = [k for k in table if 0 <= serial_diff(k, first) < count]
            # Each link hears of each run of its deliveries in the range at once (in delivery-id
            # order); a delivery on its own is a run of one.
            named = list(filter(None, map(table.get, ids)))  # (a Delivery is true)
            if not named:
                return
        only: Any = named[0].link
        if len(named) == 1 or not [d for d in named if d.link is not only]:
            only.on_dispositions(named, settled, state, batchable)  # the usual: one run of one link
            return
        link: Any = only
        run: list[Delivery] = []
        for delivery in named:
            if delivery.link is not link:
                link.on_dispositions(run, settled, state, batchable)
                link, run = delivery.link, []
            run.append(delivery)
        link.on_dispositions(run, settled, state, batchable)

    def on_end(self, end: End) -> None:
        """The peer's end: answered with this side's unless this side ended first; the
        session and its links are over (:class:`SessionEnded`)."""
        if self.state is _ENDED:
            return  # the peer's end crossed this side's close: the session is over already
        self.remote_end = end
        by_peer = self.state < _END_SENT
        self._step(Step.RECV_END)
        if by_peer:
            self.flush_writes()
            self._step(Step.SEND_END)
            self.connection.send_frame(self.channel, End())
            self.abandon_links(f"the peer ended session {self.channel}")
        self.connection.forget_session(self)
        self.connection.event_queue.append(SessionEnded(self, end.error if by_peer else self.error, by_peer))

    # -- deliveries ----------------------------------------------------------------
    def forget_incoming(self, delivery: Delivery) -> None:
        """A received ``delivery`` is settled or aborted: its delivery-id is free again."""
        if delivery.delivery_id is not None:
            self.incoming_unsettled.pop(delivery.delivery_id, None)

    def _send_queued_if(self, link: Link) -> None:
        if isinstance(link, SenderLink) and link.queue:
            self.send_queued(link)

    def send_queued(self, link: SenderLink, limit: int = -1) -> None:
        """Write queued deliveries (the first ``limit``, when given) while link credit and
        the remote window allow."""
        # ATTACHED implies the session is mapped; ending the session or closing the
        # connection moves every link on to ENDED.
        if link.state is not _LINK_ATTACHED:
            return
        if self.batched_sends:
            self.write_batched()  # the batched sends, made earlier, go first
        queue = link.queue
        if queue and limit:
            written = self.write_deliveries(
                link, queue if limit < 0 or limit >= len(queue) else list(islice(queue, limit))
            )
            if written == len(queue):
                queue.clear()
            else:
                for _ in range(written):
                    queue.popleft()
        if link.drain and not queue and link.link_credit > 0:
            self.answer_drain_later(link)

    def write_deliveries(self, link: SenderLink, deliveries: Sequence[Delivery], fresh: bool = False) -> int:
        """The session's one write path: write the frames of ``deliveries``, in order, that
        the session window and the link credit allow; how many are all out (the first that
        is not ends the pass). Every delivery sent goes through here: a send's own
        (:meth:`SenderLink.send`), a link's queue (:meth:`send_queued`, and so the batched
        sends, :meth:`write_batched`), a run of new ones (``fresh``).

        ``fresh``: ``deliveries`` is a list of new, unsettled deliveries of message format 0,
        first in line on an attached ``link`` (as :meth:`SenderLink.send_all` makes them);
        the run the writer takes of them at once (``write_run``: one usual frame each, what
        credit, window and the delivery-ids up to the wrap allow) is written, and the rest
        left to the caller, which queues it.

        The frames are the connection's transfer writer's (:mod:`amqplink.engine.transfer_paths`);
        the credit, delivery-count and delivery-id arithmetic is :mod:`amqplink.engine.flow`'s.
        No transfer frame leaves while remote-incoming-window is zero (2.5.6): the link
        waits in ``_blocked`` (once, however many sends wait) for the peer's next flow.
        """
        conn = self.connection
        writer = conn.transfer_writer
        first_id = self._next_delivery_id
        if fresh:
            # "If the link-credit is less than or equal to zero ... a sender MUST NOT send more
            # messages" (2.6.7); no transfer while remote-incoming-window is zero (2.5.6); the
            # ids up to the wrap (a run's count up without wrapping).
            count = min(len(deliveries), link.link_credit, self.remote_incoming_window, SERIAL_MOD - first_id)
            if count <= 0:
                return 0
            written = writer.write_run(
                conn.frame_buffer(),
                self.channel,
                link.handle,
                deliveries,
                count,
                first_id,
                conn.remote_max_frame_size,
                self.outgoing_unsettled,
                link.unsettled,
                self._flush_dispositions if self._dispositions else None,  # before its first frame
            )
            if written:
                link.link_credit, link.delivery_count, self._next_delivery_id = flow_rules.deliveries_sent(
                    link.link_credit, link.delivery_count, first_id, written
                )
                self._frames_sent(written)
            return written
        room_for_tag = conn.remote_max_frame_size - TRANSFER_OVERHEAD
        out: bytearray | None = None
        channel = self.channel
        handle = link.handle
        outgoing = self.outgoing_unsettled
        unsettled = link.unsettled
        written = frames = 0  # frames: single-frame transfers written, counted once at the end
        # The tag size of the usual frames' parts, once a second single-frame delivery had one
        # (-1: none written yet; -2: one, or the writer has no parts for the link and tag size).
        run_tag_size = -1
        run_pack: Any = None
        run_middle = run_tag_head = b""
        run_base = 0
        # The deliveries given a delivery-id (numbered) since first_id, kept in locals in the loop:
        # the link's credit and delivery-count and the next delivery-id follow from them
        # (flow.deliveries_sent), stored back (_sync) before anything else runs and at the end.
        # The ids first_id + numbered stop short of the wrap (ids_left), where the count starts again.
        credit, count = link.link_credit, link.delivery_count
        numbered = 0
        ids_left = credit if first_id + credit <= SERIAL_MOD else SERIAL_MOD - first_id
        deliveries_sent = flow_rules.deliveries_sent
        window = self.remote_incoming_window
        try:
            for delivery in deliveries:
                if window - frames <= 0:
                    self._blocked[link] = None
                    break
                delivery_id = delivery.delivery_id
                if delivery_id is None:
                    if numbered >= ids_left:
                        # "If the link-credit is less than or equal to zero ... a sender MUST NOT
                        # send more messages" (2.6.7): the credit left is credit - numbered.
                        if numbered >= credit:
                            break
                        # the delivery-ids wrap here (2.8.9): they count on from the next, 0
                        credit, count, first_id = deliveries_sent(credit, count, first_id, numbered)
                        numbered, ids_left = 0, credit
                    delivery_id = delivery.delivery_id = first_id + numbered
                    numbered += 1
                    if not delivery.settled:
                        outgoing[delivery_id] = delivery
                        unsettled[delivery_id] = delivery
                tag = delivery.tag
                room = room_for_tag - len(tag)
                if delivery.offset or delivery.size > room:  # started, aborted or larger than a frame
                    # _sync
                    link.link_credit, link.delivery_count, self._next_delivery_id = deliveries_sent(
                        credit, count, first_id, numbered
                    )
                    if frames:
                        self._frames_sent(frames)
                        frames = 0
                    if room <= 0 and not delivery.aborted:
                        raise errors.EngineStateError(
                            f"max-frame-size {conn.remote_max_frame_size} leaves no room for a transfer"
                        )
                    sent = writer.write_frames(self.send_frame, handle, delivery, room, self.remote_incoming_window)
                    self._frames_sent(sent)
                    window = self.remote_incoming_window
                    if delivery.offset < delivery.size and not delivery.aborted:
                        self._blocked[link] = None  # the window closed part-way through the delivery
                        break
                    written += 1
                    continue
                # One frame, by the connection's transfer writer (transfer_paths).
                if out is None:
                    if self._dispositions:
                        self._flush_dispositions()
                    out = conn.frame_buffer()
                if len(tag) == run_tag_size and delivery_id >= 256 and not delivery.message_format:
                    # the writer's usual frame from the parts of this link's (the hottest path)
                    payload = delivery.payload
                    out += run_pack(
                        run_base + len(payload),
                        run_middle,
                        delivery_id,
                        run_tag_head,
                        tag,
                        SETTLED_TAIL if delivery.settled else UNSETTLED_TAIL,
                    )
                    out += payload
                    frames += 1
                    written += 1
                    continue
                if run_tag_size < 0:
                    if run_tag_size == -1:
                        run_tag_size = -2  # the first goes alone (a send's own: the usual case)
                    elif (parts := writer.run_parts(channel, handle, len(tag))) is not None:
                        run_pack, run_middle, run_tag_head, run_base = parts  # (for the next ones)
                        run_tag_size = len(tag)
                writer.write(
                    out,
                    channel,
                    handle,
                    delivery_id,
                    tag,
                    delivery.message_format,
                    delivery.settled,
                    delivery.payload,
                )
                frames += 1
                written += 1
        finally:
            # _sync
            link.link_credit, link.delivery_count, self._next_delivery_id = deliveries_sent(
                credit, count, first_id, numbered
            )
        if frames:
            self._frames_sent(frames)
        return written

    def _frames_sent(self, frames: int) -> None:
        """The one place transfer frames sent are counted (2.5.6): next-outgoing-id goes
        up and remote-incoming-window down by one for each."""
        self.next_outgoing_id, self.remote_incoming_window = flow_rules.session_sent(
            self.next_outgoing_id, self.remote_incoming_window, frames
        )

    def write_later(self, link: SenderLink, size: int) -> None:
        """``link`` (with ``batch_transfers``) queued a delivery of ``size`` bytes: it is
        written at the next ``data_to_send``, or before the next frame this session writes
        otherwise (:meth:`write_batched`); until then the connection counts the bytes as
        output (for back-pressure)."""
        self.connection.batched_bytes += size
        self.batched_sends.append(link)
        if not self._pending:
            self._mark_pending()

    def write_batched(self) -> None:
        """Write the deliveries batched sends queued as those sends, one after another,
        would have written them (:meth:`send_queued` up to each one: the same credit and
        session-window rules, delivery-ids and blocked order); a run of sends on one link
        is written at once."""
        sends, self.batched_sends = self.batched_sends, []
        if not sends:
            return
        link = sends[0]
        count = 0
        for each in sends:
            if each is link:
                count += 1
                continue
            self._write_sent(link, count)
            link, count = each, 1
        self._write_sent(link, count)

    def _write_sent(self, link: SenderLink, count: int) -> None:
        """What ``count`` more batched sends of ``link`` would have written."""
        link.batched_unwritten = waiting = max(0, link.batched_unwritten - count)
        self.send_queued(link, len(link.queue) - waiting)

    def flush_writes(self) -> None:
        """Before this side's end or close: batched transfers, then queued dispositions."""
        if self.batched_sends:
            self.write_batched()
        self._flush_dispositions()

    def answer_drain_later(self, link: SenderLink) -> None:
        """Answer ``link``'s drain at the next ``data_to_send`` (see :meth:`SenderLink.answer_drain`)."""
        self._drains[link] = None
        self._mark_pending()

    # -- dispositions ----------------------------------------------------------------
    def queue_disposition(
        self, role: bool, delivery_id: int, settled: bool, state: Any, batchable: bool = False, last: int = -1
    ) -> None:
        """Queue a disposition of ``delivery_id`` (through ``last``, when given: a range of
        consecutive delivery-ids with one state, 2.7.6)."""
        if self.batched_sends:
            self.write_batched()  # transfers sent before this settlement go out before it
        if last < 0:
            last = delivery_id
        runs = self._dispositions
        if runs:
            run = runs[-1]
            if (
                run[2] + 1 == delivery_id
                and run[0] is role
                and run[3] is settled
                and run[5] is batchable
                and (run[4] is state or run[4] == state)
            ):
                run[2] = last
                return
        elif not self._pending:
            self._mark_pending()
        runs.append([role, delivery_id, last, settled, state, batchable])

    def _mark_pending(self) -> None:
        if not self._pending:
            self._pending = True
            self.connection.schedule_flush(self)

    def flush_pending(self) -> None:
        """Called by :meth:`Connection.data_to_send`: queued dispositions, drain answers,
        then the flow that reopens the incoming window once half of it is used."""
        self._pending = False
        if self.batched_sends:
            self.write_batched()
        self._flush_dispositions()
        if self._drains:
            drains, self._drains = self._drains, {}
            for link in drains:
                link.answer_drain()
        reopen = flow_rules.window_to_reopen(self.incoming_window, self.max_incoming_window)
        if reopen and self.remote_begin is not None:
            self.incoming_window = self.max_incoming_window
            self._session_flow()

    def _flush_dispositions(self) -> None:
        """Send queued dispositions, merged into ranges (first..last) where they agree.

        ``batchable`` is carried as the application gave it; the engine sends at once
        either way ("This hint MAY be ignored", 2.7.6): every disposition queued before
        one ``data_to_send`` already leaves as few frames.
        """
        pending = self._dispositions
        if not pending or self.state >= _END_SENT:  # (end_sent, inline: once per flush)
            pending.clear()
            return
        self._dispositions = []
        if len(pending) > 1:
            pending.sort(key=_disposition_sort_key)
        role, first, last, settled, state, batchable = pending[0]
        write = self._write_disposition
        for r, f, la, s, st, b in pending[1:]:
            if r is role and s is settled and b is batchable and f == last + 1 and (st is state or st == state):
                last = la
                continue
            write(role, first, last, settled, state, batchable)
            role, first, last, settled, state, batchable = r, f, la, s, st, b
        write(role, first, last, settled, state, batchable)

    def _write_disposition(self, role: bool, first: int, last: int, settled: bool, state: Any, batchable: bool) -> None:
        """One disposition frame: hand-assembled when its state has no fields (accepted,
        released: the usual settlement), else encoded."""
        conn = self.connection
        encoded = None if batchable else _FIELDLESS_STATES.get(type(state))
        if encoded is not None and (out := conn.writable_buffer()) is not None:
            write_disposition(out, self.channel, role, first, last, settled, encoded)
        else:
            conn.send_frame(self.channel, _disposition(role, first, last, settled, state, batchable))


_FIELDLESS_STATES: dict[type, bytes] = {Accepted: encode(Accepted()), Released: encode(Released())}
"""The delivery states without fields, encoded once (:func:`write_disposition`'s ``state``)."""

# Runs sort by role, settled, batchable, then first delivery-id: runs that can merge
# into one first..last range end up next to each other.
_disposition_sort_key = itemgetter(0, 3, 5, 1)


def _disposition(role: bool, first: int, last: int, settled: bool, state: Any, batchable: bool) -> Disposition:
    return Disposition(
        role=role,
        first=UInt(first),
        last=UInt(last) if last != first else None,
        settled=settled,
        state=state,
        batchable=batchable,
    )
