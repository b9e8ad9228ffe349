"""Measurement (not a test): what a paired client's senders meet when the primary broker
process is SIGKILLed, with the SDK's default retry policy (3 retries, 0.8 s back-off
doubling, 60 s operation timeout) and ``failover_interval`` as given.

Two ``amqplink broker`` subprocesses (the primary with ``--data-dir`` and a
duplicate-detecting queue, restarted on its port after the outage; the secondary with its
management API). ``--tasks`` senders send single messages one after another.

a. **time to failover**: the primary killed while the secondary is up; seconds from the
   kill to the failover engaged (``paired_state``), and to the first send parked;
b. **double outage**: the secondary killed first, then the primary for ``--outage``
   seconds; the errors the senders saw (by type), then, once the primary is back, every
   message counted on it (lost: accepted but missing). Run without and with a local queue.

    python3 interop/measure_outages.py [--interval 5] [--outage 20] [--tasks 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqplink.servicebus import (  # noqa: E402
    LocalQueueOptions,
    PairedNamespaceOptions,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from amqplink.servicebus.aio import ServiceBusClient  # noqa: E402

CONFIG = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
    {"Name": "orders", "Properties": {"RequiresDuplicateDetection": True}}]}]}}  # fmt: skip


class BrokerProcess:
    def __init__(self, *args: str) -> None:
        cmd = [sys.executable, "-m", "amqplink.cli", "broker", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={"PYTHONPATH": str(ROOT)})  # fmt: skip
        self.lines: list[str] = []

    def ready(self, lines: int) -> list[str]:
        assert self.proc.stdout is not None
        while len(self.lines) < lines:
            self.lines.append(self.proc.stdout.readline().strip())
        return self.lines

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def secondary() -> tuple[BrokerProcess, str, str, str]:
    broker = BrokerProcess("--port", "0", "--http-port", "0")
    lines = broker.ready(3)
    found = re.search(r"https://127\.0\.0\.1:(\d+) \(CA certificate: (.+)\)", lines[2])
    assert found is not None, lines
    return broker, lines[1], f"https://127.0.0.1:{found.group(1)}/", found.group(2)


def primary(data: Path, config: Path, port: int = 0) -> tuple[BrokerProcess, str]:
    broker = BrokerProcess("--port", str(port), "--data-dir", str(data), "--config", str(config))
    return broker, broker.ready(2)[1]


async def senders(client: ServiceBusClient, tasks: int, stop: asyncio.Event, sent: list[str],
                  errors: Counter[str]) -> None:  # fmt: skip
    counter = iter(range(10**9))

    async def task() -> None:
        async with client.get_queue_sender("orders") as sender:
            while not stop.is_set():
                mid = f"m{next(counter)}"
                try:
                    await sender.send_messages(ServiceBusMessage(b"x" * 256, message_id=mid))
                    sent.append(mid)
                except Exception as exc:
                    errors[type(exc).__name__] += 1
                    await asyncio.sleep(0.05)

    await asyncio.gather(*(task() for _ in range(tasks)))


async def time_to_failover(interval: float, tasks: int, work: Path) -> dict[str, Any]:
    config = work / "Config.json"
    config.write_text(json.dumps(CONFIG))
    second, second_conn, management, ca = secondary()
    first, first_conn = primary(work / "a-primary", config)
    try:
        paired = PairedNamespaceOptions(second_conn, failover_interval=interval, management_endpoint=management,
                                        connection_verify=ca)  # fmt: skip
        client = ServiceBusClient.from_connection_string(first_conn, paired_namespace=paired)
        stop, sent, errors = asyncio.Event(), [], Counter[str]()
        async with client:
            running = asyncio.ensure_future(senders(client, tasks, stop, sent, errors))
            await asyncio.sleep(1)
            killed = time.monotonic()
            first.kill()
            engaged = parked = None
            while time.monotonic() - killed < interval + 60 and parked is None:
                state = client.paired_state
                assert state is not None
                if engaged is None and state.failed_over:
                    engaged = time.monotonic() - killed
                if parked is None and state.parked:
                    parked = time.monotonic() - killed
                await asyncio.sleep(0.01)
            stop.set()
            await running
        return {"failover_interval": interval, "engaged_after_kill": engaged, "first_parked_after_kill": parked,
                "errors_before_failover": dict(errors)}  # fmt: skip
    finally:
        first.kill()
        second.kill()


async def double_outage(outage: float, tasks: int, work: Path, local: bool) -> dict[str, Any]:
    config = work / "Config.json"
    config.write_text(json.dumps(CONFIG))
    data = work / ("b-local" if local else "b-plain")
    second, second_conn, management, ca = secondary()
    first, first_conn = primary(data, config)
    port = int(re.search(r":(\d+);", first_conn).group(1))  # type: ignore[union-attr]
    restarted: BrokerProcess | None = None
    try:
        paired = PairedNamespaceOptions(second_conn, failover_interval=5, management_endpoint=management,
                                        connection_verify=ca)  # fmt: skip
        options: dict[str, Any] = {"paired_namespace": paired}
        if local:
            options["local_queue"] = LocalQueueOptions(work / "outbox")
        client = ServiceBusClient.from_connection_string(first_conn, **options)
        stop, sent, errors = asyncio.Event(), [], Counter[str]()
        async with client:
            running = asyncio.ensure_future(senders(client, tasks, stop, sent, errors))
            await asyncio.sleep(1)
            second.kill()
            await asyncio.sleep(2)
            first.kill()
            await asyncio.sleep(outage)
            restarted, _ = primary(data, config, port)
            await asyncio.sleep(15)  # sends go on after the outage
            stop.set()
            await running
            deadline = time.monotonic() + 120
            while (state := client.local_queue_state) is not None and state.depth and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        got: Counter[str] = Counter()
        async with (
            ServiceBusClient.from_connection_string(first_conn) as reader,
            reader.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver,
        ):
            while batch := await receiver.receive_messages(max_message_count=1000, max_wait_time=2):
                got.update(str(m.message_id) for m in batch)
        return {"local_queue": local, "outage_seconds": outage, "sends_accepted": len(sent),
                "errors_seen": dict(errors), "lost": len(set(sent) - set(got)),
                "copies_on_the_primary": sum(got.values()), "twice": sum(1 for n in got.values() if n > 1)}  # fmt: skip
    finally:
        for broker in (first, second, restarted):
            if broker is not None:
                broker.kill()


async def main(interval: float, outage: float, tasks: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        print(json.dumps(await time_to_failover(interval, tasks, work)), flush=True)
        for local in (False, True):
            print(json.dumps(await double_outage(outage, tasks, work, local)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=5.0, help="failover_interval, seconds")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the primary stays down (b)")
    parser.add_argument("--tasks", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.interval, args.outage, args.tasks))
