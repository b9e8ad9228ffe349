"""Issue 30, item 1, as a user meets it: a queue with ``RequiresDuplicateDetection`` and
``MaxSizeInMegabytes: 1`` (an emulator Config.json), 100 KiB messages ``m0..m19`` sent one
by one (10 stored, 10 refused for quota), the queue drained, the refused ids sent again:
they are stored (before the fix they were acknowledged as duplicates and dropped). The
same bodies run with the official SDK (the ``azure`` runs: sdk tier) and with amqplink's own
client (fast tier); only the import differs (``tests/servicebus/scenario.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import parse_config
from amqplink.spark.columns import IdScheme
from amqplink.spark.options import parse_options
from amqplink.spark.writer import SinkWriteError, send_partition
from tests.broker.sdkutil import running_broker
from tests.servicebus.scenario import CLIENTS, Api, load_api

KIB = 1024
LISTEN_ONLY = ("listen-only", "listen-only-key")
CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {"Name": name, "Properties": {"RequiresDuplicateDetection": True, "MaxSizeInMegabytes": 1}}
                    for kind in ("repro", "batches", "scheduled", "stamped")
                    for name in [f"{kind}-{client}" for client in CLIENTS]  # a queue of each kind per client
                ]
                + [
                    {"Name": "spark", "Properties": {"RequiresDuplicateDetection": True, "MaxSizeInMegabytes": 1}},
                    {"Name": "faults", "Properties": {"RequiresDuplicateDetection": True}},
                    {
                        "Name": "fragments",
                        "Properties": {
                            "RequiresDuplicateDetection": True,
                            "EnablePartitioning": True,
                            "PartitionCount": 2,
                        },
                    },
                    {
                        "Name": "rights",
                        "Properties": {"RequiresDuplicateDetection": True},
                        "AuthorizationRules": [
                            {"Name": LISTEN_ONLY[0], "PrimaryKey": LISTEN_ONLY[1], "Rights": ["Listen"]}
                        ],
                    },
                ],
            }
        ]
    }
}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(parse_config(CONFIG)) as b:
        yield b


@pytest.fixture(params=CLIENTS)
def api(request: pytest.FixtureRequest) -> Api:
    return load_api(request.param)


@pytest.fixture()
def client(api: Api, broker: Broker) -> Iterator[Any]:
    # retry_total=0: a refusal surfaces at once (the SDK would retry a quota refusal anyway: not retryable)
    with api.sb.ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as sb:
        yield sb


def drain(api: Api, client: Any, queue: str) -> list[str]:
    """Every message id of ``queue``, received and deleted."""
    got: list[str] = []
    mode = api.sb.ServiceBusReceiveMode.RECEIVE_AND_DELETE
    with client.get_queue_receiver(queue, receive_mode=mode) as receiver:
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=0.5):
            got += [str(m.message_id) for m in batch]
    return got


def test_ids_refused_for_quota_are_stored_when_sent_again(api: Api, client: Any) -> None:
    queue = f"repro-{api.name}"
    refused: list[str] = []
    with client.get_queue_sender(queue) as sender:
        for i in range(20):
            try:
                sender.send_messages(api.sb.ServiceBusMessage(bytes(100 * KIB), message_id=f"m{i}"))
            except api.exceptions.ServiceBusQuotaExceededError:
                refused.append(f"m{i}")
    assert refused == [f"m{i}" for i in range(10, 20)]
    assert drain(api, client, queue) == [f"m{i}" for i in range(10)]
    with client.get_queue_sender(queue) as sender:
        for mid in refused:
            sender.send_messages(api.sb.ServiceBusMessage(bytes(100 * KIB), message_id=mid))
        for i in range(20):  # every id is now stored within the window: all duplicates
            sender.send_messages(api.sb.ServiceBusMessage(b"again", message_id=f"m{i}"))
    assert drain(api, client, queue) == refused


def test_a_batch_refused_for_quota_is_stored_when_sent_again(api: Api, client: Any) -> None:
    queue = f"batches-{api.name}"
    with client.get_queue_sender(queue) as sender:
        for i in range(9):
            sender.send_messages(api.sb.ServiceBusMessage(bytes(100 * KIB), message_id=f"fill{i}"))
        batch = sender.create_message_batch()
        for i in range(3):
            batch.add_message(api.sb.ServiceBusMessage(bytes(70 * KIB), message_id=f"b{i}"))
        with pytest.raises(api.exceptions.ServiceBusQuotaExceededError):
            sender.send_messages(batch)  # 900 KiB held + 210 KiB > 1 MiB: refused whole
        assert len(drain(api, client, queue)) == 9
        again = sender.create_message_batch()
        for i in range(3):
            again.add_message(api.sb.ServiceBusMessage(bytes(70 * KIB), message_id=f"b{i}"))
        sender.send_messages(again)
    assert drain(api, client, queue) == ["b0", "b1", "b2"]


def test_a_scheduled_id_is_a_duplicate_of_a_later_send(api: Api, client: Any) -> None:
    """Scheduled with ``schedule_messages`` ($management schedule-message), then sent and
    scheduled again with the same id: one message, the first (Azure/azure-service-bus#265)."""
    queue = f"scheduled-{api.name}"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender(queue) as sender:
        (first,) = sender.schedule_messages(api.sb.ServiceBusMessage(b"first", message_id="X"), later)
        sender.send_messages(api.sb.ServiceBusMessage(b"second", message_id="X"))
        (third,) = sender.schedule_messages(api.sb.ServiceBusMessage(b"third", message_id="X"), later)
    assert third != first
    with client.get_queue_receiver(queue) as receiver:
        peeked = receiver.peek_messages(max_message_count=10)
    assert [(str(m), m.sequence_number) for m in peeked] == [("first", first)]


def test_a_send_scheduled_by_its_annotation_is_a_duplicate_of_a_later_schedule(api: Api, client: Any) -> None:
    """``scheduled_enqueue_time_utc`` on a sent message (``x-opt-scheduled-enqueue-time``)."""
    queue = f"stamped-{api.name}"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(api.sb.ServiceBusMessage(b"first", message_id="X", scheduled_enqueue_time_utc=later))
        sender.schedule_messages(api.sb.ServiceBusMessage(b"second", message_id="X"), later)
        sender.send_messages(api.sb.ServiceBusMessage(b"third", message_id="X"))
    with client.get_queue_receiver(queue) as receiver:
        assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == ["first"]


def test_the_spark_sink_retrying_a_partition_refused_for_quota_loses_no_row(broker: Broker) -> None:
    """The issue's Spark job, one partition without Spark: the sink's send loop fills the queue
    past its quota, fails the task (``SinkWriteError``: Spark retries it); the queue is drained
    and the task retried with the same message ids. Every row arrives once: those stored by the
    first attempt are dropped as duplicates, those refused are stored (before the fix they were
    dropped too: "0 failed" and rows missing)."""
    queue = "spark"
    api = load_api("amqplink")
    rows = 50
    chunks = [{"body": [b"%03d" % i + bytes(30 * KIB) for i in range(rows)]}]
    config = parse_options({"connectionString": broker.connection_string, "entity": queue, "retryTotal": "0"})
    with pytest.raises(SinkWriteError):
        send_partition(config, chunks, IdScheme("position", "job", 0))
    with api.sb.ServiceBusClient.from_connection_string(broker.connection_string) as sb:
        first = drain(api, sb, queue)
        assert 0 < len(first) < rows
        stats = send_partition(config, chunks, IdScheme("position", "job", 0))  # Spark's retry of the task
        assert stats.rows == rows and stats.failed == 0
        second = drain(api, sb, queue)
    assert len(first) + len(second) == rows
    assert len(set(first) | set(second)) == rows


def ours() -> tuple[Api, Any]:
    """amqplink's own client API and its blocking client class (the faults below are the
    broker's, whoever sends: these run in the fast tier only)."""
    api = load_api("amqplink")
    return api, api.sb.ServiceBusClient


def peeked_ids(client: Any, queue: str) -> list[str]:
    with client.get_queue_receiver(queue) as receiver:
        return [str(m.message_id) for m in receiver.peek_messages(max_message_count=50)]


def test_sends_refused_by_injected_faults_are_stored_when_retried(broker: Broker) -> None:
    """``entity-unavailable`` refuses before the namespace; ``fragment-unavailable`` takes the
    id's fragment down (the message id is the key of a partitioned queue with duplicate
    detection). Neither refusal is remembered: the retry is stored, the one after it dropped."""
    api, client_class = ours()
    faults = broker.faults
    with client_class.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("faults") as sender:
            fault = faults.run(faults.entity_unavailable, "faults", condition="amqp:internal-error")
            with pytest.raises(api.exceptions.ServiceBusError):
                sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
            faults.run(faults.clear, fault)
            sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
            sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
        partitions = broker.namespace.queue("fragments").partitions
        assert partitions is not None
        fault = faults.run(
            faults.fragment_unavailable, "fragments", partitions.index("Y"), condition="amqp:internal-error"
        )
        with client.get_queue_sender("fragments") as sender:
            with pytest.raises(api.exceptions.ServiceBusError):
                sender.send_messages(api.sb.ServiceBusMessage(b"y", message_id="Y"))
            faults.run(faults.clear, fault)
            sender.send_messages(api.sb.ServiceBusMessage(b"y", message_id="Y"))
            sender.send_messages(api.sb.ServiceBusMessage(b"y", message_id="Y"))
        assert peeked_ids(client, "faults") == ["X"]
        assert peeked_ids(client, "fragments") == ["Y"]


def test_a_send_refused_for_missing_rights_is_stored_when_sent_with_them(broker: Broker) -> None:
    api, client_class = ours()
    listen_only = (
        f"Endpoint=sb://127.0.0.1:{broker.port};SharedAccessKeyName={LISTEN_ONLY[0]};"
        f"SharedAccessKey={LISTEN_ONLY[1]};UseDevelopmentEmulator=true"
    )
    refused = api.exceptions.ServiceBusAuthorizationError
    with client_class.from_connection_string(listen_only, retry_total=0) as client:
        sender = client.get_queue_sender("rights")
        with pytest.raises(refused), sender:  # (the attach is refused: no Send right)
            sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
    with client_class.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("rights") as sender:
            sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
            sender.send_messages(api.sb.ServiceBusMessage(b"x", message_id="X"))
        assert peeked_ids(client, "rights") == ["X"]
