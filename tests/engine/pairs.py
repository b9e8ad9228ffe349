"""Two engines wired back to back in memory (as qpid-proton's tests ``pump()``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from amqplink.codec.decode import decode
from amqplink.codec.types import UByte, UInt
from amqplink.engine.connection import Connection, ConnectionConfig
from amqplink.engine.events import DeliveriesReceived, DeliveriesUpdated, Event, LinkAttachRequested
from amqplink.engine.frames import AMQP_HEADER, FRAME_TYPE_AMQP, SASL_HEADER, FrameReader, write_frame, write_transfer
from amqplink.engine.link import RCV_SECOND, SND_UNSETTLED, Delivery, ReceiverLink, SenderLink
from amqplink.engine.sasl import SaslClient, SaslServer
from amqplink.engine.session import Session
from amqplink.protocol.definitions import Target, Transfer

E = TypeVar("E", bound=Event)


class Pair:
    """A client and a server engine with the events each has emitted so far."""

    def __init__(
        self,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
        *,
        sasl_client: SaslClient | None = None,
        sasl_server: SaslServer | None = None,
        auto_accept_links: bool = True,
    ) -> None:
        self.client = Connection(client_config or ConnectionConfig(container_id="client"), sasl=sasl_client)
        self.server = Connection(
            server_config or ConnectionConfig(container_id="server"), server=True, sasl=sasl_server
        )
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.auto_accept_links = auto_accept_links
        self.wire_c2s: list[bytes] = []
        self.wire_s2c: list[bytes] = []

    def pump(self, max_rounds: int = 10_000) -> None:
        """Move bytes both ways until neither side has anything left to send."""
        for _ in range(max_rounds):
            c2s = self.client.data_to_send()
            s2c = self.server.data_to_send()
            if not c2s and not s2c:
                return
            if c2s:
                self.wire_c2s.append(c2s)
                events = self.server.receive_data(c2s)
                self.server_events += events
                if self.auto_accept_links:
                    for ev in events:
                        if isinstance(ev, LinkAttachRequested):
                            ev.link.attach()
            if s2c:
                self.wire_s2c.append(s2c)
                self.client_events += self.client.receive_data(s2c)
        raise AssertionError("the engines never went quiet")

    def of(self, kind: type[E], side: str = "client") -> list[E]:
        events = self.client_events if side == "client" else self.server_events
        return [e for e in events if isinstance(e, kind)]

    def deliveries(self, side: str = "client") -> list[Delivery]:
        """The deliveries ``side`` received so far, in arrival order, whatever runs they came in."""
        return received_in(self.client_events if side == "client" else self.server_events)

    def updated(self, side: str = "client") -> list[tuple[Delivery, DeliveriesUpdated]]:
        """Each delivery the peer's dispositions changed on ``side``, with the event that told."""
        return updates_in(self.client_events if side == "client" else self.server_events)

    def take(self, side: str = "client") -> list[Event]:
        if side == "client":
            events, self.client_events = self.client_events, []
        else:
            events, self.server_events = self.server_events, []
        return events

    def open(self) -> Session:
        """Open the connection and one session; return the client's session."""
        self.client.open()
        session = self.client.begin_session()
        self.pump()
        assert self.client.is_open and self.server.is_open
        assert session.is_mapped
        return session

    def grant_and_send(self, sender: SenderLink, receiver: ReceiverLink, credit: int, count: int) -> None:
        """Grant ``credit``, then send ``count`` one-byte messages 0, 1, ...; pump after each."""
        receiver.flow(credit)
        self.pump()
        for i in range(count):
            sender.send(bytes([i % 256]))
        self.pump()

    def server_link(self, name: str, *, sender: bool) -> SenderLink | ReceiverLink:
        for session in self.server.sessions.values():
            for link in session.links.values():
                if link.name == name and link.is_sender == sender:
                    assert isinstance(link, SenderLink | ReceiverLink)
                    return link
        raise AssertionError(f"server has no link {name!r}")


def received_in(events: list[Event]) -> list[Delivery]:
    """The deliveries of the ``DeliveriesReceived`` among ``events``, in order."""
    return [d for e in events if isinstance(e, DeliveriesReceived) for d in e.deliveries]


def updates_in(events: list[Event]) -> list[tuple[Delivery, DeliveriesUpdated]]:
    """Each delivery a ``DeliveriesUpdated`` among ``events`` names, with its event, in order."""
    return [(d, e) for e in events if isinstance(e, DeliveriesUpdated) for d in e.deliveries]


def unsettled_link(window: int, max_frame_size: int) -> tuple[Pair, Session, SenderLink, ReceiverLink]:
    """An open pair whose server has ``window`` for incoming-window and ``max_frame_size``,
    and a link "a" attached both ways: the client's unsettled sender (rcv-settle-mode
    second, as the SDK's PeekLock asks) and the server's receiver, no credit granted yet."""
    pair = Pair(
        server_config=ConnectionConfig(container_id="server", incoming_window=window, max_frame_size=max_frame_size)
    )
    session = pair.open()
    sender = session.attach_sender(
        "a", target=Target(address="a"), snd_settle_mode=SND_UNSETTLED, rcv_settle_mode=RCV_SECOND
    )
    pair.pump()
    receiver = pair.server_link("a", sender=False)
    assert isinstance(receiver, ReceiverLink)
    return pair, session, sender, receiver


