"""Benchmark (not a test): AMQP over WebSockets, amqplink's client against the official SDK's.

One run, one embedded broker (``amqplink broker --http-port 0`` in a subprocess), each
scenario on a fresh queue, both clients with ``transport_type=AmqpOverWebsocket`` over TLS
to the broker's HTTPS port (the SDK with ``custom_endpoint_address``, as it drops the port
of a TLS endpoint), and amqplink over TCP as well for reference:

a. sends: ``send_messages`` of lists of 100 messages, one list after another;
b. receive + complete: peek-lock, ``prefetch_count=1000``, ``receive_messages(100)``, then
   ``asyncio.gather`` of the completes (the queue is filled first, untimed).

Prints msg/s per client and the ratio amqplink / SDK.

    python3 interop/bench_websocket.py [--count 20000] [--size 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from interop.bench_sbclient import Client, own, sdk  # noqa: E402

BATCH, PREFETCH = 100, 1000


@contextlib.contextmanager
def broker_process() -> Iterator[tuple[str, int, str]]:
    """(connection string, HTTPS port, CA file) of ``amqplink broker --http-port 0``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    main = "import sys; from amqplink.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", main, "broker", "--port", "0", "--http-port", "0"]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert process.stdout is not None
        conn_str = management = None
        while management is None:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("the broker exited before printing its management port")
            if line.startswith("Endpoint=sb://"):
                conn_str = line.strip()
            management = re.search(r"https://[^:]+:(\d+) \(CA certificate: (.+)\)", line)
        assert conn_str is not None
        yield conn_str, int(management.group(1)), management.group(2)
    finally:
        process.kill()
        process.wait(10)


def options(client: Client, conn_str: str, http_port: int, ca: str, websocket: bool) -> dict[str, Any]:
    """``from_connection_string`` arguments for ``client`` over WebSockets (or TCP): a TLS
    connection string (no emulator flag); the SDK drops its port, so it gets the port as
    ``custom_endpoint_address``."""
    if not websocket:
        return {"conn_str": conn_str}
    keys = conn_str.split(";", 1)[1].replace(";UseDevelopmentEmulator=true", "")
    if client.name == "amqplink":
        from amqplink.servicebus import TransportType

        return {
            "conn_str": f"Endpoint=sb://localhost:{http_port};{keys}",
            "transport_type": TransportType.AmqpOverWebsocket,
            "connection_verify": ca,
        }
    from azure.servicebus import TransportType as SdkTransportType

    return {
        "conn_str": f"Endpoint=sb://localhost;{keys}",
        "transport_type": SdkTransportType.AmqpOverWebsocket,
        "custom_endpoint_address": f"sb://localhost:{http_port}",
        "connection_verify": ca,
    }


async def sends(client: Client, kw: dict[str, Any], queue: str, count: int, body: bytes) -> float:
    async with client.aio.ServiceBusClient.from_connection_string(**kw) as sb, sb.get_queue_sender(queue) as sender:
        await sender.send_messages(client.message(body))  # attached before the clock starts
        started = time.perf_counter()
        for _ in range(count // BATCH):
            await sender.send_messages([client.message(body) for _ in range(BATCH)])
        return time.perf_counter() - started


async def receives(client: Client, kw: dict[str, Any], queue: str, count: int, body: bytes) -> float:
    async with client.aio.ServiceBusClient.from_connection_string(**kw) as sb:
        async with sb.get_queue_sender(queue) as sender:
            for _ in range(count // BATCH):
                await sender.send_messages([client.message(body) for _ in range(BATCH)])
        async with sb.get_queue_receiver(queue, prefetch_count=PREFETCH) as receiver:
            started = time.perf_counter()
            got = 0
            while got < count // BATCH * BATCH:
                batch = await receiver.receive_messages(max_message_count=BATCH, max_wait_time=5)
                if not batch:
                    raise RuntimeError(f"{client.name}: only {got} messages came back")
                await asyncio.gather(*(receiver.complete_message(m) for m in batch))
                got += len(batch)
            return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args(argv)
    body = b"x" * args.size
    count = args.count // BATCH * BATCH
    runs = [("azure-servicebus (WebSocket)", sdk(), True), ("amqplink (WebSocket)", own(), True)]
    runs.append(("amqplink (TCP)", own(), False))
    rates: dict[tuple[str, str], float] = {}
    with broker_process() as (conn_str, http_port, ca):
        for scenario_name, scenario in (("a. sends", sends), ("b. receive + complete", receives)):
            for name, client, websocket in runs:
                kw = options(client, conn_str, http_port, ca, websocket)
                seconds = asyncio.run(scenario(client, kw, f"ws-{uuid.uuid4().hex[:8]}", count, body))
                rates[scenario_name, name] = count / seconds
    print(f"{count:,} messages of {args.size} B; msg/s")
    print("| scenario | azure-servicebus (WebSocket) | amqplink (WebSocket) | amqplink (TCP) | ratio (WebSocket) |")
    print("|---|---|---|---|---|")
    for scenario_name in ("a. sends", "b. receive + complete"):
        theirs, ours = rates[scenario_name, runs[0][0]], rates[scenario_name, runs[1][0]]
        tcp = rates[scenario_name, runs[2][0]]
        print(f"| {scenario_name} | {theirs:,.0f} | {ours:,.0f} | {tcp:,.0f} | {ours / theirs:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
