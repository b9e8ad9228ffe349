"""The sans-IO connection (spec 2.4): bytes in, events out.

    conn = Connection(ConnectionConfig(container_id="me"), sasl=SaslClient())
    conn.open()
    transport.write(conn.data_to_send())
    for event in conn.receive_data(transport.read()): ...
    conn.tick(now)          # idle time-out: heartbeats and the silent-peer check

No sockets, threads or timers: time comes in as an argument, so the same bytes and
clock give the same events. A peer that breaks the protocol never makes
``receive_data`` raise: the engine closes the connection (or ends the session,
detaches the link) with the spec's error condition and reports it as an event.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from amqplink.codec.decode import decode
from amqplink.codec.errors import DecodeError
from amqplink.codec.types import Symbol, UByte, UInt, UShort
from amqplink.engine import errors
from amqplink.engine.events import (
    ConnectionClosed,
    ConnectionOpened,
    Event,
    SaslCompleted,
    SessionBegun,
)
from amqplink.engine.frames import (
    AMQP_HEADER,
    FRAME_TYPE_AMQP,
    FRAME_TYPE_SASL,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    FrameReader,
    FramingError,
    heartbeat,
    split_frames,
    write_frame,
)
from amqplink.engine.link import DEFAULT_MAX_MESSAGE_SIZE
from amqplink.engine.sasl import (
    SASL_AUTH,
    SASL_SYS,
    SASL_SYS_PERM,
    SASL_SYS_TEMP,
    SaslClient,
    SaslFailed,
    SaslServer,
)
from amqplink.engine.session import Session
from amqplink.engine.states import (
    CONNECTION_TRANSITIONS,
    ConnectionState,
    IllegalTransition,
    SessionState,
    Step,
    advance,
)
from amqplink.engine.transactions import TransactionTable
from amqplink.engine.transfer_paths import (
    FAST_READER,
    FAST_WRITER,
    REFERENCE_READER,
    REFERENCE_WRITER,
    TransferReader,
    TransferWriter,
)
from amqplink.protocol.definitions import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    Transfer,
)

__all__ = ["DEFAULT_MIN_PEER_IDLE_TIMEOUT", "Connection", "ConnectionConfig"]

log = logging.getLogger(__name__)
# Every frame in and out, at DEBUG (as proton's PN_TRACE_FRM): performatives with
# their fields (SASL responses redacted), payloads by size only. Checked once per
# connection, so enable it before connecting.
frame_log = logging.getLogger("amqplink.frames")

_EXPECT_SASL_HEADER = "sasl-header"
_EXPECT_SASL_FRAMES = "sasl-frames"
_EXPECT_AMQP_HEADER = "amqp-header"
_EXPECT_FRAMES = "frames"
_EXPECT_NOTHING = "nothing"

# The condition a connection ends with when SASL fails, by sasl-code (5.3.3.6): a
# refused credential or a permanent failure is not worth retrying as it is; "sys" and
# "sys-temp" are the server's own trouble, so reconnecting later may succeed.
_SASL_CONDITIONS = {
    SASL_AUTH: errors.UNAUTHORIZED_ACCESS,
    SASL_SYS_PERM: errors.UNAUTHORIZED_ACCESS,
    SASL_SYS: errors.CONNECTION_FORCED,
    SASL_SYS_TEMP: errors.CONNECTION_FORCED,
}
_SASL_CODE = Symbol("sasl-code")

_START = ConnectionState.START
_OPEN_SENT = ConnectionState.OPEN_SENT
_OPEN_RCVD = ConnectionState.OPEN_RCVD
_OPENED = ConnectionState.OPENED
_CLOSE_RCVD = ConnectionState.CLOSE_RCVD
_CLOSE_SENT = ConnectionState.CLOSE_SENT
_DISCARDING = ConnectionState.DISCARDING
_END = ConnectionState.END
_SESSION_BEGIN_SENT = SessionState.BEGIN_SENT
_SESSION_END_SENT = SessionState.END_SENT
_SESSION_ERRORS = (errors.LinkProtocolError, errors.SessionProtocolError, IllegalTransition)
"""What a session's handling of a transfer, disposition or flow may raise: the session ends
with it (:meth:`Connection._session_failed`), the connection goes on."""
_SESSION_ENDED = SessionState.ENDED


DEFAULT_MIN_PEER_IDLE_TIMEOUT = 0.1
"""Seconds: a peer asking for a shorter idle time-out is refused (2.4.5), see ConnectionConfig."""


@dataclass(slots=True)
class ConnectionConfig:
    """Plain, picklable settings of one connection endpoint.

    ``idle_timeout`` is this side's threshold in seconds: the peer is told half of it
    ("it is recommended that the value of idle-time-out be half the actual timeout
    threshold", 2.4.5) and the connection closes with
    ``amqp:resource-limit-exceeded`` after ``idle_timeout`` seconds of silence.

    ``on_excess_transfer`` decides what a receiving link does with a delivery beyond
    every credit limit it ever granted: "the receiver MAY either handle the excess
    messages normally or detach the link with a transfer-limit-exceeded error code"
    (2.6.7). ``"detach"`` (the default) enforces the limit; ``"deliver"`` hands the
    delivery on and counts it in ``ReceiverLink.excess_transfers`` (for peers such as
    RabbitMQ 3.x that overshoot under load).

    ``max_message_size`` is the largest message a receiving link on this connection
    accepts unless its own ``max_message_size`` says otherwise, in bytes (``0``: no
    limit). It is advertised in the link's attach, and a larger delivery detaches the
    link with ``amqp:link:message-size-exceeded`` (2.7.3) instead of being held.

    ``min_peer_idle_timeout`` (seconds) is the shortest idle time-out this side honours
    from the peer. "If a peer can not, for any reason support a proposed idle timeout,
    then it SHOULD close the connection using the close frame with an error explaining
    why. There is no requirement for peers to support arbitrarily short or long idle
    timeouts." (2.4.5): a peer that asks for less (say 1 ms: hundreds of heartbeats a
    second) gets a close with ``amqp:not-implemented`` naming both values; nothing is
    clamped, since a clamped heartbeat would only make that peer time us out.
    """

    container_id: str = field(default_factory=lambda: f"amqplink-{uuid.uuid4()}")
    hostname: str | None = None
    max_frame_size: int = 65536
    channel_max: int = 255
    idle_timeout: float | None = None
    incoming_window: int = 5000
    outgoing_window: int = 0x7FFFFFFF
    handle_max: int = 1023
    properties: dict[Any, Any] | None = None
    offered_capabilities: list[str] | None = None
    desired_capabilities: list[str] | None = None
    on_excess_transfer: Literal["detach", "deliver"] = "detach"
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    min_peer_idle_timeout: float = DEFAULT_MIN_PEER_IDLE_TIMEOUT
    trace_level: int | None = None
    """Log this connection's frames on ``amqplink.frames`` at this level (e.g. ``logging.INFO``:
    one connection traced without turning on every connection's DEBUG trace); None: at DEBUG,
    when that logger is enabled for it."""

    def __post_init__(self) -> None:
        if self.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be at least {MIN_MAX_FRAME_SIZE}")
        if not 0 <= self.channel_max <= 0xFFFF:
            raise ValueError("channel_max must be within 0..65535")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ValueError("idle_timeout must be positive (or None to disable it)")
        if self.min_peer_idle_timeout < 0:
            raise ValueError("min_peer_idle_timeout must not be negative")
        if self.incoming_window < 1:
            raise ValueError("incoming_window must be at least 1")
        if not 0 <= self.max_message_size <= 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"max_message_size must be within 0..2**64-1 (0: no limit), not {self.max_message_size}")
        if self.on_excess_transfer not in ("detach", "deliver"):
            raise ValueError(f"on_excess_transfer must be 'detach' or 'deliver', not {self.on_excess_transfer!r}")


class Connection:
    """A sans-IO AMQP 1.0 connection endpoint, client or server role.

    In the server role the engine answers the protocol headers, SASL, open and begin
    on its own, and reports links the peer attaches as
    :class:`~amqplink.engine.events.LinkAttachRequested` for the application to
    accept or refuse.

    ``fast_paths`` (default on) chooses how transfers are written and read: the fast
    implementations or the reference ones (:mod:`amqplink.engine.transfer_paths`); the
    bytes and events are the same either way, and frame tracing works on both.
    """

    def __init__(
        self,
        config: ConnectionConfig | None = None,
        *,
        server: bool = False,
        sasl: SaslClient | SaslServer | None = None,
        fast_paths: bool = True,
    ) -> None:
        self.config = config or ConnectionConfig()
        self.server = server
        if sasl is not None and isinstance(sasl, SaslServer) != server:
            raise ValueError("a server takes a SaslServer, a client a SaslClient")
        self.sasl = sasl
        self._reader = FrameReader(self.config.max_frame_size)
        self._out = bytearray()
        self._deferred: bytearray | None = None
        self.event_queue: list[Event] = []
        """Events made since they were last taken (:meth:`take_events`): the connection's
        sessions and links append theirs here, in order."""
        self._trace_level = logging.DEBUG if config is None or config.trace_level is None else config.trace_level
        self._trace = frame_log.isEnabledFor(self._trace_level)
        self.transfer_writer: TransferWriter = FAST_WRITER
        """How this connection writes transfer frames (chosen by :attr:`fast_paths`)."""
        self.transfer_reader: TransferReader = FAST_READER
        """How this connection reads frame bodies (chosen by :attr:`fast_paths`)."""
        self.fast_paths = fast_paths
        self._expect = _EXPECT_SASL_HEADER if sasl is not None else _EXPECT_AMQP_HEADER
        self._header_sent = False
        self.state = _START
        """Where the connection is in its open/close exchange (:class:`ConnectionState`)."""
        self.remote_open: Open | None = None
        self.remote_close: Close | None = None
        self.error: Error | None = None
        # "Prior to any explicit negotiation, the maximum frame size is 512
        # (MIN-MAX-FRAME-SIZE) and the maximum channel number is 0." (2.4.1)
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_channel_max = 0
        self.sessions: dict[int, Session] = {}
        self._remote_sessions: dict[int, Session] = {}
        self._ended_remote_channels: set[int] = set()
        """Channels the peer ended a session on and has not begun one on since (at most
        channel-max + 1 of them): frames it still sends there are stragglers."""
        self._pending_sessions: list[Session] = []
        self.transactions: TransactionTable | None = None
        """The transactions this side's coordinators declared, by txn-id (made on first use:
        :meth:`TransactionTable.of <amqplink.engine.transactions.TransactionTable.of>`)."""
        self.batched_bytes = 0
        """Payload bytes that links with ``batch_transfers`` queued for the next
        :meth:`data_to_send` (counted as output by :meth:`output_size`)."""
        self._rx = False
        self._tx = False
        self._last_rx: float | None = None
        self._last_tx: float | None = None

    def __repr__(self) -> str:
        role = "server" if self.server else "client"
        return f"Connection({role}, container_id={self.config.container_id!r}, {self.state.name})"

    # -- state -------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """Open sent and received, close neither."""
        return self.state is _OPENED

    @property
    def open_sent(self) -> bool:
        """This side's open is out, or the connection is over (derived from ``state``)."""
        return self.state is not _START and self.state is not _OPEN_RCVD

    @property
    def close_sent(self) -> bool:
        """This side has closed, or the connection is over (no more frames go out)."""
        return self.state >= _CLOSE_SENT

    @property
    def closed(self) -> bool:
        """Nothing more will be read or written: closed by both sides, after an error
        (DISCARDING), or the transport ended."""
        return self.state >= _DISCARDING

    def _step(self, step: Step) -> None:
        self.state = advance(CONNECTION_TRANSITIONS, self.state, step, "connection")

    def _abandon_sessions(self, reason: str) -> None:
        """Closing a connection ends its sessions and their links (2.4.3, 2.5.5)."""
        for session in self.sessions.values():
            if session.state is not _SESSION_ENDED:
                session.abandon(reason)

    @property
    def fast_paths(self) -> bool:
        """Whether transfers are written and read by the fast implementations
        (:mod:`amqplink.engine.transfer_paths`): hand-assembled frames and runs of
        deliveries, plain-field reads and the straight-line decoders. Off, every frame
        goes through the reference ``Transfer`` encoder and the generic decoder; the
        bytes and events are the same either way (the differential tests switch this).
        Frame tracing works on both and chooses neither."""
        return self.transfer_writer.fast

    @fast_paths.setter
    def fast_paths(self, on: bool) -> None:
        self.transfer_writer = FAST_WRITER if on else REFERENCE_WRITER
        self.transfer_reader = FAST_READER if on else REFERENCE_READER

    @property
    def fast_transfers(self) -> bool:
        """The former name of :attr:`fast_paths`."""
        return self.fast_paths

    @fast_transfers.setter
    def fast_transfers(self, on: bool) -> None:
        self.fast_paths = on

    # -- output --------------------------------------------------------------------
    def data_to_send(self) -> bytes | bytearray:
        """The bytes to write to the transport now (dispositions are coalesced here): a
        buffer the engine lets go of, so the caller may keep it (no copy is made: copying a
        megabyte of transfers and regrowing the buffer cost more than the frames did)."""
        if self._pending_sessions:
            pending, self._pending_sessions = self._pending_sessions, []
            for session in pending:
                session.flush_pending()
            self.batched_bytes = 0
        if not self._out:
            return b""
        data = self._out
        self._out = bytearray()
        self._tx = True
        if self._trace:
            self._trace_frames("->", split_frames(data))
        return data

    def output_size(self) -> int:
        """Bytes written and not yet taken by :meth:`data_to_send` (for back-pressure),
        with the payloads of deliveries batched for it (``SenderLink.batch_transfers``).
        A method, not a property: an I/O adapter asks on every send, and a method call
        costs the interpreter less."""
        return len(self._out) + self.batched_bytes

    # -- the API the connection's sessions write through ------------------------------
    def frame_buffer(self) -> bytearray:
        """The buffer frames go into now, for a transfer writer to append to: the output,
        or while a SASL client waits for its outcome, the frames held back behind it."""
        return self._deferred if self._deferred is not None else self._out

    def writable_buffer(self) -> bytearray | None:
        """:meth:`frame_buffer` if a session may append a hand-assembled frame to it, else
        None: the fast paths are off, or a close was sent ("It is illegal to write anything
        more onto the connection", 2.4.6)."""
        if self.transfer_writer.fast and self.state < _CLOSE_SENT:
            return self._deferred if self._deferred is not None else self._out
        return None

    def schedule_flush(self, session: Session) -> None:
        """Call ``session.flush_pending`` at the next :meth:`data_to_send` (the session
        registers once until then)."""
        self._pending_sessions.append(session)

    def send_frame(self, channel: int, frame: Any, payload: Any = None) -> None:
        """Encode a performative (and its payload) as a frame on ``channel``, unless the
        connection has closed; a frame larger than the peer's max-frame-size is not sent
        and the connection closes with ``amqp:frame-size-too-small``."""
        if self.state >= _CLOSE_SENT and type(frame) is not Close:
            # CLOSE SENT: "It is illegal to write anything more onto the connection" (2.4.6)
            return
        out = self._deferred if self._deferred is not None else self._out
        size = write_frame(out, FRAME_TYPE_AMQP, channel, frame, payload)
        # "A peer MUST NOT send frames larger than its partner can handle." (2.7.1); before
        # its open arrives, that is 512 bytes (pipelined frames included, 2.4.2).
        if size > self.remote_max_frame_size:
            del out[len(out) - size :]
            self._frame_too_large(channel, frame, size)

    def _frame_too_large(self, channel: int, frame: Any, size: int) -> None:
        """A frame does not fit the peer's max-frame-size: it is not sent, and the
        connection closes with ``amqp:frame-size-too-small`` (2.8.15)."""
        out = self._deferred if self._deferred is not None else self._out
        if type(frame) is Close:
            # The close must still go out; its condition alone fits in any frame.
            error = frame.error
            write_frame(out, FRAME_TYPE_AMQP, channel, Close(Error(condition=error.condition) if error else None))
            return
        self._fail(
            errors.FRAME_SIZE_TOO_SMALL,
            f"a {type(frame).__name__} frame of {size} bytes exceeds the peer's max-frame-size"
            f" {self.remote_max_frame_size}",
        )

    def _start_header(self) -> None:
        if self._header_sent:
            return
        self._header_sent = True
        if isinstance(self.sasl, SaslClient):
            self._out += SASL_HEADER
            self._deferred = bytearray()
        elif self.sasl is None:
            self._out += AMQP_HEADER

    # -- application calls ------------------------------------------------------
    def open(self) -> None:
        """Send the protocol header(s) and open; later frames may be pipelined behind."""
        state = self.state
        if state is not _START and state is not _OPEN_RCVD:
            if self.closed and self.remote_open is None:
                raise errors.EngineStateError("connection is closed")
            return
        if not self.server:
            self._start_header()
        self._step(Step.SEND_OPEN)
        cfg = self.config
        idle_ms = UInt(int(cfg.idle_timeout * 500)) if cfg.idle_timeout else None
        self.send_frame(
            0,
            Open(
                container_id=cfg.container_id,
                hostname=cfg.hostname,
                max_frame_size=UInt(cfg.max_frame_size),
                channel_max=UShort(cfg.channel_max),
                idle_time_out=idle_ms,
                offered_capabilities=_symbols(cfg.offered_capabilities),
                desired_capabilities=_symbols(cfg.desired_capabilities),
                properties=cfg.properties,
            ),
        )

    def close(self, error: Error | None = None) -> None:
        """Send close (2.4.3). A :class:`ConnectionClosed` event follows the peer's close.

        Every session and link ends with it: a send on one raises at once.
        """
        if self.state >= _CLOSE_RCVD:
            return
        if self.state is _START or self.state is _OPEN_RCVD:
            self.open()
        for session in list(self.sessions.values()):
            session.flush_writes()
        self._step(Step.SEND_CLOSE)
        self.error = error
        self.send_frame(0, Close(error=error))
        # Nothing more goes out, but frames still come in until the peer's close
        # (2.4.6 CLOSE_SENT): outcomes that arrive now still settle deliveries.
        for session in self.sessions.values():
            session.abandon_links("the connection is closing")

    def begin_session(
        self,
        *,
        incoming_window: int | None = None,
        handle_max: int | None = None,
    ) -> Session:
        """Create a session on the lowest free channel and send begin (2.5.2)."""
        if self.state >= _CLOSE_RCVD:
            raise errors.EngineStateError("connection is closed")
        if self.state is _START or self.state is _OPEN_RCVD:
            self.open()
        limit = min(self.config.channel_max, self.remote_channel_max)
        channel = next((c for c in range(limit + 1) if c not in self.sessions), None)
        if channel is None:
            raise errors.EngineStateError(f"all {limit + 1} channels are in use")
        session = self._new_session(channel, incoming_window, handle_max)
        session.send_begin()
        return session

    def _new_session(self, channel: int, incoming_window: int | None, handle_max: int | None) -> Session:
        cfg = self.config
        session = Session(
            self,
            channel,
            incoming_window=incoming_window or cfg.incoming_window,
            outgoing_window=cfg.outgoing_window,
            handle_max=cfg.handle_max if handle_max is None else handle_max,
        )
        self.sessions[channel] = session
        return session

    def forget_session(self, session: Session) -> None:
        """Drop an ended session from the channel tables (the session calls it once it has ended both ways)."""
        if session.state is not _SESSION_ENDED:
            return
        if self.sessions.get(session.channel) is session:
            del self.sessions[session.channel]
        if session.remote_channel is not None and self._remote_sessions.get(session.remote_channel) is session:
            del self._remote_sessions[session.remote_channel]

    def transport_closed(self, reason: str = "transport closed") -> list[Event]:
        """The transport ended (socket closed): report it (``reason`` its description) if the
        close was not clean."""
        self._release_partial_deliveries()
        if not self.closed:
            self._step(Step.ABANDON)
            self._expect = _EXPECT_NOTHING
            self._abandon_sessions("the connection's transport closed")
            if self.remote_close is None:
                self.event_queue.append(
                    ConnectionClosed(Error(condition=errors.CONNECTION_FORCED, description=reason), True)
                )
        return self.take_events()

    def _release_partial_deliveries(self) -> None:
        """Free half-received deliveries and buffered bytes as soon as the transport ends:
        engine objects refer to each other, so otherwise only the cyclic garbage
        collector would free what may be megabytes of frames."""
        self._reader = FrameReader(self.config.max_frame_size)
        for session in self.sessions.values():
            session.discard_partial_deliveries()

    # -- time ----------------------------------------------------------------------
    def tick(self, now: float) -> list[Event]:
        """Drive idle time-outs (2.4.5) with the current monotonic time in seconds."""
        if self._last_rx is None or self._rx:
            self._last_rx = now
            self._rx = False
        if self._last_tx is None or self._tx:
            self._last_tx = now
            self._tx = False
        if self.closed:
            return self.take_events()
        threshold = self.config.idle_timeout
        if threshold and now - self._last_rx >= threshold:
            # Also before the peer's open: a peer that never gets that far is silent too.
            self._fail(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"no frame received from the peer for {now - self._last_rx:.1f} s (idle time-out {threshold} s)",
            )
            return self.take_events()
        if self.remote_open is None:
            return self.take_events()
        remote_idle = self.remote_open.idle_time_out
        # "idle-time-out ... A value of zero is the same as if it was not set" (2.7.1);
        # empty frames "MUST NOT be sent after the close frame has been sent" (2.4.5).
        if remote_idle and self.state <= _OPENED and now - self._last_tx >= int(remote_idle) / 2000:
            self._out += heartbeat()
            self._last_tx = now
        return self.take_events()

    def tick_interval(self) -> float | None:
        """How often to call :meth:`tick`, in seconds (``None``: no time-outs in force)."""
        intervals = []
        if self.config.idle_timeout:
            intervals.append(self.config.idle_timeout / 4)
        if self.remote_open is not None and self.remote_open.idle_time_out:
            intervals.append(int(self.remote_open.idle_time_out) / 4000)
        return min(intervals) if intervals else None

    # -- input ---------------------------------------------------------------------
    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Feed bytes read from the transport; return the events they caused."""
        if self._expect == _EXPECT_NOTHING:
            return self.take_events()
        self._rx = True
        try:
            self._reader.feed(data)
            self._process()
        except errors.ConnectionProtocolError as exc:
            self._fail(exc.condition, exc.description)
        except FramingError as exc:
            self._fail(errors.FRAMING_ERROR, str(exc))
        except IllegalTransition as exc:
            self._fail(errors.ILLEGAL_STATE, str(exc))
        except DecodeError as exc:
            self._fail(errors.DECODE_ERROR, str(exc))
        except SaslFailed as exc:
            self._fail(
                _SASL_CONDITIONS.get(exc.code, errors.UNAUTHORIZED_ACCESS),
                str(exc),
                {_SASL_CODE: UByte(exc.code)},
            )
        except Exception as exc:  # a bug here must not escape into the I/O loop
            log.exception("amqplink engine failure on %r", self)
            self._fail(errors.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        return self.take_events()

    def take_events(self) -> list[Event]:
        """Events caused by application calls (a local detach, a drain that completed
        at once...) since the last ``receive_data``/``tick``; an I/O adapter calls this
        after it has made calls on the engine (once per read: the queue taken here, not
        through another call)."""
        events = self.event_queue
        self.event_queue = []
        return events

    def _process(self) -> None:
        reader = self._reader
        transfers = self.transfer_reader
        scan = transfers.scan
        decode_body = transfers.decode
        while True:
            expect = self._expect
            if expect == _EXPECT_FRAMES:
                frames = reader.read_frames()  # every whole frame of this read, in one go
                if not frames:
                    frame = reader.read_frame()  # one split across reads, or one to reject
                    if frame is None:
                        return
                    frames = [frame]
                if self._trace:
                    self._trace_frames("<-", frames)
                channel_max = self.config.channel_max
                count = len(frames)
                at = 0
                while at < count:
                    frame_type, channel, body = frames[at]
                    at += 1
                    if self._expect != _EXPECT_FRAMES:
                        break  # the connection failed: the rest is discarded (2.4.6)
                    if frame_type != FRAME_TYPE_AMQP:
                        raise FramingError(f"frame type {frame_type} where AMQP frames were expected")
                    if channel > channel_max:
                        # "A peer that receives a channel number outside the supported range
                        # MUST close the connection with the framing-error error-code." (2.7.1)
                        raise FramingError(f"frame on channel {channel}, above channel-max {channel_max}")
                    if not body:
                        continue  # heartbeat
                    if scan is not None and len(body) > 5 and body[2] == 0x14:
                        fields = scan(body)
                        if fields is not None:  # a transfer in the usual shape: no Transfer built
                            session = self._remote_sessions.get(channel)
                            if session is None or session.state >= _SESSION_END_SENT:  # _session_for decides
                                self._dispatch(channel, fields, body[fields[6] :])
                                continue
                            try:  # what _dispatch does for it and the transfers after it (the hot path)
                                at = session.on_transfer_run(fields, body[fields[6] :], frames, at, channel)
                            except _SESSION_ERRORS as exc:
                                self._session_failed(session, channel, exc)
                            continue
                    performative, offset = decode_body(body)
                    if type(performative) is Disposition:
                        session = self._remote_sessions.get(channel)
                        if session is not None and session.state < _SESSION_END_SENT:
                            try:  # what _dispatch does for it (a settlement in turn: one per read)
                                session.on_disposition(performative)
                            except _SESSION_ERRORS as exc:
                                self._session_failed(session, channel, exc)
                            continue
                    self._dispatch(channel, performative, body[offset:])
                if reader.drained:
                    return  # the read held whole frames only: nothing left to join or reject
            elif expect == _EXPECT_SASL_FRAMES:
                frame = reader.read_frame()
                if frame is None:
                    return
                frame_type, _, body = frame
                if frame_type != FRAME_TYPE_SASL:
                    raise FramingError(f"frame type {frame_type} during SASL")
                if not body:
                    continue
                if self._trace:
                    self._trace_frames("<-", (frame,))
                sasl_frame = decode(body)[0]
                self._on_sasl_frame(sasl_frame)
            elif expect == _EXPECT_NOTHING:
                return
            else:
                header = reader.read_protocol_header()
                if header is None:
                    return
                self._on_protocol_header(header)

    def _on_protocol_header(self, header: bytes) -> None:
        wanted = SASL_HEADER if self._expect == _EXPECT_SASL_HEADER else AMQP_HEADER
        if header == AMQP_HEADER and wanted == SASL_HEADER and self._skips_sasl():
            wanted = AMQP_HEADER
            self._expect = _EXPECT_AMQP_HEADER
        if header != wanted:
            # "the server MUST send a protocol header with the version it supports and
            # close the socket" (2.2)
            if self.server and not self._header_sent:
                self._out += wanted
                self._header_sent = True
            self._end_without_close(errors.FRAMING_ERROR, f"protocol header {header!r}, expected {wanted!r}")
            return
        if self.server:
            self._out += header
            self._header_sent = True
            if isinstance(self.sasl, SaslServer) and self._expect == _EXPECT_SASL_HEADER:
                for frame in self.sasl.start():
                    self._write_sasl_frame(frame)
                self._expect = _EXPECT_SASL_FRAMES
                return
        self._expect = _EXPECT_SASL_FRAMES if self._expect == _EXPECT_SASL_HEADER else _EXPECT_FRAMES

    def _skips_sasl(self) -> bool:
        """A server whose SASL layer admits anonymous clients also takes a client that
        sends the AMQP header first (no SASL at all), as many client libraries do."""
        sasl = self.sasl
        if not (self.server and isinstance(sasl, SaslServer) and sasl.accepts_without_sasl()):
            return False
        log.debug("%s: the client skipped SASL; accepted as anonymous", self.config.container_id)
        return True

    def _on_sasl_frame(self, frame: Any) -> None:
        sasl = self.sasl
        assert sasl is not None
        for reply in sasl.on_frame(frame):
            self._write_sasl_frame(reply)
        if isinstance(sasl, SaslServer):
            if sasl.done:
                self._expect = _EXPECT_AMQP_HEADER
                self.event_queue.append(SaslCompleted(sasl.chosen or "", sasl.identity))
            elif sasl.code is not None:
                self._end_without_close(
                    _SASL_CONDITIONS.get(sasl.code, errors.UNAUTHORIZED_ACCESS),
                    f"SASL {sasl.chosen} authentication failed (sasl-code {sasl.code})",
                    {_SASL_CODE: UByte(sasl.code)},
                )
            return
        if sasl.done:
            self._expect = _EXPECT_AMQP_HEADER
            self._out += AMQP_HEADER
            if self._deferred is not None:
                self._out += self._deferred
                self._deferred = None
            self.event_queue.append(SaslCompleted(sasl.chosen or "", None))

    def _write_sasl_frame(self, frame: Any) -> None:
        write_frame(self._out, FRAME_TYPE_SASL, 0, frame)

    def _trace_frames(self, direction: str, frames: Iterable[tuple[int, int, bytes | memoryview]]) -> None:
        """Log frames as they leave (:meth:`data_to_send`) or arrive, decoded from their
        bytes, whichever implementation wrote or reads them: performatives with their
        fields (SASL responses redacted by their repr), payloads by size only."""
        name = self.config.container_id
        for frame_type, channel, body in frames:
            if not body:
                continue  # a heartbeat
            try:
                frame, offset = decode(body)
            except DecodeError:
                undecodable = "%s %s [%d] an undecodable frame of %d bytes"
                frame_log.log(self._trace_level, undecodable, name, direction, channel, len(body))
                continue
            payload = len(body) - offset if frame_type == FRAME_TYPE_AMQP else 0
            size = f" +{payload} bytes" if payload else ""
            frame_log.log(self._trace_level, "%s %s [%d] %r%s", name, direction, channel, frame, size)

    def _end_without_close(self, condition: Symbol, description: str, info: dict[Any, Any] | None = None) -> None:
        self._step(Step.ABANDON)
        self._expect = _EXPECT_NOTHING
        self._abandon_sessions("the connection failed")
        self.error = Error(condition=condition, description=description, info=info)
        self.event_queue.append(ConnectionClosed(self.error, False))

    def _fail(self, condition: Symbol, description: str, info: dict[Any, Any] | None = None) -> None:
        """Close the connection on a protocol error (2.4.3: "close ... with an error")."""
        if self.closed:
            return
        log.warning("closing AMQP connection %s: %s: %s", self.config.container_id, condition, description)
        if self._expect in (_EXPECT_SASL_HEADER, _EXPECT_SASL_FRAMES, _EXPECT_AMQP_HEADER) or (
            self.server and not self._header_sent
        ):
            self._end_without_close(condition, description, info)
            return
        error = Error(condition=condition, description=description, info=info)
        if self.state is _START or self.state is _OPEN_RCVD:
            self.open()
        send_close = self.state < _CLOSE_SENT
        self._step(Step.SEND_CLOSE_ERROR)
        if send_close:
            self.send_frame(0, Close(error=error))
        self._abandon_sessions(f"the connection closed with {condition}")
        self.error = error
        self.event_queue.append(ConnectionClosed(error, False))
        # DISCARDING: ignore everything until the transport ends (2.4.6).
        self._expect = _EXPECT_NOTHING

    # -- dispatch ----------------------------------------------------------------
    def _dispatch(self, channel: int, frame: Any, payload: memoryview) -> None:
        """Hand a performative to its session or connection handler; ``frame`` is a
        ``Transfer`` or the fields tuple :func:`scan_transfer` read from one. A session
        takes each through its public handler, one per performative (``on_transfer_run``,
        ``on_transfer``, ``on_disposition``, ``on_flow``, ``on_attach``, ``on_detach``,
        ``on_begin``, ``on_end``: the session's seam, see :class:`Session`)."""
        kind = type(frame)
        if kind is tuple or kind is Transfer or kind is Disposition or kind is Flow:
            session = self._session_for(channel, straggler=kind is Disposition or kind is Flow)
            if session is None:
                return
            try:
                if kind is tuple:
                    session.on_transfer_run(frame, payload, (), 0, channel)
                elif kind is Transfer:
                    session.on_transfer(frame, payload)
                elif kind is Disposition:
                    session.on_disposition(frame)
                else:
                    session.on_flow(frame)
            except _SESSION_ERRORS as exc:
                self._session_failed(session, channel, exc)
            return
        if self.remote_open is None and kind is not Open:
            # "each peer MUST send an open frame before sending any other frames" (2.4.1)
            raise errors.ConnectionProtocolError(errors.ILLEGAL_STATE, f"{kind.__name__} received before open")
        if kind is Attach or kind is Detach:
            session = self._session_for(channel, straggler=kind is Detach)
            if session is None:
                return
            try:
                if kind is Attach:
                    session.on_attach(frame)
                else:
                    session.on_detach(frame)
            except errors.SessionProtocolError as exc:
                self._fail_session(session, exc)
            except IllegalTransition as exc:
                self._fail_session(session, errors.SessionProtocolError(channel, errors.ILLEGAL_STATE, str(exc)))
        elif kind is Begin:
            self._on_begin(channel, frame)
        elif kind is End:
            session = self._session_for(channel, allow_ending=True)
            if session is not None:
                session.on_end(frame)
                if channel not in self._remote_sessions:
                    self._ended_remote_channels.add(channel)
        elif kind is Open:
            self._on_open(frame)
        elif kind is Close:
            self._on_close(frame)
        else:
            raise errors.ConnectionProtocolError(errors.NOT_ALLOWED, f"{kind.__name__} is not an AMQP performative")

    def _session_failed(self, session: Session, channel: int, exc: errors.ProtocolError | IllegalTransition) -> None:
        """A link's or session's protocol error ends that link or session, not the connection."""
        if isinstance(exc, errors.LinkProtocolError):
            self._fail_link(session, exc)
        elif isinstance(exc, errors.SessionProtocolError):
            self._fail_session(session, exc)
        else:
            self._fail_session(session, errors.SessionProtocolError(channel, errors.ILLEGAL_STATE, str(exc)))

    def _session_for(self, channel: int, *, allow_ending: bool = False, straggler: bool = False) -> Session | None:
        """The session the peer's frame on ``channel`` is for; ``None`` drops the frame.

        ``straggler``: the frame (detach, flow, disposition) asks nothing of this side,
        so after the peer's own end on the channel it is dropped, not an error.
        """
        session = self._remote_sessions.get(channel)
        if session is None:
            if self.remote_open is None:
                raise errors.ConnectionProtocolError(errors.ILLEGAL_STATE, "frame received before open")
            if straggler and channel in self._ended_remote_channels:
                # A frame after the peer's own end on this channel: azure-servicebus's
                # _pyamqp sends a receiver's detach after its session's end. Nothing can
                # act on it any more, and closing the connection would take the peer's
                # other sessions down with it, so it is dropped.
                log.debug("ignoring a frame on channel %d after the peer ended its session there", channel)
                return None
            raise errors.ConnectionProtocolError(
                errors.NOT_ALLOWED, f"frame on channel {channel}, where no session is mapped"
            )
        if session.state >= _SESSION_END_SENT and not allow_ending:
            return None  # DISCARDING until the peer's end arrives
        return session

    def _fail_session(self, session: Session, exc: errors.SessionProtocolError) -> None:
        log.warning("ending session %d: %s: %s", session.channel, exc.condition, exc.description)
        session.end(Error(condition=exc.condition, description=exc.description))

    def _fail_link(self, session: Session, exc: errors.LinkProtocolError) -> None:
        log.warning("detaching link %d: %s: %s", exc.handle, exc.condition, exc.description)
        link = session.links.get(exc.handle)
        if link is not None:
            link.detach(Error(condition=exc.condition, description=exc.description))

    def _on_open(self, frame: Open) -> None:
        if self.remote_open is not None:
            raise errors.ConnectionProtocolError(errors.ILLEGAL_STATE, "second open received")
        self._step(Step.RECV_OPEN)
        self.remote_open = frame
        self.remote_max_frame_size = max(MIN_MAX_FRAME_SIZE, int(frame.max_frame_size))
        self.remote_channel_max = int(frame.channel_max)
        if self.server and self.state is _OPEN_RCVD:
            self.open()
        self._check_peer_idle_timeout(frame)
        self.event_queue.append(ConnectionOpened(frame))

    def _check_peer_idle_timeout(self, frame: Open) -> None:
        """Refuse an idle time-out below ``config.min_peer_idle_timeout`` (2.4.5: "it
        SHOULD close the connection using the close frame with an error explaining why")."""
        idle_ms = int(frame.idle_time_out or 0)
        floor = self.config.min_peer_idle_timeout
        if idle_ms and idle_ms < floor * 1000:
            raise errors.ConnectionProtocolError(
                errors.NOT_IMPLEMENTED,
                f"the peer's idle-time-out of {idle_ms} ms is below the {floor * 1000:g} ms this side supports"
                " (it would take a heartbeat every few milliseconds; ConnectionConfig.min_peer_idle_timeout"
                " sets the floor)",
            )

    def _on_begin(self, channel: int, frame: Begin) -> None:
        self._ended_remote_channels.discard(channel)
        if channel in self._remote_sessions:
            raise errors.ConnectionProtocolError(
                errors.ILLEGAL_STATE, f"begin on channel {channel}, where a session is already mapped"
            )
        if frame.remote_channel is None:
            # The peer begins a session: map it to a new local one and answer (2.5.2).
            limit = min(self.config.channel_max, self.remote_channel_max)
            local = next((c for c in range(limit + 1) if c not in self.sessions), None)
            if local is None:
                raise errors.ConnectionProtocolError(errors.RESOURCE_LIMIT_EXCEEDED, "no free channel")
            session = self._new_session(local, None, None)
            session.remote_channel = channel
            self._remote_sessions[channel] = session
            session.on_begin(frame)
            session.send_begin()
        else:
            session_or_none = self.sessions.get(int(frame.remote_channel))
            if session_or_none is None or session_or_none.state is not _SESSION_BEGIN_SENT:
                raise errors.ConnectionProtocolError(
                    errors.NOT_ALLOWED, f"begin answers channel {int(frame.remote_channel)}, which began no session"
                )
            session = session_or_none
            session.remote_channel = channel
            self._remote_sessions[channel] = session
            session.on_begin(frame)
        self.event_queue.append(SessionBegun(session))

    def _on_close(self, frame: Close) -> None:
        self.remote_close = frame
        by_peer = self.state < _CLOSE_SENT
        self._step(Step.RECV_CLOSE)
        if by_peer:
            self.send_frame(0, Close())
            self._step(Step.SEND_CLOSE)
        self._abandon_sessions("the peer closed the connection")
        self._expect = _EXPECT_NOTHING
        self.event_queue.append(ConnectionClosed(frame.error if by_peer else self.error, by_peer))


def _symbols(values: list[str] | None) -> list[Symbol] | None:
    return [Symbol(v) for v in values] if values else None
