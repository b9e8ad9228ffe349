"""The primary broker SIGKILLed mid-stream (``amqplink broker --data-dir`` in a
subprocess) and restarted on the same port from the same directory: every send
succeeded (on the primary or parked) or raised; after recovery every accepted message is
on the primary exactly once, with its properties restored."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from amqplink.broker import Broker
from amqplink.servicebus.aio import ServiceBusClient
from tests.servicebus.paired_util import FAST, drain, options
from tests.servicebus.test_paired_failover import check_restored, settle, stream

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [{"Name": "orders", "Properties": {"RequiresDuplicateDetection": True}}],
            }
        ]
    }
}


class PrimaryProcess:
    """``amqplink broker --config C --data-dir D --port P`` in a subprocess."""

    def __init__(self, config: Path, data_dir: Path, port: int = 0) -> None:
        cmd = [sys.executable, "-m", "amqplink.cli", "broker", "--config", str(config), "--data-dir", str(data_dir)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [*cmd, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )

    async def connection_string(self) -> str:
        assert self.proc.stdout is not None
        for _ in range(10):
            line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), 30)
            if line.startswith("Endpoint=sb://"):
                return line.strip()
        raise AssertionError("the broker did not print its connection string")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.mark.slow
async def test_the_primary_broker_sigkilled_and_restarted_from_its_data_dir(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(CONFIG))
    data = tmp_path / "data"
    first = PrimaryProcess(config, data)
    processes = [first]
    try:
        conn_str = await first.connection_string()
        found = re.search(r":(\d+);", conn_str)
        assert found is not None
        port = int(found.group(1))
        restarted: list[str] = []
        async with Broker(servicebus=True, http_port=0) as secondary:
            client = ServiceBusClient.from_connection_string(
                conn_str, paired_namespace=options(secondary, enable_syphon=True), **FAST
            )
            async with client:
                senders = [client.get_queue_sender("orders") for _ in range(4)]
                phase = "up"

                async def kill_and_restart(i: int) -> None:
                    nonlocal phase
                    state = client.paired_state
                    assert state is not None
                    if i == 800:
                        first.kill()  # no goodbye: the socket just dies
                        phase = "down"
                    elif phase == "down" and state.parked >= 300:
                        phase = "restarting"
                        again = PrimaryProcess(config, data, port)
                        processes.append(again)
                        restarted.append(await again.connection_string())

                accepted, raised = await stream(senders, 3000, kill_and_restart)
                assert restarted, "the stream ended before enough was parked"
                await settle(client, secondary)
                state = client.paired_state
                assert state is not None and state.failovers >= 1 and state.failbacks == state.failovers
            got = await drain(restarted[0], "orders", len(accepted))
            check_restored(got, accepted, raised, exact=False)
    finally:
        for process in processes:
            process.kill()
