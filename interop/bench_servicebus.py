"""Benchmark (not a test): the official azure-servicebus SDK against the embedded Service
Bus namespace, and the same scenario with amqplink's own asyncio client.

Scenarios, each on a fresh queue of the one broker:

* send: the SDK sends batches (``create_message_batch``, as many messages as fit);
  amqplink sends pipelined unsettled messages, every one waiting for its ``accepted``;
* receive + complete: peek-lock with prefetch, each message completed (accepted).

Prints msg/s per client and the ratio a user would gain with amqplink.

    python3 interop/bench_servicebus.py [--count 20000] [--size 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interop.bench_client import amqplink_receive, amqplink_send


def start_broker() -> tuple[Any, asyncio.AbstractEventLoop, threading.Thread]:
    from amqplink.broker import Broker

    loop = asyncio.new_event_loop()
    broker = Broker(servicebus=True)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    return broker, loop, thread


def sdk_send(conn_str: str, queue: str, count: int, size: int) -> float:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    body = bytes(size)
    with ServiceBusClient.from_connection_string(conn_str) as client, client.get_queue_sender(queue) as sender:
        start = time.perf_counter()
        left = count
        while left:
            batch = sender.create_message_batch()
            while left:
                try:
                    batch.add_message(ServiceBusMessage(body))
                except ValueError:  # the batch is full
                    break
                left -= 1
            sender.send_messages(batch)
        return count / (time.perf_counter() - start)


def sdk_receive(conn_str: str, queue: str, count: int) -> float:
    from azure.servicebus import ServiceBusClient

    client = ServiceBusClient.from_connection_string(conn_str)
    with client, client.get_queue_receiver(queue, prefetch_count=1000) as receiver:
        got = 0
        start = time.perf_counter()
        while got < count:
            messages = receiver.receive_messages(max_message_count=1000, max_wait_time=5)
            if not messages:
                raise RuntimeError(f"the SDK received {got} of {count} messages")
            for message in messages:
                receiver.complete_message(message)
            got += len(messages)
        return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    broker, loop, thread = start_broker()
    try:
        conn_str, url = broker.connection_string, broker.url
        q1, q2 = f"sdk-{uuid.uuid4().hex[:8]}", f"amqplink-{uuid.uuid4().hex[:8]}"
        sdk = (sdk_send(conn_str, q1, args.count, args.size), sdk_receive(conn_str, q1, args.count))
        own = (
            amqplink_send(url, q2, args.count, args.size, settled=False),
            amqplink_receive(url, q2, args.count, args.size),
        )
        rows = [("send (SDK: batches)", sdk[0], own[0]), ("receive + complete", sdk[1], own[1])]
        print(f"{args.count} messages of {args.size} B, embedded Service Bus namespace")
        print(f"{'scenario':<22}{'azure-servicebus':>18}{'amqplink':>12}{'ratio':>8}")
        for name, theirs, ours in rows:
            print(f"{name:<22}{theirs:>15,.0f}/s{ours:>9,.0f}/s{ours / theirs:>7.1f}x")
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


if __name__ == "__main__":
    main()
