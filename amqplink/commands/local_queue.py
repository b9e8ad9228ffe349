"""``amqplink local-queue DIR``: what a client's local queue holds (read only: the client
may be running), or ``--forward CONN`` to send it to a namespace by hand (the client must
be stopped: one writer per directory). A damaged segment is reported with its file and
offset, and the directory is left as it is."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from amqplink.commands.arguments import seconds

__all__ = ["EPILOG", "add_arguments", "run"]

EPILOG = """\
examples:
  amqplink local-queue /var/lib/app/outbox
  amqplink local-queue /var/lib/app/outbox --forward "$CONN"            (the application stopped)
  amqplink local-queue /var/lib/app/outbox --forward "$CONN" --timeout 600
($CONN: the connection string of the namespace to forward to)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``local-queue``'s arguments."""
    parser.add_argument("directory", metavar="DIR", help="the directory of LocalQueueOptions(directory)")
    parser.add_argument(
        "--forward",
        metavar="CONN",
        default=None,
        help="send what it holds to this namespace (connection string), in order, then remove it",
    )
    parser.add_argument("--timeout", type=seconds, default=60.0, help="seconds --forward may take at most")


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any]:
    """Run ``local-queue`` for parsed ``args``."""
    from amqplink.servicebus.localqueue.report import as_json, directory_state, writer

    if not os.path.isdir(args.directory):
        raise ValueError(f"{args.directory!r} is not a directory (LocalQueueOptions.directory of a client)")
    if args.forward is None:
        from amqplink.servicebus.metrics import Sources, readings

        state = directory_state(args.directory)
        shown = {"command": "local-queue", **as_json(state), "writer_pid": writer(state.directory)}
        return {**shown, "metrics": readings(Sources(local_queue=lambda: state))}
    return await forward(args.directory, args.forward, args.timeout, summary)


async def forward(directory: str, conn_str: str, timeout: float, summary: dict[str, Any]) -> dict[str, Any]:
    """Forward what ``directory`` holds through a client of ``conn_str``; the final state,
    ``complete`` false if something was left when ``timeout`` ran out."""
    from amqplink.servicebus import LocalQueueOptions
    from amqplink.servicebus.aio import ServiceBusClient
    from amqplink.servicebus.localqueue.report import as_json

    client = ServiceBusClient.from_connection_string(conn_str, local_queue=LocalQueueOptions(directory))
    started = time.monotonic()
    async with client:
        state = client.local_queue_state
        at_start = 0 if state is None else state.depth
        summary.update(command="local-queue", forwarding=at_start)
        while (state := client.local_queue_state) is not None and state.depth:
            if time.monotonic() - started > timeout:
                break
            summary.update(left=state.depth, forwarded=state.forwarded)
            await asyncio.sleep(0.05)
        assert state is not None
    return {
        "command": "local-queue",
        **as_json(state),
        "at_start": at_start,
        "seconds": round(time.monotonic() - started, 3),
        "complete": state.depth == 0,
    }
