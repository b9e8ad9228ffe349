"""The engine's two ways to write and read transfer frames, one interface each.

A connection takes one writer and one reader, chosen by its ``fast_paths`` option
(:class:`~amqplink.engine.connection.Connection`), and by nothing else: frame tracing
decodes what either one wrote or read, so turning it on changes no code that runs.

- :class:`TransferWriter` (the reference): each transfer a ``Transfer`` performative
  encoded by :func:`~amqplink.engine.frames.write_frame`.
- :class:`FastTransferWriter`: the same bytes hand-assembled
  (:func:`~amqplink.engine.frames.write_transfer`), and for a run of deliveries on one
  link the frame's parts precompiled once (:func:`~amqplink.engine.frames.usual_transfer_parts`).
- :class:`TransferReader` (the reference): every performative through the codec's
  generic decoder.
- :class:`FastTransferReader`: transfers in the usual shape read into plain fields
  (:func:`~amqplink.engine.hot_decode.scan_transfer`), which the session takes as runs
  (:meth:`Session.on_transfer_run`), and the straight-line decoders
  (:func:`~amqplink.engine.hot_decode.decode_performative`) before the generic one.

The differential tests (``tests/engine/test_transfer_fast_path.py``,
``test_transfer_receive_fast_path.py``, ``test_transfer_runs.py``,
``test_write_fresh.py``) run the same traffic with ``fast_paths`` on and off and compare
the bytes, events and state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqplink.codec.decode import decode
from amqplink.codec.types import UInt
from amqplink.engine.frames import FRAME_TYPE_AMQP, usual_transfer_parts, write_frame, write_transfer
from amqplink.engine.hot_decode import TransferFields, decode_performative, scan_transfer
from amqplink.protocol.definitions import Transfer

__all__ = [
    "FAST_READER",
    "FAST_WRITER",
    "REFERENCE_READER",
    "REFERENCE_WRITER",
    "FastTransferReader",
    "FastTransferWriter",
    "RunParts",
    "TransferReader",
    "TransferWriter",
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


def _no_run_parts(channel: int, handle: int, tag_size: int) -> RunParts | None:
    """The reference writer's ``run_parts``: no precompiled parts, so each transfer is written alone."""
    return None


def _decode_generic(body: memoryview) -> tuple[Any, int]:
    """The reference reader's ``decode``: the codec's generic decoder for every performative."""
    performative, offset = decode(body)
    return performative, offset


class TransferWriter:
    """Writes single-frame transfers (the reference: a ``Transfer`` through ``write_frame``).

    ``write(out, channel, handle, delivery_id, tag, message_format, settled, payload)``
    appends one whole delivery's frame; ``run_parts(channel, handle, tag_size)`` gives the
    parts for writing a run of such frames on one link at once, or ``None`` (write each
    with ``write``; the reference never runs). Plain functions, not methods: the session
    calls them once per delivery.
    """

    fast = False
    write: Callable[[bytearray, int, int, int, bytes, int, bool, bytes | bytearray | memoryview], None]
    write = staticmethod(write_transfer_frame)
    run_parts: Callable[[int, int, int], RunParts | None] = staticmethod(_no_run_parts)


class FastTransferWriter(TransferWriter):
    """The same bytes as :class:`TransferWriter`, hand-assembled; runs from precompiled parts."""

    fast = True
    write = staticmethod(write_transfer)
    run_parts = staticmethod(usual_transfer_parts)


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
