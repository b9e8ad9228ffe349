"""The sink without Spark: options, columns, message ids, the send loop against the
embedded broker (fast tier: no marker)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.namespace.batches import split_batch
from amqplink.codec.types import Symbol
from amqplink.servicebus.message import ServiceBusMessage, ServiceBusMessageBatch
from amqplink.spark import cache, encoding
from amqplink.spark.columns import (
    KEY_ROWS,
    BadRowError,
    IdScheme,
    SinkSchemaError,
    check_schema,
    columns_of_rows,
    messages,
)
from amqplink.spark.encoding import encoded_rows, runs_of
from amqplink.spark.foreach import ForeachPartitionSender, foreach_partition_sender
from amqplink.spark.options import OPTION_NAMES, SinkOptionError, parse_options, redact
from amqplink.spark.writer import PartitionStats, SinkWriteError, _Pipeline, send_partition
from tests import profiles
from tests.conftest import broker_thread
from tests.spark.conftest import ROOT, drain, new_queue

CONN = "Endpoint=sb://ns.example/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SeCrEtKeY123="


@pytest.fixture(scope="module")
def sb() -> Iterator[Broker]:
    with broker_thread(Broker(servicebus=True)) as broker:
        yield broker


# -- options --------------------------------------------------------------------------
def test_options_are_case_insensitive_and_typed() -> None:
    config = parse_options(
        {"CONNECTIONSTRING": CONN, "entity": "orders", "maxinflight": "8", "MessagesPerSecond": "50.5",
         "failOnError": "false", "retryMode": "Fixed", "connectionVerify": "false", "checkpointLocation": "/x"}
    )  # fmt: skip
    assert (config.entity, config.max_in_flight, config.messages_per_second) == ("orders", 8, 50.5)
    assert config.fail_on_error is False and config.retry_mode == "fixed" and config.connection_verify is False


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({}, "connectionString is required"),
        ({"connectionString": CONN, "maxInflight": "0"}, "option maxInFlight: must be at least 1"),
        ({"connectionString": CONN, "failOnError": "maybe"}, "option failOnError"),
        ({"connectionString": CONN, "messageIdMode": "random"}, "option messageIdMode"),
        ({"connectionString": CONN, "topic": "x"}, "unknown option 'topic'"),
        ({"credentialFactory": "azure.identity:DefaultAzureCredential"}, "option fullyQualifiedNamespace is required"),
        ({"connectionString": CONN, "credentialFactory": "not a name"}, "option credentialFactory: 'not a name' is"),
        ({"connectionString": "Endpoint=nothing;SharedAccessKey=SeCrEtKeY123="}, "option connectionString"),
    ],
)
def test_a_bad_option_is_an_error_naming_it_without_the_key(options: dict[str, str], names: str) -> None:
    with pytest.raises(SinkOptionError) as failed:
        parse_options(options)
    assert names in str(failed.value)
    assert "SeCrEtKeY123" not in str(failed.value)


def test_every_documented_option_is_accepted() -> None:
    values = {name: "1" for name in OPTION_NAMES}
    values.update(connectionString=CONN, pairedConnectionString=CONN, entity="q", retryMode="fixed",
                  messageIdMode="content", managementEndpoint="https://x/", connectionVerify="/ca.pem",
                  credentialFactory="azure.identity:DefaultAzureCredential")  # fmt: skip
    config = parse_options(values)
    assert config.paired and config.message_id_mode == "content"


def test_no_secret_in_repr_pickle_or_redacted_text() -> None:
    config = parse_options({"connectionString": CONN, "pairedConnectionString": CONN, "entity": "q"})
    sender = foreach_partition_sender({"connectionString": CONN, "entity": "q"})
    for shown in (repr(config), str(config), repr(sender), repr(pickle.loads(pickle.dumps(sender)))):
        assert "SeCrEtKeY123" not in shown
    assert pickle.loads(pickle.dumps(config)) == config
    assert isinstance(pickle.loads(pickle.dumps(sender)), ForeachPartitionSender)
    assert redact(f"failed: {CONN}") == (
        "failed: Endpoint=sb://ns.example/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=***"
    )
    assert "SeCrEtKeY123" not in config.cache_key and len(config.cache_key) == 32


# -- columns --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ([("body", "string"), ("colour", "string")], "column 'colour' is not a message property"),
        ([("body", "int")], "column 'body' has type int"),
        ([("body", "binary"), ("time_to_live", "string")], "column 'time_to_live' has type string"),
        ([("subject", "string")], "needs a 'body' column"),
        ([("body", "string"), ("application_properties", "map<string,int>")], "'application_properties'"),
    ],
)
def test_the_schema_check_names_the_column(fields: list[tuple[str, str]], names: str) -> None:
    with pytest.raises(SinkSchemaError, match=names):
        check_schema(fields, entity_option=True)


def test_an_entity_comes_from_the_option_or_a_column() -> None:
    with pytest.raises(SinkSchemaError, match="no queue or topic"):
        check_schema([("body", "string")], entity_option=False)
    check_schema([("body", "string"), ("entity", "string")], entity_option=False)
    check_schema(
        [("body", "binary"), ("time_to_live", "interval day to second"), ("scheduled_enqueue_time", "timestamp"),
         ("application_properties", "struct<a:string,b:int>"), ("time_to_live", "decimal(10,2)")],
        entity_option=True,
    )  # fmt: skip


def test_rows_become_messages_with_every_property() -> None:
    when = dt.datetime(2030, 1, 1, 12, 0)
    columns: dict[str, list[Any]] = {
        "body": [b"one", "two"],
        "subject": ["s", None],
        "session_id": [None, "sess"],
        "time_to_live": [30, dt.timedelta(minutes=2)],
        "scheduled_enqueue_time": [when, None],
        "application_properties": [[("k", "v")], {"a": "b", "n": None}],
        "correlation_id": ["c", None],
        "entity": [None, "other"],
    }
    out = list(messages(columns, IdScheme("position", "w", 3), 10))
    (e1, m1), (e2, m2) = out
    assert (e1, e2) == (None, "other")
    assert m1.message_id == "w:3:10" and m2.message_id == "w:3:11"
    assert m1.subject == "s" and m1.correlation_id == "c" and m1.time_to_live == dt.timedelta(seconds=30)
    assert m1.scheduled_enqueue_time_utc == when.replace(tzinfo=dt.UTC)
    assert m1.application_properties == {"k": "v"} and m2.application_properties == {"a": "b"}
    assert m1.partition_key == f"w:3:{10 // KEY_ROWS}" and m2.partition_key is None  # the session id is the key
    assert m2.session_id == "sess" and m2.time_to_live == dt.timedelta(minutes=2)


def test_a_message_id_column_wins_and_none_mode_gives_no_id() -> None:
    (_, given_id), (_, generated) = messages(
        {"body": ["a", "b"], "message_id": ["mine", None]}, IdScheme("position", "w", 0), 0
    )
    assert given_id.message_id == "mine" and generated.message_id == "w:0:1"
    assert given_id.partition_key is not None and given_id.partition_key.startswith("k")
    ((_, plain),) = messages({"body": ["a"]}, IdScheme("none", "w", 0), 0)
    ((_, again),) = messages({"body": ["a"]}, IdScheme("none", "w", 0), 0)
    assert plain.message_id != again.message_id  # the client's random id: a resent row is a new message
    assert plain.partition_key is None


@given(st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=8)), min_size=1, max_size=20))
def test_content_ids_depend_on_the_row_only(rows: list[tuple[str, bytes]]) -> None:
    """Same row -> same id, whatever its position or partition; different rows -> different ids."""
    columns = {"subject": [r[0] for r in rows], "body": [r[1] for r in rows]}
    first = [m.message_id for _, m in messages(columns, IdScheme("content", "a", 0), 0)]
    again = [m.message_id for _, m in messages(dict(reversed(list(columns.items()))), IdScheme("content", "b", 7), 99)]
    assert first == again
    assert len(set(first)) == len(set(rows))


_message_rows = st.fixed_dictionaries(
    {"body": st.binary(max_size=6)},
    optional={
        "subject": st.text(max_size=4),
        "correlation_id": st.text(max_size=4),
        "time_to_live": st.integers(1, 10**6),
        "application_properties": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=3),
    },
)


@given(_message_rows, st.randoms())
def test_a_content_id_is_the_message_content_not_the_frame_shape(row: dict[str, Any], rnd: Any) -> None:
    """The same message -> the same id: columns in any order, a null column or no column,
    a text or binary body, properties as a map or as Arrow's list of pairs, seconds or an interval."""
    first = _content_of(row)
    names = list(row)
    rnd.shuffle(names)
    shaped: dict[str, Any] = {name: row[name] for name in names}
    shaped["content_type"] = None  # a null column is no property
    if "application_properties" in shaped:
        pairs = list(shaped["application_properties"].items())
        rnd.shuffle(pairs)
        shaped["application_properties"] = pairs
    if "time_to_live" in shaped:
        shaped["time_to_live"] = dt.timedelta(seconds=shaped["time_to_live"])
    with contextlib.suppress(UnicodeDecodeError):
        shaped["body"] = row["body"].decode()
    assert _content_of(shaped) == first


