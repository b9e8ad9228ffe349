"""Arrow arrays of Python values, built from their buffers (Arrow columnar format: a validity
bitmap, offsets for variable-size values, the values' bytes).

Why not ``pyarrow.array``: its conversion of Python objects imports pandas on first use
(where pandas is installed, to recognise pandas objects), which the source's stream reader
would pay inside its first micro-batch (docs/spark.md#benchmark); an array built from its
buffers needs no conversion by pyarrow. Text that is not valid UTF-8 (a lone surrogate), or
bytes past 32-bit offsets, go to ``pyarrow.array``, which decides them as before.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import is_not
from typing import Any

__all__ = ["binary_array", "int_array", "text_array"]

_OFFSET_MAX = 2**31 - 1
"""The largest offset of Arrow's ``binary`` and ``string`` (32-bit offsets)."""


def _validity(values: Sequence[Any]) -> Any:
    """The validity bitmap of ``values`` (bit i set: value i is not None, least significant
    bit first), or None if no value is None (the bitmap may then be omitted)."""
    import numpy as np
    import pyarrow as pa

    if None not in values:
        return None
    flags = np.fromiter(map(is_not, values, repeat(None)), dtype=bool, count=len(values))
    return pa.py_buffer(np.packbits(flags, bitorder="little").tobytes())


def int_array(values: Sequence[int | None], kind: str = "q") -> Any:
    """``values`` as an Arrow int64 (``kind`` ``"q"``) or int32 (``"i"``) array."""
    import pyarrow as pa

    kind_type = pa.int64() if kind == "q" else pa.int32()
    if values.count(None) == len(values):
        return pa.nulls(len(values), kind_type)
    data = array(kind, [0 if v is None else v for v in values])
    return pa.Array.from_buffers(kind_type, len(values), [_validity(values), pa.py_buffer(data)])


def binary_array(values: Sequence[bytes | None]) -> Any:
    """``values`` as an Arrow ``binary`` array."""
    import pyarrow as pa

    return _variable(values, [b"" if v is None else v for v in values], pa.binary())


def text_array(values: Sequence[str | None]) -> Any:
    """``values`` as an Arrow ``string`` array."""
    import pyarrow as pa

    if values.count(None) == len(values):
        return pa.nulls(len(values), pa.string())
    try:
        encoded = [b"" if v is None else v.encode() for v in values]
    except UnicodeEncodeError:
        return pa.array(values, pa.string())
    return _variable(values, encoded, pa.string())


def _variable(values: Sequence[Any], data: Sequence[bytes], kind: Any) -> Any:
    """``values`` as an array of the variable-size ``kind``, ``data`` their bytes (b"" for None)."""
    import pyarrow as pa

    lengths = list(map(len, data))
    if sum(lengths) > _OFFSET_MAX:
        return pa.array(values, kind)
    offsets = array("i", [0])
    offsets.extend(accumulate(lengths))
    buffers = [_validity(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    return pa.Array.from_buffers(kind, len(values), buffers)
