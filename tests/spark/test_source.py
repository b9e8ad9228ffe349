"""The source under a real local Spark: batch reads (peeks, nothing changed) and streaming
reads (peek-lock, completed after Spark's commit, replays return the same rows)."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import EntityProperties, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from tests.spark.conftest import drain, new_queue, stored

pytestmark = pytest.mark.spark


def _send(broker: Broker, entity: str, count: int, *, start: int = 0, **extra: Any) -> None:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender(entity) as sender,
    ):
        for first in range(start, start + count, 500):
            sender.send_messages([
                ServiceBusMessage(f"m{i}", message_id=f"id-{i}", subject=f"s{i % 3}",
                                  application_properties={"i": i, "tag": "x"}, **extra)
                for i in range(first, min(start + count, first + 500))
            ])  # fmt: skip


def _read(spark: Any, broker: Broker, entity: str, **options: str) -> Any:
    reader = spark.read.format("servicebus").option("connectionString", broker.connection_string)
    return reader.option("entity", entity).options(**options).load()


def _queue(broker: Broker, **properties: Any) -> str:
    name = f"q-{uuid.uuid4().hex[:10]}"
    broker.faults.run(broker.namespace.add_queue, QueueConfig(name, EntityProperties(**properties)))
    return name


def test_a_batch_read_gives_every_message_with_its_columns_and_leaves_the_queue_as_it_was(
    spark: Any, sb_broker: Broker
) -> None:
    queue = new_queue(sb_broker)
    _send(sb_broker, queue, 2500, time_to_live=dt.timedelta(hours=1), correlation_id="c")
    first = _read(spark, sb_broker, queue, numPartitions="3").collect()
    again = _read(spark, sb_broker, queue).collect()
    assert len(first) == 2500 and sorted(first, key=lambda r: r.sequence_number) == sorted(
        again, key=lambda r: r.sequence_number
    )  # repeatable
    row = next(r for r in first if r.message_id == "id-7")
    assert row.body == b"m7" and row.subject == "s1" and row.correlation_id == "c" and row.entity == queue
    assert row.application_properties == {"i": "7", "tag": "x"} and row.time_to_live == dt.timedelta(hours=1)
    assert row.delivery_count == 0 and row.sequence_number > 0 and row.enqueued_time is not None
    assert len({r.sequence_number for r in first}) == 2500
    left = drain(sb_broker, queue)  # nothing was taken, locked or counted as a delivery
    assert len(left) == 2500 and {m.delivery_count for m in left} == {0}


def test_a_batch_read_of_a_subscription_a_dead_letter_queue_a_partitioned_queue_and_sessions(
    spark: Any, sb_broker: Broker
) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    sb_broker.faults.run(sb_broker.namespace.add_topic, TopicConfig(topic, subscriptions=(SubscriptionConfig("s"),)))
    _send(sb_broker, topic, 300)
    assert len(_read(spark, sb_broker, f"{topic}/Subscriptions/s").collect()) == 300
    with (
        ServiceBusClient.from_connection_string(sb_broker.connection_string) as client,
        client.get_subscription_receiver(topic, "s", max_wait_time=2) as receiver,
    ):
        for message in receiver.receive_messages(max_message_count=40, max_wait_time=5):
            receiver.dead_letter_message(message, reason="bad")
    dead = _read(spark, sb_broker, f"{topic}/Subscriptions/s/$DeadLetterQueue").collect()
    assert len(dead) == 40 and {r.application_properties["DeadLetterReason"] for r in dead} == {"bad"}
    partitioned = _queue(sb_broker, enable_partitioning=True)
    _send(sb_broker, partitioned, 1000)
    rows = _read(spark, sb_broker, partitioned, numPartitions="5").collect()
    assert sorted(int(r.body[1:]) for r in rows) == list(range(1000))
    sessions = _queue(sb_broker, requires_session=True)
    for session in range(5):
        _send(sb_broker, sessions, 100, start=session * 100, session_id=f"s{session}")
    rows = _read(spark, sb_broker, sessions, sessions="true", numPartitions="2").collect()
    assert Counter(r.session_id for r in rows) == {f"s{i}": 100 for i in range(5)}
    some = _read(spark, sb_broker, queue := new_queue(sb_broker)).collect()
    assert some == []  # an empty entity
    _send(sb_broker, queue, 50)
    low = min(r.sequence_number for r in _read(spark, sb_broker, queue).collect())
    ranged = _read(spark, sb_broker, queue, startingSequenceNumber=str(low + 10), endingSequenceNumber=str(low + 19))
    assert sorted(r.sequence_number for r in ranged.collect()) == list(range(low + 10, low + 20))


def test_a_read_written_back_unchanged_arrives_as_it_was_sent(spark: Any, sb_broker: Broker) -> None:
    source, target = new_queue(sb_broker), new_queue(sb_broker)
    _send(sb_broker, source, 100, correlation_id="c", time_to_live=dt.timedelta(minutes=5))
    read = _read(spark, sb_broker, source)
    read.write.format("servicebus").option("connectionString", sb_broker.connection_string).option(
        "entity", target
    ).mode("append").save()  # the entity option wins over the rows' entity column
    copied = {m.message_id: m for m in drain(sb_broker, target)}
    originals = {m.message_id: m for m in drain(sb_broker, source)}
    assert copied.keys() == originals.keys() and len(copied) == 100
    for key, message in copied.items():
        was = originals[key]
        assert (str(message), message.subject, message.correlation_id, message.time_to_live) == (
            str(was), was.subject, was.correlation_id, was.time_to_live)  # fmt: skip
        assert _texts(message.application_properties) == _texts(was.application_properties)  # as text


def _texts(properties: Any) -> dict[str, str]:
    """Properties as the source's map<string,string> holds them (the SDK gives text as bytes)."""
    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    return {text(k): text(v) for k, v in (properties or {}).items()}