class FrameTap:
    """A captured byte stream decoded as it comes: each :meth:`feed` returns the
    (channel, performative, payload) triples its bytes complete (protocol headers skipped)."""

    def __init__(self) -> None:
        self._reader = FrameReader(1 << 30)

    def feed(self, data: bytes) -> list[tuple[int, Any, bytes]]:
        reader = self._reader
        reader.feed(data)
        out: list[tuple[int, Any, bytes]] = []
        while True:
            if reader.buffered >= 8:
                peek = reader._buf[reader._pos : reader._pos + 8]  # test-only peek
                if peek in (AMQP_HEADER, SASL_HEADER):
                    reader.read_protocol_header()
                    continue
            frame = reader.read_frame()
            if frame is None:
                return out
            _, channel, body = frame
            if not body:
                out.append((channel, None, b""))
                continue
            performative, offset = decode(body)
            out.append((channel, performative, bytes(body[offset:])))


def frames_in(chunks: list[bytes], *, sasl: bool = False) -> list[tuple[int, Any, bytes]]:
    """Decode a captured byte stream into (channel, performative, payload) triples."""
    return FrameTap().feed(b"".join(chunks))


def first_transfer(handle: int, delivery_id: int, tag: bytes, message_format: int, settled: bool) -> Transfer:
    """The first (or only) transfer of a delivery, with the fields the hot path reads."""
    return Transfer(
        handle=UInt(handle),
        delivery_id=UInt(delivery_id),
        delivery_tag=tag,
        message_format=UInt(message_format),
        settled=settled,
    )


def write_in_pieces(out: bytearray, first: Transfer, payload: bytes, *, aborted: bool = False) -> None:
    """A delivery in transfer frames of at most 300 bytes of payload, ``first`` leading;
    ``aborted``: the first frame, then an aborted transfer (2.6.14)."""
    handle = first.handle
    chunks = [payload[i : i + 300] for i in range(0, len(payload), 300)] or [b""]
    first.more = len(chunks) > 1 or aborted
    write_frame(out, FRAME_TYPE_AMQP, 0, first, chunks[0])
    if aborted:
        write_frame(out, FRAME_TYPE_AMQP, 0, Transfer(handle=handle, aborted=True))
        return
    for i, chunk in enumerate(chunks[1:], 2):
        write_frame(out, FRAME_TYPE_AMQP, 0, Transfer(handle=handle, more=i < len(chunks)), chunk)


WHOLE_KINDS = ("whole", "whole-other", "bad-handle", "reused-id", "large")
"""Kinds of planned delivery :func:`write_planned` writes as one transfer frame."""


def write_planned(
    out: bytearray,
    kind: str,
    handle: int,
    delivery_id: int,
    tag: bytes,
    settled: bool,
    payload: bytes,
    message_format: int = 0,
    *,
    max_whole: int,
) -> int:
    """One delivery of a transfer-path test's plan: a kind of :data:`WHOLE_KINDS` as one
    transfer frame when ``payload`` has at most ``max_whole`` bytes; "rcv-mode" and
    "batchable" as a first frame of at most 300 bytes with that field set; anything else in
    pieces (:func:`write_in_pieces`, "aborted" aborts after the first). The next
    delivery-id ("reused-id" leaves it for the next delivery to use again)."""
    first = first_transfer(handle, delivery_id, tag, message_format, settled)
    if kind in WHOLE_KINDS and len(payload) <= max_whole:
        write_transfer(out, 0, handle, delivery_id, tag, message_format, settled, payload)
    elif kind in ("rcv-mode", "batchable"):
        if kind == "rcv-mode":
            first.rcv_settle_mode = UByte(0)
        else:
            first.batchable = True
        write_frame(out, FRAME_TYPE_AMQP, 0, first, payload[:300])
    else:
        write_in_pieces(out, first, payload, aborted=kind == "aborted")
    return delivery_id if kind == "reused-id" else delivery_id + 1


def frame(channel: int, performative: Any, payload: bytes = b"") -> bytes:
    """One AMQP frame, as a peer would write it (for feeding hand-made frames)."""
    out = bytearray()
    write_frame(out, FRAME_TYPE_AMQP, channel, performative, payload)
    return bytes(out)


def performatives(chunks: list[bytes], kind: type) -> list[Any]:
    return [p for _, p, _ in frames_in(chunks) if isinstance(p, kind)]


def run_until(pair: Pair, condition: Callable[[], bool], rounds: int = 100) -> None:
    for _ in range(rounds):
        if condition():
            return
        pair.pump()
    assert condition()