@given(_message_rows, _message_rows)
def test_different_messages_get_different_content_ids(one: dict[str, Any], other: dict[str, Any]) -> None:
    def content(row: dict[str, Any]) -> dict[str, Any]:  # the model: what the message carries
        return {k: v for k, v in row.items() if v != {}}  # an empty property map is no property

    assert (_content_of(one) != _content_of(other)) == (content(one) != content(other))


def _content_of(row: dict[str, Any]) -> str:
    ((_, message),) = messages({name: [value] for name, value in row.items()}, IdScheme("content", "w", 0), 0)
    assert message.message_id is not None
    return message.message_id


def test_a_wrong_value_type_is_an_error_naming_the_column() -> None:
    with pytest.raises(SinkSchemaError, match="column 'subject'"):
        list(messages({"body": ["a"], "subject": [3]}, IdScheme("position", "w", 0), 0))
    with pytest.raises(SinkSchemaError, match="column 'body' is null"):
        list(messages({"body": [None]}, IdScheme("position", "w", 0), 0))


def test_rows_as_columns_for_foreach_partition() -> None:
    assert columns_of_rows([{"body": "a", "subject": "x"}, {"body": "b", "subject": None}]) == {
        "body": ["a", "b"], "subject": ["x", None]
    }  # fmt: skip


