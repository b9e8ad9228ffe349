"""The sink's Arrow fast path (``amqplink/spark/framing.py``): byte for byte the row-by-row
fast path's messages, framed as a batch transfer carries them (fast tier: pyarrow, no Spark)."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.message import data_section_header
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch
from amqplink.servicebus.paired.pairing import outgoing_list
from amqplink.spark.columns import IdScheme
from amqplink.spark.encoding import body_runs
from amqplink.spark.framing import framed_runs, section_heads
from amqplink.spark.options import parse_options
from amqplink.spark.writer import PartitionStats, _Pipeline

CONN = "Endpoint=sb://ns.example/;SharedAccessKeyName=k;SharedAccessKey=SeCrEtKeY123="
_bodies = st.lists(st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=600)), min_size=1, max_size=600)


@settings(deadline=None)
@given(st.lists(st.integers(0, 70_000), max_size=50))
def test_section_heads_are_data_section_headers(lengths: list[int]) -> None:
    assert section_heads(lengths).to_pylist() == [data_section_header(n) for n in lengths]


@settings(deadline=None)  # pyarrow's first calls load its kernels
@given(_bodies, st.sampled_from([0, 7, 250, 999, 9_990, 10**9]), st.booleans(), st.booleans(),
       st.text(min_size=1, max_size=40))  # fmt: skip
def test_framed_runs_are_the_row_by_row_runs_framed(
    bodies: list[bytes], first_row: int, keys: bool, as_text: bool, prefix: str
) -> None:
    scheme = IdScheme("position", prefix, 3, keys)
    if as_text:
        bodies = [b.decode("latin-1").encode() for b in bodies]
        column = pa.array([b.decode() for b in bodies], pa.string())
    else:
        column = pa.array(bodies, pa.binary())
    framed = framed_runs(column, scheme, first_row)
    rows = body_runs(list(bodies), scheme, first_row)
    assert framed is not None and rows is not None
    assert [(r.key, len(r)) for r in framed] == [(r.key, len(r.encoded)) for r in rows]
    for f, r in zip(framed, rows, strict=True):
        expected = b"".join(data_section_header(len(e)) + e for e in r.encoded)
        assert bytes(f.data[f.offsets[0] : f.offsets[-1]]) == expected
        assert [f.body_offsets[i + 1] - f.body_offsets[i] for i in range(len(f))] == [len(b) for b in r.bodies]
        assert f.message(0).amqplink_message.encode() == r.message(0).amqplink_message.encode()


@settings(deadline=None)
@given(_bodies, st.integers(300, 6000), st.integers(0, 3))
def test_a_framed_run_fills_a_batch_as_encoded_messages_do(bodies: list[bytes], limit: int, before: int) -> None:
    scheme = IdScheme("position", "w", 0)
    (framed, *_), (rows, *_) = framed_runs(pa.array(bodies, pa.binary()), scheme, 0), body_runs(bodies, scheme, 0)
    by_rows, by_frames = ServiceBusMessageBatch(limit), ServiceBusMessageBatch(limit)
    start = 0
    for i in range(min(before, len(rows.encoded))):  # batches that hold some already, added one by one
        if not by_rows.add_encoded(rows.encoded[i], rows.message(i)):
            break
        assert by_frames.add_encoded(rows.encoded[i], rows.message(i))
        start += 1
    assert by_frames.add_framed(framed.data, framed.offsets, start, framed.message) == by_rows.add_run(
        rows.encoded, start, rows.message
    )
    assert (len(by_frames), by_frames.size_in_bytes, by_frames._payload()) == (
        len(by_rows), by_rows.size_in_bytes, by_rows._payload())  # fmt: skip
    # what a batch hands on when it is not sent (parked on a paired namespace, stored
    # locally): every message, framed or not; the paired sender once parked a framed batch's
    # messages as none, and the sink counted them sent
    assert by_frames.encoded_messages() == by_rows.encoded_messages() == rows.encoded[: len(by_rows)]
    assert [m.message_id for m in outgoing_list(by_frames)] == [rows.message(i).message_id for i in range(len(by_rows))]


class _Recording:
    max_message_size = 256 * 1024

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sender(self, entity: str) -> _Recording:
        return self

    async def create_message_batch(self) -> None:
        return None

    async def send_messages(self, batch: ServiceBusMessageBatch, timeout: float | None = None) -> None:
        self.sent.append(batch._payload())


def _sent(bodies: list[bytes], framed: bool) -> tuple[list[bytes], Any]:
    config = parse_options({"connectionString": CONN, "entity": "q", "maxBatchBytes": "4000"})
    lease = _Recording()
    pipeline = _Pipeline(config, lease, PartitionStats())  # type: ignore[arg-type]
    scheme = IdScheme("position", "w", 0)

    async def feed() -> None:
        if framed:
            for run in framed_runs(pa.array(bodies, pa.binary()), scheme, 0) or []:
                await pipeline.feed_framed(run)
        else:
            for run in body_runs(bodies, scheme, 0) or []:
                await pipeline.feed_run(run)
        await pipeline.finish()

    asyncio.run(feed())
    return lease.sent, pipeline.stats


@settings(deadline=None)
@given(_bodies)
def test_the_pipeline_sends_framed_runs_as_it_sends_runs(bodies: list[bytes]) -> None:
    framed, framed_stats = _sent(bodies, True)
    rows, row_stats = _sent(bodies, False)
    assert framed == rows
    assert (framed_stats.rows, framed_stats.bytes, framed_stats.batches) == (
        row_stats.rows, row_stats.bytes, row_stats.batches)  # fmt: skip
    assert ServiceBusMessage  # (the message class the envelope copies)
