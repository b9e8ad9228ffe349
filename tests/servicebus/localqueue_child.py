"""A sending or forwarding process with a local queue, for the SIGKILL tests
(``python -m tests.servicebus.localqueue_child send|forward CONN DIR [START COUNT]``).

``send``: sends ``m<START>`` ... one at a time from 8 tasks and prints ``ok <id>`` once each
send returned (stored or accepted). ``forward``: opens the client (its local queue forwards
what it holds), prints ``depth N`` while it does and ``done`` once nothing is left. The local queue is compacted from
4 KiB on, so that kills land in compactions too."""

from __future__ import annotations

import asyncio
import sys

from amqplink.servicebus import LocalQueueOptions, ServiceBusMessage
from amqplink.servicebus.aio import ServiceBusClient
from amqplink.servicebus.localqueue import store

store.COMPACT_MIN_BYTES = 4096


async def main(mode: str, conn_str: str, directory: str, start: int, count: int) -> None:
    local = LocalQueueOptions(directory, forward_batch=16, retry_interval=0.05, max_retry_interval=0.2)
    client = ServiceBusClient.from_connection_string(
        conn_str, local_queue=local, retry_total=0, timeout=5
    )
    async with client:
        if mode == "forward":
            while (state := client.local_queue_state) is not None and state.depth:
                print(f"depth {state.depth}", flush=True)
                await asyncio.sleep(0.01)
            print("done", flush=True)
            return
        ids = iter(range(start, start + count))

        async def worker() -> None:
            sender = client.get_queue_sender("orders")
            for i in ids:
                await sender.send_messages(ServiceBusMessage(f"body-{i}" * 20, message_id=f"m{i}"))
                print(f"ok m{i}", flush=True)

        await asyncio.gather(*(worker() for _ in range(8)))
    print("done", flush=True)


if __name__ == "__main__":
    mode, conn_str, directory, *rest = sys.argv[1:]
    asyncio.run(main(mode, conn_str, directory, *(int(v) for v in rest or (0, 0))))
