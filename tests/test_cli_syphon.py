"""``amqplink syphon PRIMARY SECONDARY``: a long-lived process that moves parked messages
back, reports per queue (log and ``--status-file``), warns about backlog queues it does
not move (an index beyond ``--backlog-queues``, another name for the primary), and stops
cleanly on SIGTERM with its final status as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from amqplink.broker.config import QueueConfig
from amqplink.servicebus import ServiceBusMessage
from amqplink.servicebus.paired.inventory import classify
from amqplink.servicebus.paired.options import namespace_label
from tests.servicebus.paired_util import namespaces, paired_client, plain_sender, send_until_parked, stored
from tests.servicebus.scenario import wait_until

ROOT = Path(__file__).resolve().parents[1]


def status(path: Path) -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return loaded


async def test_the_syphon_service_moves_reports_warns_and_stops_on_sigterm(tmp_path: Path) -> None:
    async with namespaces() as (primary, secondary):
        label = namespace_label("127.0.0.1", primary.port)
        async with paired_client(primary, secondary) as client:
            fault = primary.faults.entity_unavailable("orders", condition="amqp:internal-error")
            async with client.get_queue_sender("orders") as sender:
                await send_until_parked(sender, ServiceBusMessage("0", message_id="p0"))
                await sender.send_messages([ServiceBusMessage(f"{i}", message_id=f"p{i}") for i in range(1, 30)])
            primary.faults.clear(fault)
        beyond, other = f"{label}/x-servicebus-transfer/7", f"localhost-{primary.port}/x-servicebus-transfer/0"
        for queue, count in ((beyond, 2), (other, 1)):
            secondary.namespace.add_queue(QueueConfig(queue))
            async with plain_sender(secondary, queue) as stray:
                await stray.send_messages([ServiceBusMessage("stranded") for _ in range(count)])
        status_file = tmp_path / "status.json"
        cmd = [
            sys.executable, "-m", "amqplink", "-v", "syphon", primary.connection_string, secondary.connection_string,
            "--backlog-queues", "3", "--management-endpoint", f"https://127.0.0.1:{secondary.http_port}/",
            "--ca", str(secondary.http_ca), "--wait", "1", "--report-every", "0.3", "--status-file", str(status_file),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            await wait_until(lambda: stored(primary, "orders") == 30, timeout=30)
            await wait_until(lambda: status(status_file).get("moved") == 30, timeout=10)
            await wait_until(lambda: len(status(status_file)["stranded"]) == 2, timeout=10)
            shown = status(status_file)
            assert shown["running"] is True and sum(q["moved"] for q in shown["queues"].values()) == 30
            metrics = shown["metrics"]  # the same readings an OpenTelemetry reader collects
            assert sum(p["value"] for p in metrics["amqplink.paired.syphon.moved"]) == 30
            assert {p["queue"] for p in metrics["amqplink.paired.backlog.depth"]} == set(shown["queues"])
            whys = {s["queue"].lower(): s["why"] for s in shown["stranded"]}
            assert "beyond backlog_queue_count=3" in whys[beyond.lower()]
            assert "the same host by another name" in whys[other.lower()]
            proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.to_thread(proc.communicate, timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, err
        final = json.loads(out.splitlines()[-1])
        assert final["command"] == "syphon" and final["moved"] == 30 and final["running"] is False
        assert err.count("does not move") == 2 and "stopped; 30 message(s) moved" in err
        assert secondary.connection_string.split("SharedAccessKey=")[1].split(";")[0] not in out + err
        assert stored(primary, "orders") == 30  # nothing twice


def test_stranded_queues_are_told_apart() -> None:
    names = ["127-0-0-1-5672/x-servicebus-transfer/0", "127-0-0-1-5672/x-servicebus-transfer/1"]
    found = classify(
        {
            "127-0-0-1-5672/x-servicebus-transfer/0": 4,
            "127-0-0-1-5672/X-ServiceBus-Transfer/9": 1,  # beyond the count (names compare without case)
            "localhost-5672/x-servicebus-transfer/0": 2,  # the same broker by another name
            "contoso/x-servicebus-transfer/0": 3,  # another primary
            "contoso/x-servicebus-transfer/1": 0,  # empty: nothing stranded
            "orders": 10,  # not a backlog queue
        },
        names,
        "127-0-0-1-5672",
    )
    assert found.depths == {names[0]: 4, names[1]: None}
    why = {s.queue: s.why for s in found.stranded}
    assert set(why) == {"127-0-0-1-5672/X-ServiceBus-Transfer/9", "localhost-5672/x-servicebus-transfer/0",
                        "contoso/x-servicebus-transfer/0"}  # fmt: skip
    assert "beyond" in why["127-0-0-1-5672/X-ServiceBus-Transfer/9"]
    assert "another name" in why["localhost-5672/x-servicebus-transfer/0"]
    assert "another name" not in why["contoso/x-servicebus-transfer/0"]
