"""Silent sockets beyond the broker's file descriptors do not stop it serving (item 19).

The broker runs in a child process whose ``ulimit -n`` is 256; this test holds 300
silent sockets to it, then a real client must still get its message through.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from amqplink.aio import connect
from amqplink.protocol.definitions import Accepted

from .wire import RawClient

ROOT = Path(__file__).resolve().parents[2]
SERVE = """
import asyncio, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from amqplink.broker import Broker

async def main():
    async with Broker(handshake_timeout=1.0) as broker:
        print(broker.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


async def test_a_client_is_served_while_silent_sockets_outnumber_the_broker_s_descriptors() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    silent: list[RawClient] = []
    try:
        assert child.stdout is not None
        port = int(await asyncio.get_running_loop().run_in_executor(None, child.stdout.readline))
        for _ in range(300):
            silent.append(await RawClient.connect(port))

        async def send_once() -> object:
            async with await connect(f"amqp://127.0.0.1:{port}", timeout=3) as conn:
                return await (await conn.create_sender("q")).send(b"through", timeout=3)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:  # refused cleanly while every slot is held, served once one frees
            try:
                assert isinstance(await send_once(), Accepted)
                break
            except Exception:
                if loop.time() > deadline:
                    raise
    finally:
        for client in silent:
            client.close()
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
