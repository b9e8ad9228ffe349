"""``FrameReader.read_frames`` (every whole frame of a read in one go, the hot path) reads
what ``read_frame`` reads one frame at a time: the same frames, and it stops before a frame
that is split across reads or invalid, so that ``read_frame`` joins it or raises the same
framing error (2.3.1: size at least 8, data offset at least 2 and within the frame, and no
larger than max-frame-size)."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.engine.frames import FrameReader, FramingError

MAX_FRAME = 64

frames = st.lists(
    st.one_of(
        # a valid frame: data offset 2 or more, an extended header, a body
        st.tuples(st.integers(2, 4), st.integers(0, 1), st.integers(0, 3), st.binary(max_size=24)).map(
            lambda f: struct.pack(">IBBH", 4 * f[0] + len(f[3]), f[0], f[1], f[2]) + bytes(4 * f[0] - 8) + f[3]
        ),
        # any header at all (a size below 8, a data offset below 2 or past the end, too large)
        st.tuples(st.integers(0, 80), st.integers(0, 30), st.integers(0, 1), st.integers(0, 3)).map(
            lambda h: struct.pack(">IBBH", *h) + bytes(max(0, min(h[0], 80) - 8))
        ),
    ),
    max_size=8,
)


def _by_frame(reader: FrameReader) -> list[Any]:
    read: list[Any] = []
    try:
        while (frame := reader.read_frame()) is not None:
            read.append((frame[0], frame[1], bytes(frame[2])))
    except FramingError as exc:
        read.append(str(exc))
    return read


def _by_runs(reader: FrameReader) -> list[Any]:
    """As the connection reads: the whole frames at once, else one frame (joined or refused);
    done once whole frames left nothing behind (``drained``, which says so exactly)."""
    read: list[Any] = []
    try:
        while True:
            got = reader.read_frames()
            assert reader.drained == (reader.buffered == 0)
            if not got:
                frame = reader.read_frame()
                if frame is None:
                    return read
                got = [frame]
            read += [(t, c, bytes(b)) for t, c, b in got]
            if reader.drained:
                return read
    except FramingError as exc:
        read.append(str(exc))
    return read


@settings(deadline=None)
@given(stream=frames, cuts=st.lists(st.integers(0, 1000), max_size=5))
def test_read_frames_reads_what_read_frame_reads(stream: list[bytes], cuts: list[int]) -> None:
    data = b"".join(stream)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    one, runs = FrameReader(MAX_FRAME), FrameReader(MAX_FRAME)
    expected: list[Any] = []
    got: list[Any] = []
    for start, end in pairwise(points):
        one.feed(data[start:end])
        runs.feed(data[start:end])
        expected += _by_frame(one)
        got += _by_runs(runs)
        if expected and isinstance(expected[-1], str):
            break  # the connection fails at a framing error
    assert got == expected
    assert one.buffered == runs.buffered or isinstance(expected[-1], str)


def test_a_frame_of_size_below_its_header_is_refused_not_read() -> None:
    reader = FrameReader(MAX_FRAME)
    reader.feed(struct.pack(">IBBH", 0, 2, 0, 0) + bytes(16))  # size 0: never a frame
    assert reader.read_frames() == []
    with pytest.raises(FramingError, match="smaller than the 8-byte header"):
        reader.read_frame()
