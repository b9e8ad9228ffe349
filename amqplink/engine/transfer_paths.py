"""The engine's two ways to write and read transfer frames, one interface each.

A connection takes one writer and one reader, chosen by its ``fast_paths`` option
(:class:`~amqplink.engine.connection.Connection`), and by nothing else: frame tracing
decodes what either one wrote or read, so turning it on changes no code that runs.

- :class:`TransferWriter` (the reference): each transfer a ``Transfer`` performative
  encoded by :func:`~amqplink.engine.frames.write_frame`.
- :class:`FastTransferWriter`: the same bytes hand-assembled
  (:func:`~amqplink.engine.frames.write_transfer`), and for a run of deliveries on one
  link the frame's parts precompiled once (:func:`~amqplink.engine.frames.usual_transfer_parts`,
  :func:`~amqplink.engine.frames.write_usual_run`).

The writer is the whole frame layout of the session's one write path
(:meth:`Session.write_deliveries <amqplink.engine.session.Session.write_deliveries>`):
how much of a delivery one frame holds (:data:`TRANSFER_OVERHEAD`), a delivery's one frame
(``write``), a run of new ones (``write_run``, ``run_parts``), and a delivery that takes
several frames or is aborted (``write_frames``: its first frame, its continuation frames,
or the abort). The session keeps the state (credit, window, delivery-ids, unsettled).
- :class:`TransferReader` (the reference): every performative through the codec's
  generic decoder.
- :class:`FastTransferReader`: transfers in the usual shape read into plain fields
  (:func:`~amqplink.engine.hot_decode.scan_transfer`), which the session takes as runs
  (:meth:`Session.on_transfer_run`), and the straight-line decoders
  (:func:`~amqplink.engine.hot_decode.decode_performative`) before the generic one.

The differential tests (``tests/engine/test_transfer_fast_path.py``,
``test_transfer_receive_fast_path.py``, ``test_transfer_runs.py``,
``test_write_fresh.py``) run the same traffic with ``fast_paths`` on and off and compare
the bytes, events and state; ``test_write_path.py`` compares both writers' bytes, every way
of sending, with frames built from the plain codec.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from amqplink.codec.decode import decode
from amqplink.codec.types import UInt
from amqplink.engine.frames import (
    FRAME_TYPE_AMQP,
    SETTLED_TAIL,
    TRANSFER_OVERHEAD,
    UNSETTLED_TAIL,
    usual_transfer_parts,
    write_frame,
    write_transfer,
    write_usual_run,
)
from amqplink.engine.hot_decode import TransferFields, decode_performative, scan_transfer
from amqplink.protocol.definitions import Transfer

__all__ = [
    "FAST_READER",
    "FAST_WRITER",
    "REFERENCE_READER",
    "REFERENCE_WRITER",
    "FastTransferReader",
    "FastTransferWriter",
    "SETTLED_TAIL",
    "TRANSFER_OVERHEAD",
    "UNSETTLED_TAIL",
    "RunParts",
    "TransferReader",
    "TransferWriter",
    "write_delivery_frames",
    "write_transfer_frame",
]

RunParts = tuple[Any, bytes, bytes, int]
"""``(pack, middle, tag_head, base)``: see :func:`~amqplink.engine.frames.usual_transfer_parts`."""


def write_transfer_frame(
    out: bytearray,
    channel: int,
    handle: int,
    delivery_id: int,
    tag: bytes,
    message_format: int,
    settled: bool,
    payload: bytes | bytearray | memoryview,
) -> None:
    """Append a whole delivery's one transfer frame to ``out``: a ``Transfer`` performative
    through :func:`~amqplink.engine.frames.write_frame` (the reference encoding)."""
    transfer = Transfer(
        handle=UInt(handle),
        delivery_id=UInt(delivery_id),
        delivery_tag=tag,
        message_format=UInt(message_format),
        settled=settled,
    )
    write_frame(out, FRAME_TYPE_AMQP, channel, transfer, payload)


def write_delivery_frames(
    send: Callable[[Transfer, memoryview | None], None], handle: int, delivery: Any, room: int, window: int
) -> int:
    """Send the frames of a ``delivery`` that takes more than one (or its abort) through
    ``send(transfer, payload)``, from its ``offset`` on, at most ``room`` payload bytes and
    ``window`` frames; how many frames. Moves ``delivery.offset`` on.

    The first frame carries delivery-id, tag and message-format ("The delivery-id MUST be
    supplied on the first transfer of a multi-transfer delivery", 2.7.5); each but the last
    ``more`` ("indicates that the message has more content", 2.7.5); every one the settled
    flag and ``delivery.state`` (a transactional state on every frame: part 4, 4.4.1). An
    aborted delivery is one frame, "aborted" and settled (2.7.5)."""
    if delivery.aborted:
        send(Transfer(handle=UInt(handle), more=False, aborted=True, settled=True), None)
        return 1
    view = memoryview(delivery.payload)
    total = delivery.size
    if delivery.offset < 0:  # STATE_ON_TRANSFER: its transfers carry its state, from the first
        delivery.offset = 0
    state = delivery.state  # (None unless sent with one: SenderLink.send_with_state)
    frames = 0
    while (delivery.offset < total or (not total and not frames)) and frames < window:
        start = delivery.offset
        end = min(total, start + room)
        first = start == 0
        transfer = Transfer(
            handle=UInt(handle),
            delivery_id=UInt(delivery.delivery_id) if first else None,
            delivery_tag=delivery.tag if first else None,
            message_format=UInt(delivery.message_format) if first else None,
            settled=delivery.settled,
            more=end < total,
            state=state,
        )
        send(transfer, view[start:end])
        delivery.offset = end
        frames += 1
    return frames


def _no_run_parts(channel: int, handle: int, tag_size: int) -> RunParts | None:
    """The reference writer's ``run_parts``: no precompiled parts, so each transfer is written alone."""
    return None


def _no_run(
    out: bytearray,
    channel: int,
    handle: int,
    deliveries: Sequence[Any],
    count: int,
    first_id: int,
    max_frame_size: int,
    outgoing: dict[int, Any],
    unsettled: dict[int, Any],
    flush: Callable[[], None] | None,
) -> int:
    """The reference writer's ``write_run``: none, so each delivery is written alone."""
    return 0


def _decode_generic(body: memoryview) -> tuple[Any, int]:
    """The reference reader's ``decode``: the codec's generic decoder for every performative."""
    performative, offset = decode(body)
    return performative, offset


class TransferWriter:
    """Writes single-frame transfers (the reference: a ``Transfer`` through ``write_frame``).

    ``write(out, channel, handle, delivery_id, tag, message_format, settled, payload)``
    appends one whole delivery's frame; ``run_parts(channel, handle, tag_size)`` gives the
    parts for writing a run of such frames on one link at once, or ``None`` (write each
    with ``write``; the reference never runs); ``write_run(...)`` appends a run of new
    deliveries (:func:`~amqplink.engine.frames.write_usual_run`; the reference: none);
    ``write_frames(send, handle, delivery, room, window)`` sends a delivery that takes
    several frames, or its abort (:func:`write_delivery_frames`, the same for both). Plain
    functions, not methods: the session calls them once per delivery.
    """

    fast = False
    write: Callable[[bytearray, int, int, int, bytes, int, bool, bytes | bytearray | memoryview], None]
    write = staticmethod(write_transfer_frame)
    run_parts: Callable[[int, int, int], RunParts | None] = staticmethod(_no_run_parts)
    write_run: Callable[
        [bytearray, int, int, Sequence[Any], int, int, int, dict[int, Any], dict[int, Any], Callable[[], None] | None],
        int,
    ] = staticmethod(_no_run)
    write_frames: Callable[[Callable[[Transfer, memoryview | None], None], int, Any, int, int], int]
    write_frames = staticmethod(write_delivery_frames)


class FastTransferWriter(TransferWriter):
    """The same bytes as :class:`TransferWriter`, hand-assembled; runs from precompiled parts."""

    fast = True
    write = staticmethod(write_transfer)
    run_parts = staticmethod(usual_transfer_parts)
    write_run = staticmethod(write_usual_run)


class TransferReader:
    """Reads frame bodies (the reference: the codec's generic decoder for every performative).

    ``scan`` (or ``None``: the reference never scans) reads a transfer body (``body[2] ==
    0x14``) into plain fields for the session to take as a run, or returns ``None`` for
    ``decode``; ``decode(body)`` gives the performative and the offset of its payload (2.3.2).
    """

    fast = False
    scan: Callable[[memoryview], TransferFields | None] | None = None
    decode: Callable[[memoryview], tuple[Any, int]] = staticmethod(_decode_generic)


class FastTransferReader(TransferReader):
    """Transfers in the usual shape as plain fields; the straight-line decoders first."""

    fast = True
    scan = staticmethod(scan_transfer)
    decode = staticmethod(decode_performative)


REFERENCE_WRITER = TransferWriter()
FAST_WRITER = FastTransferWriter()
REFERENCE_READER = TransferReader()
FAST_READER = FastTransferReader()