# -- the send loop --------------------------------------------------------------------
def _chunks(count: int, size: int = 100) -> list[dict[str, list[Any]]]:
    return [{"body": [f"{i}".encode() for i in range(start, min(start + size, count))]}
            for start in range(0, count, size)]  # fmt: skip


def test_send_partition_sends_everything_and_counts(sb: Broker) -> None:
    queue = new_queue(sb, dedup=True, partitioned=True)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "maxBatchBytes": "4096"})
    stats = send_partition(config, _chunks(3000), IdScheme("position", "w", 0))
    assert stats.rows == 3000 and stats.failed == 0 and stats.batches > 3000 * 1 // 4096
    got = drain(sb, queue)
    assert sorted(int(str(m)) for m in got) == list(range(3000))
    # the same partition sent again (a retried task): the entity's duplicate detection drops it all
    assert send_partition(config, _chunks(3000), IdScheme("position", "w", 0)).rows == 3000
    assert drain(sb, queue, idle=0.5) == []


def test_the_connection_is_cached_per_worker_and_closed_when_idle(sb: Broker) -> None:
    queue = new_queue(sb)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "connectionIdleTimeout": "0.3"})
    before = cache.open_entries()
    send_partition(config, _chunks(10), IdScheme("position", "a", 0))
    send_partition(config, _chunks(10), IdScheme("position", "a", 1))
    assert cache.open_entries() == before + 1  # one client for both partitions
    deadline = time.monotonic() + 10
    while cache.open_entries() > before and time.monotonic() < deadline:  # the sweep runs on the loop thread
        time.sleep(0.05)
    assert cache.open_entries() == before
    assert len(drain(sb, queue)) == 20


def test_a_partition_that_cannot_send_raises_naming_the_entity_not_the_key(
    sb: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    queue = new_queue(sb)
    fault = sb.faults.run(sb.faults.entity_unavailable, queue, condition="amqp:internal-error")
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "retryTotal": "0"})
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(SinkWriteError) as failed:
            send_partition(config, _chunks(500), IdScheme("position", "w", 4))
        lenient = parse_options({"connectionString": sb.connection_string, "entity": queue, "retryTotal": "0",
                                 "failOnError": "false"})  # fmt: skip
        stats = send_partition(lenient, _chunks(500), IdScheme("position", "w", 4))
    finally:
        sb.faults.run(sb.faults.clear, fault)
    text = str(failed.value)
    assert f"partition 4 could not send to {queue}" in text and "Spark retries" in text
    key = sb.connection_string.split("SharedAccessKey=")[1].split(";")[0]
    assert key not in text and key not in caplog.text
    assert stats.failed == 500 and stats.rows == 0
    assert "gave up on 500 of 500 rows" in caplog.text


def test_server_busy_backs_off_instead_of_failing(sb: Broker) -> None:
    queue = new_queue(sb)
    sb.faults.run(sb.faults.entity_unavailable, queue, duration=1.0)  # server-busy for 1 s
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "retryTotal": "0"})
    stats = send_partition(config, _chunks(200), IdScheme("position", "w", 0))
    assert stats.rows == 200 and stats.busy >= 1 and stats.failed == 0
    assert len(drain(sb, queue)) == 200