def _stream(spark: Any, broker: Broker, entity: str, checkpoint: Path, **options: str) -> Any:
    reader = spark.readStream.format("servicebus").option("connectionString", broker.connection_string)
    return reader.option("entity", entity).option("checkpointLocation", str(checkpoint)).options(**options).load()


def _run_available_now(frame: Any, checkpoint: Path, batch: Any) -> Any:
    query = (
        frame.writeStream.foreachBatch(batch).option("checkpointLocation", str(checkpoint / "query"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    from pyspark.errors import StreamingQueryException

    with contextlib.suppress(StreamingQueryException):  # query.exception() has it
        assert query.awaitTermination(300)
    return query


def test_a_stream_reads_every_message_once_in_batches_and_completes_them(
    spark: Any, sb_broker: Broker, tmp_path: Path
) -> None:
    queue = new_queue(sb_broker)
    _send(sb_broker, queue, 2500)
    seen: list[tuple[int, list[int]]] = []
    query = _run_available_now(
        _stream(spark, sb_broker, queue, tmp_path, maxMessagesPerTrigger="1000"),
        tmp_path,
        lambda df, batch_id: seen.append((batch_id, [r.sequence_number for r in df.collect()])),
    )
    assert query.exception() is None
    assert [len(rows) for _, rows in seen] == [1000, 1000, 500]  # maxMessagesPerTrigger
    assert len({s for _, rows in seen for s in rows}) == 2500
    assert stored(sb_broker.connection_string, queue) == 0  # every message completed, the last batch's too
    import json

    counters = [json.loads(p["sources"][0]["latestOffset"]) for p in query.recentProgress if p["numInputRows"]]
    # a batch's messages are completed once Spark asks for the next batch (it committed this one), in
    # the background: by the batch after that they are
    assert [c["received"] for c in counters] == [1000, 2000, 2500]
    assert [c["completed"] <= 1000 * i for i, c in enumerate(counters)] == [True] * 3
    assert [c["completed"] >= 1000 * (i - 1) for i, c in enumerate(counters)] == [True] * 3
    assert {c["redelivered"] for c in counters} == {0}


@pytest.mark.parametrize("partitioned", [False, True])
def test_available_now_ends_once_the_entity_has_nothing_without_waiting_receive_wait(
    spark: Any, sb_broker: Broker, tmp_path: Path, partitioned: bool
) -> None:
    """A receive that finds nothing drains its credit, and the broker's answer says the entity
    had nothing to deliver: the query ends then, not after ``receiveWait`` (here 600 s, which
    the old rule waited at the end of every query, and at once on an empty entity), and not
    before every message was read (a partitioned queue answers for all its fragments)."""
    queue = new_queue(sb_broker, partitioned=partitioned)
    _send(sb_broker, queue, 1500)
    seen: list[int] = []
    frame = _stream(spark, sb_broker, queue, tmp_path, maxMessagesPerTrigger="1000", receiveWait="600")
    query = frame.writeStream.foreachBatch(lambda df, _: seen.extend(r.sequence_number for r in df.collect())).option(
        "checkpointLocation", str(tmp_path / "query")).trigger(availableNow=True).start()  # fmt: skip
    assert query.awaitTermination(120) and query.exception() is None
    assert len(seen) == len(set(seen)) == 1500
    assert stored(sb_broker.connection_string, queue) == 0  # the last batch completed before the query ended
    empty = new_queue(sb_broker)
    again = _stream(spark, sb_broker, empty, tmp_path / "empty", receiveWait="600").writeStream.format("noop").option(
        "checkpointLocation", str(tmp_path / "empty" / "query")).trigger(availableNow=True).start()  # fmt: skip
    assert again.awaitTermination(120) and again.exception() is None


@pytest.mark.parametrize("staged_reads", ["file", "inline"])
def test_a_micro_batch_replayed_after_a_failure_has_the_same_rows_and_nothing_is_emitted_twice(
    spark: Any, sb_broker: Broker, tmp_path: Path, staged_reads: str
) -> None:
    """The query fails in batch 1 after its sink wrote it (Spark did not commit it); restarted,
    Spark replays batch 1 from the staged rows (the tasks reading the staged file, or the rows in
    the partitions); the messages' redelivered copies are completed, not emitted in a later batch."""
    queue = new_queue(sb_broker)
    _send(sb_broker, queue, 1500)
    written: dict[int, list[list[int]]] = {}

    def sink(fail: bool) -> Any:
        def write(df: Any, batch_id: int) -> None:
            written.setdefault(batch_id, []).append(sorted(r.sequence_number for r in df.collect()))
            if fail and batch_id == 1:
                raise RuntimeError("the sink's job failed after writing micro-batch 1")

        return write

    frame = _stream(spark, sb_broker, queue, tmp_path, maxMessagesPerTrigger="500", stagedReads=staged_reads)
    assert _run_available_now(frame, tmp_path, sink(True)).exception() is not None
    assert _run_available_now(frame, tmp_path, sink(False)).exception() is None
    assert len(written[1]) == 2 and written[1][0] == written[1][1]  # the replay: the same rows
    once = [seqs[-1] for _, seqs in sorted(written.items())]
    flat = [s for seqs in once for s in seqs]
    assert len(flat) == len(set(flat)) == 1500  # into an idempotent sink: each message once
    assert drain(sb_broker, queue, idle=1.0) == []


@pytest.mark.parametrize("staged_reads", ["auto", "file", "inline"])
def test_the_tasks_read_the_staged_file_under_a_local_master_and_refuse_one_that_changed(
    spark: Any, sb_broker: Broker, tmp_path: Path, staged_reads: str
) -> None:
    """The staged file gets bytes appended after the batch was planned: a task that reads it (``file``,
    and ``auto`` under ``local[...]``) fails naming the file and the option; with ``inline`` the rows
    travel in the partitions, read from the file up to its end-of-stream marker, so the batch is
    read whole."""
    queue = new_queue(sb_broker)
    _send(sb_broker, queue, 40)
    counts: list[int] = []

    def write(df: Any, batch_id: int) -> None:
        for staged in (tmp_path / "servicebus").glob(f"*/batches/{batch_id}.arrow"):
            with staged.open("ab") as f:
                f.write(b"not the rows staged")
        counts.append(df.count())

    frame = _stream(spark, sb_broker, queue, tmp_path, stagedReads=staged_reads)
    error = _run_available_now(frame, tmp_path, write).exception()
    if staged_reads == "inline":
        assert error is None and counts == [40]
    else:
        assert error is not None and "stagedReads=inline" in str(error) and "0.arrow" in str(error)


def test_locks_are_renewed_while_a_batch_takes_longer_than_the_lock(
    spark: Any, sb_broker: Broker, tmp_path: Path
) -> None:
    import time

    queue = _queue(sb_broker, lock_duration=4.0)
    _send(sb_broker, queue, 300)
    rows: list[Any] = []

    def slow(df: Any, batch_id: int) -> None:
        rows.extend(df.collect())
        time.sleep(10)  # the sink's work takes 2.5 lock durations (the condition under test, not a wait)

    query = _run_available_now(_stream(spark, sb_broker, queue, tmp_path), tmp_path, slow)
    assert query.exception() is None and len(rows) == 300
    assert {r.delivery_count for r in rows} == {0}
    assert drain(sb_broker, queue, idle=1.0) == []  # completed after 10 s: the 4 s locks were renewed


def test_a_session_queue_streams_every_session(spark: Any, sb_broker: Broker, tmp_path: Path) -> None:
    queue = _queue(sb_broker, requires_session=True)
    for session in range(12):
        _send(sb_broker, queue, 50, start=session * 50, session_id=f"s{session}")
    seen: list[Any] = []
    query = _run_available_now(
        _stream(spark, sb_broker, queue, tmp_path, sessions="true", maxConcurrentSessions="4"),
        tmp_path,
        lambda df, _batch: seen.extend(df.collect()),
    )
    assert query.exception() is None
    assert Counter(r.session_id for r in seen) == {f"s{i}": 50 for i in range(12)}
    in_session = {}
    for r in seen:
        in_session.setdefault(r.session_id, []).append(r.sequence_number)
    assert all(seqs == sorted(seqs) for seqs in in_session.values())  # each session in order
    with (
        ServiceBusClient.from_connection_string(sb_broker.connection_string) as client,
        client.get_queue_receiver(queue, session_id="s3", max_wait_time=1,
                                  receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver,
    ):  # fmt: skip
        assert receiver.receive_messages(max_message_count=10, max_wait_time=1) == []


def test_a_streaming_read_needs_a_checkpoint_location(spark: Any, sb_broker: Broker) -> None:
    frame = spark.readStream.format("servicebus").option("connectionString", sb_broker.connection_string).option(
        "entity", "q"
    ).load()
    with pytest.raises(Exception, match="option checkpointLocation is required"):
        frame.writeStream.format("console").start().awaitTermination(60)
    assert ServiceBusSubQueue.DEAD_LETTER  # (the sub-queue names the source reads)


def test_a_credential_factory_gives_the_executors_their_tokens(spark: Any, sb_broker: Broker, tmp_path: Path) -> None:
    """``credentialFactory`` names a callable each Python worker calls for a token credential
    (its tokens are the only good ones here: the connection string, which gives the namespace,
    has a wrong key, and without the factory the broker refuses it)."""
    import re

    wrong = re.sub(r"SharedAccessKey=[^;]*", "SharedAccessKey=not-the-key", sb_broker.connection_string)
    factory = {"connectionString": wrong, "credentialFactory": "tests.spark.token_factory:make"}
    queue = new_queue(sb_broker)
    frame = spark.range(0, 300, numPartitions=3).selectExpr("cast(id as string) as body")
    frame.write.format("servicebus").options(entity=queue, **factory).mode("append").save()
    read = spark.read.format("servicebus").options(entity=queue, **factory).load()
    assert sorted(int(r.body) for r in read.collect()) == list(range(300))
    seen: list[Any] = []
    stream = spark.readStream.format("servicebus").options(entity=queue, checkpointLocation=str(tmp_path), **factory)
    query = _run_available_now(stream.load(), tmp_path, lambda df, _b: seen.extend(df.collect()))
    assert query.exception() is None and len(seen) == 300
    with pytest.raises(Exception, match="SAS token refused"):
        frame.write.format("servicebus").options(connectionString=wrong, entity=queue, retryTotal="0").mode(
            "append"
        ).save()
    missing = "tests.spark.token_factory:nothing"
    with pytest.raises(Exception, match=re.escape(f"credentialFactory {missing!r} cannot be loaded")):
        spark.read.format("servicebus").options(connectionString=wrong, entity=queue,
                                                credentialFactory=missing).load().collect()  # fmt: skip
