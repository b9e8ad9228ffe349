"""Arrow arrays built from buffers (:mod:`amqplink.spark.buffers`) are the arrays
``pyarrow.array`` makes of the same values, and the source's rows of usual messages are
made without importing pandas (which ``pyarrow.array`` does on first use)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.spark.buffers import binary_array, int_array, text_array
from tests.spark.conftest import ROOT


def _same(built: Any, values: list[Any], kind: Any) -> None:
    expected = pa.array(values, kind)
    built.validate(full=True)
    assert built.type == kind and built.null_count == expected.null_count
    assert built.equals(expected), (built, expected)


@settings(deadline=None)  # (the first example imports numpy)
@given(st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=40))
def test_int64(values: list[int | None]) -> None:
    _same(int_array(values), values, pa.int64())


@settings(deadline=None)  # (the first example imports numpy)
@given(st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=40))
def test_int32(values: list[int | None]) -> None:
    _same(int_array(values, "i"), values, pa.int32())


@settings(deadline=None)  # (the first example imports numpy)
@given(st.lists(st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=6)), max_size=40))
def test_text(values: list[str | None]) -> None:
    _same(text_array(values), values, pa.string())


@settings(deadline=None)  # (the first example imports numpy)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=6)), max_size=40))
def test_binary(values: list[bytes | None]) -> None:
    _same(binary_array(values), values, pa.binary())


def test_text_that_is_not_utf8_is_refused_as_pyarrow_refuses_it() -> None:
    with pytest.raises(UnicodeEncodeError):
        pa.array(["ok", "\udc80"], pa.string())
    with pytest.raises(UnicodeEncodeError):
        text_array(["ok", "\udc80"])


def test_the_rows_of_usual_messages_import_no_pandas() -> None:
    code = (
        "import sys\n"
        "from amqplink.message import Message\n"
        "from amqplink.servicebus.message import ServiceBusReceivedMessage\n"
        "from amqplink.spark.rows import to_arrow\n"
        "def received(i):\n"
        "    return ServiceBusReceivedMessage.from_bytes(Message(b'x' * i, message_id=str(i)).encode())\n"
        "got = [received(i) for i in range(20)]\n"
        "batch = to_arrow(got, 'q')\n"
        "assert batch.num_rows == 20 and batch.column(0)[3].as_py() == b'xxx', batch\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
