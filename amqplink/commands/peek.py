"""``amqplink peek``: browse messages without locking or removing them (Service Bus's
``$management`` peek, so it takes the connection string)."""

from __future__ import annotations

import argparse
from typing import Any

from amqplink.commands.arguments import add_json, add_target, non_negative, positive
from amqplink.commands.endpoints import open_client
from amqplink.commands.messages import show_line
from amqplink.commands.target import parse_target

__all__ = ["EPILOG", "add_arguments", "run"]

EPILOG = """\
examples:
  amqplink peek "$CONN" orders
  amqplink peek "$CONN" orders/$deadletterqueue --count 50 --json
  amqplink peek "$CONN" events/Subscriptions/audit --from-sequence 100
($CONN: the connection string `amqplink broker` prints)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``peek``'s arguments."""
    add_target(parser)
    parser.add_argument("--count", type=positive, default=10, help="messages to show at most")
    parser.add_argument(
        "--from-sequence", type=non_negative, default=0, help="the first sequence number to show (0: the oldest)"
    )
    parser.add_argument("--session-id", default=None, help="peek into this session of a session queue")
    add_json(parser)


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any] | None:
    """Print each peeked message (its body, or with ``--json`` its fields); nothing else."""
    async with open_client(parse_target(args.target)) as client:
        found = await client.peek(
            args.address, args.count, from_sequence=args.from_sequence, session_id=args.session_id
        )
    for message in found:
        print(show_line(message, as_json=args.json), flush=True)
    return None