def test_messages_per_second_throttles_a_partition(sb: Broker) -> None:
    queue = new_queue(sb)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "messagesPerSecond": "400"})
    stats = send_partition(config, _chunks(200), IdScheme("position", "w", 0))
    assert stats.rows == 200 and stats.seconds >= 0.45  # 200 rows at 400/s: half a second at least
    assert len(drain(sb, queue)) == 200


def test_in_flight_stays_bounded(sb: Broker) -> None:
    """Dispositions held back: the loop never has more than maxInFlight batches out."""
    queue = new_queue(sb)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "maxInFlight": "2",
                            "maxBatchBytes": "2048"})  # fmt: skip
    peak = 0
    original = send_partition.__globals__["_Pipeline"]._send

    async def counting(self: Any, *args: Any) -> None:
        nonlocal peak
        peak = max(peak, config.max_in_flight - self.room._value)
        await original(self, *args)

    send_partition.__globals__["_Pipeline"]._send = counting
    try:
        stats = send_partition(config, _chunks(1000), IdScheme("position", "w", 0))
    finally:
        send_partition.__globals__["_Pipeline"]._send = original
    assert stats.rows == 1000 and stats.batches > 10 and 1 <= peak <= 2
    assert len(drain(sb, queue)) == 1000


@given(
    st.lists(st.one_of(st.binary(max_size=300), st.text(max_size=50)), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=10**9),
    st.booleans(),
    st.text(min_size=1, max_size=300),
)
def test_the_fast_encoding_is_byte_for_byte_the_general_one(
    bodies: list[Any], first_row: int, keys: bool, prefix: str
) -> None:
    scheme = IdScheme("position", prefix, 7, keys)
    fast = list(encoded_rows({"body": bodies}, scheme, first_row))
    general = list(encoding._general({"body": bodies}, scheme, first_row))
    assert [(e, k, enc, n) for e, k, enc, n, _ in fast] == [(e, k, enc, n) for e, k, enc, n, _ in general]
    for (*_, make), (*_, message) in zip(fast, general, strict=True):
        made = make() if callable(make) else make
        assert made._message.encode() == message._message.encode()


@given(
    st.lists(st.one_of(st.integers(0, 120), st.integers(200, 600)), min_size=30, max_size=60),  # past the limit
    st.integers(0, 39),
    st.integers(300, 1500),
    st.integers(0, 3),
)
def test_a_run_fills_a_batch_as_one_message_at_a_time_does(
    sizes: list[int], start: int, limit: int, before: int
) -> None:
    encoded = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    start = min(start, len(encoded))
    made: list[int] = []

    def first(i: int) -> ServiceBusMessage:
        made.append(i)
        return ServiceBusMessage(b"", message_id=f"id-{i}", partition_key="k")

    alone, together = ServiceBusMessageBatch(limit), ServiceBusMessageBatch(limit)
    for i in range(min(before, start)):  # a batch that holds some already
        assert alone.add_encoded(encoded[i], first(i)) == together.add_encoded(encoded[i], first(i))
    made.clear()
    added = 0
    for i in range(start, len(encoded)):
        if not alone.add_encoded(encoded[i], lambda i=i: first(i)):
            break
        added += 1
    expected_first = list(made)
    made.clear()
    assert together.add_run(encoded, start, first) == added
    assert made == expected_first  # the first message made only when the batch has none
    assert (len(together), together.size_in_bytes, together._payload()) == (
        len(alone),
        alone.size_in_bytes,
        alone._payload(),
    )


class _RecordingSender:
    max_message_size = 256 * 1024

    def __init__(self, sent: list[bytes]) -> None:
        self.sent = sent

    async def create_message_batch(self) -> None:
        return None

    async def send_messages(self, batch: ServiceBusMessageBatch, timeout: float | None = None) -> None:
        self.sent.append(batch._payload())


class _RecordingLease:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sender(self, entity: str) -> _RecordingSender:
        return _RecordingSender(self.sent)


def _fed(chunks: list[list[bytes]], runs: bool, max_batch_bytes: int) -> tuple[list[bytes], Any]:
    """The batch payloads a pipeline sends for ``chunks`` of bodies, fed as runs or row by row."""
    config = parse_options({"connectionString": CONN, "entity": "q", "maxBatchBytes": str(max_batch_bytes)})
    lease = _RecordingLease()
    pipeline = _Pipeline(config, lease, PartitionStats())  # type: ignore[arg-type]
    scheme = IdScheme("position", "w", 3)

    async def feed() -> None:
        row = 0
        for bodies in chunks:
            columns = {"body": bodies}
            if runs:
                for run in runs_of(columns, scheme, row) or []:
                    await pipeline.feed_run(run)
            else:
                await pipeline.feed(list(encoded_rows(columns, scheme, row)))
            row += len(bodies)
        await pipeline.finish()

    asyncio.run(feed())
    return lease.sent, pipeline.stats


