"""Metrics (issue 32, item 6): read from the state objects through one table, as JSON and
as OpenTelemetry observable instruments (collected by the SDK's in-memory reader), the
same values both ways; nothing registered, and no error, without opentelemetry."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from amqplink.servicebus import LocalQueueOptions, ServiceBusMessage
from amqplink.servicebus.aio import ActiveReplicationSender, ServiceBusClient
from amqplink.servicebus.metrics import METRICS, instrument, readings, sources_of
from tests.servicebus.paired_util import FAST, namespaces, options
from tests.servicebus.scenario import wait_until
from tests.servicebus.test_localqueue_client import local_depth
from tests.servicebus.test_replication_senders import FakeSender, _error, _s


def collected(reader: Any) -> dict[str, list[dict[str, Any]]]:
    """What an in-memory reader collected: name -> [{"value", **attributes}]."""
    out: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = [{"value": round(p.value, 3), **p.attributes} for p in metric.data.data_points]
    return out


def without_ages(metrics: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The readings without the values that change between two reads (ages)."""
    return {
        name: [{k: v for k, v in p.items() if not (k == "value" and name.endswith("oldest_age"))} for p in points]
        for name, points in metrics.items()
    }


async def test_paired_and_local_queue_metrics_as_json_and_as_instruments(tmp_path: Path) -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.metrics", reason="pip install opentelemetry-sdk (the test extra)")
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    async with namespaces() as (primary, secondary):
        client = ServiceBusClient.from_connection_string(
            primary.connection_string,
            paired_namespace=options(secondary),
            local_queue=LocalQueueOptions(tmp_path / "lq"),
            **FAST,
        )
        reader = InMemoryMetricReader()
        provider = sdk.MeterProvider(metric_readers=[reader])
        async with client, client.get_queue_sender("orders") as sender:
            assert instrument(client, meter_provider=provider) is not None
            primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            await sender.send_messages(ServiceBusMessage("stored, then parked"))  # the timer runs: stored locally

            def parked() -> bool:
                state = client.paired_state
                return state is not None and state.parked == 1 and local_depth(client) == 0

            await wait_until(parked)  # failover engaged: the local queue's forward was parked
            for name in client.paired_state.backlog_queues:  # type: ignore[union-attr]
                secondary.faults.entity_unavailable(name, condition="amqp:internal-error")
            for i in range(3):  # the backlog queues fail: stored locally
                await sender.send_messages(ServiceBusMessage(f"local {i}"))
            shown = readings(sources_of(client))
            got = collected(reader)
        assert without_ages(shown) == without_ages(got)  # the same metrics, the same values
        assert shown["amqplink.paired.failovers"] == [{"value": 1.0}]
        assert shown["amqplink.paired.parked"] == [{"value": 1.0}]
        assert shown["amqplink.paired.failed_over"] == [{"value": 1.0}]
        directory = str(tmp_path / "lq")
        assert shown["amqplink.local_queue.depth"] == [{"value": 3.0, "directory": directory}]
        assert shown["amqplink.local_queue.stored"] == [{"value": 4.0, "directory": directory}]
        assert shown["amqplink.local_queue.forwarded"] == [{"value": 1.0, "directory": directory}]
        assert shown["amqplink.local_queue.entity.depth"] == [
            {"value": 3.0, "directory": directory, "entity": "orders"}
        ]
        assert shown["amqplink.paired.last_failover_time"][0]["value"] > 1.7e9
        errors = {p["source"] for p in shown["amqplink.last_error"]}
        assert "paired" in errors


async def test_replication_metrics_name_each_sender_and_namespace() -> None:
    a, b = FakeSender("a", _error("amqp:connection:forced")), FakeSender("b")
    sender = ActiveReplicationSender(_s(a), _s(b), break_for=60)
    await sender.send_messages(ServiceBusMessage("x"))
    shown = readings(_replication({"sales": sender}))
    assert shown["amqplink.replication.sent_to_one"] == [{"value": 1.0, "sender": "sales"}]
    assert shown["amqplink.replication.breaker.open"] == [
        {"value": 1.0, "sender": "sales", "namespace": "0"},
        {"value": 0.0, "sender": "sales", "namespace": "1"},
    ]
    await sender.close()


def _replication(senders: dict[str, Any]) -> Any:
    from amqplink.servicebus.metrics import Sources

    return Sources(replication=senders)


def test_without_opentelemetry_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if not installed
    assert instrument(sources=_replication({})) is None


def test_every_metric_is_named_once_with_a_kind_and_a_unit() -> None:
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    assert all(m.kind in ("gauge", "counter") and m.unit and m.description for m in METRICS)
    assert all(name.startswith("amqplink.") for name in names)


def test_a_broker_is_not_needed_for_the_local_queue_metrics_of_a_directory(tmp_path: Path) -> None:
    from amqplink.servicebus.localqueue.report import directory_state
    from amqplink.servicebus.metrics import Sources

    state = directory_state(str(tmp_path))
    assert readings(Sources(local_queue=lambda: state))["amqplink.local_queue.depth"] == [
        {"value": 0.0, "directory": str(tmp_path)}
    ]
