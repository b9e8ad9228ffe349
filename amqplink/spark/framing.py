"""The sink's Arrow fast path: a body-only record batch with position ids, encoded whole by
``pyarrow.compute``, each message framed as the data section a batch transfer carries it in.

Every message of such a batch is the same sections but for its bytes (:mod:`.encoding`
writes them row by row in Python): the message annotations with the run's partition key,
properties holding the message id (``<prefix>:<partition>:<row>``), one data section with
the body. Here each of those is an Arrow column built with vectorized kernels (the ids from
the row numbers, the section heads from the lengths with numpy), joined element-wise, then
joined again with the head of the data section that carries the message in the transfer.
The result's data buffer holds the messages back to back exactly as a batch transfer
carries them, so the messages a transfer takes are one slice of it
(``ServiceBusMessageBatch.add_framed``): no Python object per row. The bytes are those of
:func:`.encoding.body_runs` (a test compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amqplink.message import DATA8_HEAD, DATA32_HEAD, ID_ONLY_HEADS, ID_ONLY_MAX
from amqplink.servicebus.message import ServiceBusMessage
from amqplink.spark.columns import KEY_ROWS, IdScheme
from amqplink.spark.encoding import message_head

__all__ = ["FramedRun", "framed_runs", "section_heads"]


@dataclass(slots=True)
class FramedRun:
    """Consecutive rows that go to one batch key: ``data[offsets[i]:offsets[i + 1]]`` is row
    ``i``'s message framed as a batch transfer's data section (``offsets`` has one more entry
    than there are rows); ``body_offsets`` likewise delimit the bodies (for the byte counts)."""

    key: str | None
    first_row: int
    prefix: str
    data: memoryview
    offsets: list[int]
    body_offsets: list[int]
    bodies: Any
    """The run's bodies (a ``pyarrow`` binary array), for the message a batch's envelope copies."""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def message(self, i: int) -> ServiceBusMessage:
        """The ``ServiceBusMessage`` of the run's ``i``-th row."""
        return ServiceBusMessage(
            self.bodies[i].as_py(), message_id=f"{self.prefix}{self.first_row + i}", partition_key=self.key
        )


def section_heads(lengths: Any) -> Any:
    """The data-section heads (``00 53 75 a0 <n>`` up to 255 bytes, else ``00 53 75 b0 <n:4>``)
    of ``lengths`` (a numpy integer array), as a ``pyarrow`` binary array."""
    import numpy as np
    import pyarrow as pa

    lengths = np.asarray(lengths, dtype=np.int64)
    small = lengths < 256
    widths = np.where(small, len(DATA8_HEAD) + 1, len(DATA32_HEAD) + 4)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(widths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    starts = offsets[:-1]
    for i in range(3):  # the descriptor, the same in both
        data[starts + i] = DATA8_HEAD[i]
    data[starts + 3] = np.where(small, DATA8_HEAD[3], DATA32_HEAD[3])
    short, long_ = starts[small], starts[~small]
    data[short + 4] = lengths[small]
    big = lengths[~small]
    for i in range(4):  # big-endian
        data[long_ + 4 + i] = (big >> (8 * (3 - i))) & 0xFF
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _heads_table() -> Any:
    import pyarrow as pa

    return pa.array(ID_ONLY_HEADS, pa.binary())


def framed_runs(body: Any, scheme: IdScheme, first_row: int) -> list[FramedRun] | None:
    """The rows of ``body`` (an Arrow binary or string array; no nulls: checked before) numbered
    from ``first_row``, as runs of framed messages sharing a partition key
    (:data:`.columns.KEY_ROWS` rows, or all of them without keys); None when an id would be too
    long for the id-only properties section (the general path encodes those)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    count = len(body)
    prefix = f"{scheme.prefix}:{scheme.partition}:"
    if count == 0 or len((prefix + str(first_row + count)).encode()) > ID_ONLY_MAX:
        return None
    if not pa.types.is_binary(body.type):
        body = body.cast(pa.binary())  # string (zero-copy) or large_binary
    rows = np.arange(first_row, first_row + count, dtype=np.int64)
    ids = pc.binary_join_element_wise(pa.scalar(prefix.encode(), pa.binary()),
                                      pc.cast(pc.cast(pa.array(rows), pa.string()), pa.binary()),
                                      pa.scalar(b"", pa.binary()))  # fmt: skip
    id_heads = pc.take(_heads_table(), pc.binary_length(ids))
    body_lengths = pc.binary_length(body).to_numpy(zero_copy_only=False)
    if scheme.partition_keys:
        run_of = rows // KEY_ROWS
        firsts = np.flatnonzero(np.diff(run_of, prepend=run_of[0] - 1))
    else:
        run_of = np.zeros(count, dtype=np.int64)
        firsts = np.array([0])
    keys = [scheme.partition_key(int(rows[f]), prefix + str(int(rows[f]))) for f in firsts]
    heads = pa.array([message_head(key) for key in keys], pa.binary())
    index = np.repeat(np.arange(len(firsts)), np.diff(np.append(firsts, count)))
    sep = pa.scalar(b"", pa.binary())
    row_heads = pc.take(heads, pa.array(index))
    body_heads = section_heads(body_lengths)
    pieces = (row_heads, id_heads, ids, body_heads)
    encoded_lengths = sum(pc.binary_length(piece).to_numpy() for piece in pieces) + body_lengths
    prefixes = pc.binary_join_element_wise(section_heads(encoded_lengths), *pieces, sep)
    framed = pc.binary_join_element_wise(prefixes, body, sep)  # the bodies copied once
    _, offsets_buffer, data_buffer = framed.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=count + 1, offset=4 * framed.offset)
    body_offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(body_lengths, out=body_offsets[1:])
    data = memoryview(data_buffer)
    runs = []
    for n, start in enumerate(firsts.tolist()):
        end = int(firsts[n + 1]) if n + 1 < len(firsts) else count
        runs.append(FramedRun(keys[n], first_row + start, prefix, data,
                              offsets[start : end + 1].tolist(), body_offsets[start : end + 1].tolist(),
                              body.slice(start, end - start)))  # fmt: skip
    return runs