@settings(profiles.HEAVY, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=700), max_size=300), max_size=4), st.integers(2000, 20000))
def test_runs_send_what_rows_one_at_a_time_send(chunks: list[list[bytes]], max_batch_bytes: int) -> None:
    """The same messages, once each, in batches of one key within the limit; the same counts.
    (Row by row, more keys open than maxInFlight are flushed at the first row of the next key,
    by runs after it: the batches may be cut differently.)"""
    by_runs, run_stats = _fed(chunks, True, max_batch_bytes)
    by_rows, row_stats = _fed(chunks, False, max_batch_bytes)

    def messages_of(sent: list[bytes]) -> list[bytes]:
        out = []
        for payload in sent:
            assert len(payload) <= max_batch_bytes
            envelopes = split_batch(payload)
            keys = {e.annotations.get(Symbol("x-opt-partition-key")) for e in envelopes}
            assert len(keys) == 1 and None not in keys  # one key (a run of KEY_ROWS rows)
            out += [e.props_raw + e.body for e in envelopes]
        return out

    assert sorted(messages_of(by_runs)) == sorted(messages_of(by_rows))
    assert len(messages_of(by_runs)) == sum(map(len, chunks))
    assert (run_stats.rows, run_stats.bytes) == (row_stats.rows, row_stats.bytes)
    assert run_stats.batches <= row_stats.batches


NO_SPARK = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "pyarrow", "pandas"):
            raise ImportError("blocked for this test: " + name)

sys.meta_path.insert(0, Block())
import amqplink.spark  # the sink's options, ids and send loop need no Spark
from amqplink.cli import main
sys.exit(main(["demo", "--rows", "10"]))
"""


def test_the_demo_without_the_spark_extra_says_what_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_SPARK], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "amqplink demo: the demo needs pyspark, pyarrow, pandas: python3 -m pip install 'amqplink[spark]' "
        "(from a checkout: python3 -m pip install -e '.[spark,broker]')"
    )


def test_a_row_larger_than_the_entity_takes_fails_the_partition_naming_it(sb: Broker) -> None:
    """Rows as columns (``foreachPartition``): found when the encoder reaches it, after the
    rows before it were sent; named with its position and id; no retry can help."""
    queue = new_queue(sb)
    config = parse_options({"connectionString": sb.connection_string, "entity": queue, "maxBatchBytes": "2048"})
    chunk = {"body": [b"small", b"x" * 4096]}
    with pytest.raises(BadRowError) as failed:
        send_partition(config, [chunk], IdScheme("position", "w", 0))
    assert (failed.value.row, failed.value.message_id, failed.value.column) == (1, "w:0:1", "body")
    assert "makes a message of 41" in str(failed.value) and f"{queue} takes at most 2048" in str(failed.value)
    assert "retrying will not help" in str(failed.value)
    assert [str(m) for m in drain(sb, queue, idle=0.5)] == ["small"]  # the row before it was sent


def test_foreach_sender_checks_a_given_schema_when_made() -> None:
    """``schema=``: the data source's check, on the driver (a StructType's ``fields``)."""

    class Type:
        def __init__(self, name: str) -> None:
            self.name = name

        def simpleString(self) -> str:
            return self.name

    class Field:
        def __init__(self, name: str, kind: str) -> None:
            self.name, self.dataType = name, Type(kind)

    class Schema:
        def __init__(self, *fields: tuple[str, str]) -> None:
            self.fields = [Field(*f) for f in fields]

    options = {"connectionString": CONN, "entity": "q"}
    assert foreach_partition_sender(options, schema=Schema(("body", "string"), ("message_id", "string")))
    with pytest.raises(SinkSchemaError, match="column 'order_id' is not a message property"):
        foreach_partition_sender(options, schema=Schema(("body", "string"), ("order_id", "string")))
    with pytest.raises(SinkSchemaError, match="column 'body' has type int"):
        foreach_partition_sender(options, schema=Schema(("body", "int"),))
    with pytest.raises(TypeError, match=r"give the DataFrame's schema \(df.schema\)"):
        foreach_partition_sender(options, schema=["body"])
