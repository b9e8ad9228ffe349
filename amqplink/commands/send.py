"""``amqplink send``: send messages (pipelined, up to ``--in-flight`` awaiting an outcome).

The body is ``--body TEXT``, ``--body-file PATH`` (``-``: standard input) or ``--size`` zero bytes; ``--property``
and ``--session-id`` go on every message. The first message the broker does not accept
stops the send: nothing more is handed over, the ones in flight get their outcomes, and the
summary says how many were accepted and why the first was refused (the exit status is 1).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections import Counter
from typing import Any

from amqplink.commands.arguments import add_json, add_target, non_negative, positive
from amqplink.commands.endpoints import open_client
from amqplink.commands.messages import Outgoing, parse_properties, read_body_file
from amqplink.commands.progress import Progress
from amqplink.commands.target import Target, parse_target

__all__ = ["EPILOG", "add_arguments", "run", "run_send"]

DEFAULT_COUNT = 1000
"""Messages sent when neither ``--count`` nor a body is given (a throughput run)."""

EPILOG = """\
examples:
  amqplink send "$CONN" orders --body '{"id": 1}' --property kind=order --property priority:=5
  amqplink send "$CONN" orders --body-file order.json --session-id customer-7
  echo '{"id": 2}' | amqplink send "$CONN" orders --body-file -
  amqplink send amqp://127.0.0.1:5672 bench --count 100000 --size 1024
($CONN: the connection string `amqplink broker` prints)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``send``'s arguments."""
    add_target(parser)
    body = parser.add_mutually_exclusive_group()
    body.add_argument("--body", default=None, help="the body of each message (UTF-8 text)")
    body.add_argument(
        "--body-file", default=None, metavar="PATH", help="the body of each message: this file's bytes (-: stdin)"
    )
    parser.add_argument(
        "--count", type=positive, default=None, help=f"messages to send (default: 1 with a body, else {DEFAULT_COUNT})"
    )
    parser.add_argument("--size", type=non_negative, default=1024, help="body bytes per message without a body")
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="K=V",
        help="an application property on each message, repeatable: NAME=TEXT, or NAME:=JSON for a number,"
        " true, false or null (e.g. priority:=5)",
    )
    parser.add_argument("--session-id", default=None, help="the session of each message (for a session queue)")
    parser.add_argument("--settled", action="store_true", help="send pre-settled, no outcomes (amqp:// URLs only)")
    parser.add_argument("--in-flight", type=positive, default=1000, help="messages awaiting an outcome at most")
    add_json(parser)


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any]:
    """Run ``send`` for parsed ``args``."""
    if args.body_file is not None:
        body = read_body_file(args.body_file)
    elif args.body is not None:
        body = args.body.encode("utf-8")
    else:
        body = bytes(args.size)
    given = args.body is not None or args.body_file is not None
    count = args.count if args.count is not None else (1 if given else DEFAULT_COUNT)
    outgoing = Outgoing(body, parse_properties(args.property), args.session_id)
    return await run_send(
        args.target,
        args.address,
        count=count,
        outgoing=outgoing,
        settled=args.settled,
        in_flight=args.in_flight,
        progress=progress,
        summary=summary,
    )


async def run_send(
    target: str | Target,
    address: str,
    *,
    count: int,
    size: int = 0,
    outgoing: Outgoing | None = None,
    settled: bool = False,
    in_flight: int = 1000,
    progress: bool | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send ``count`` messages (``outgoing``, default ``size`` zero bytes each) to ``address``;
    return counts, seconds and msg/s, and ``stopped`` (the first refusal) if one came.

    ``summary`` (default: a new dict) is filled in as the run goes (``sent`` and ``outcomes``
    so far) so a caller that is interrupted can still report it.
    """
    where = target if isinstance(target, Target) else parse_target(target)
    outgoing = outgoing or Outgoing(bytes(size), {})
    outcomes: Counter[str] = Counter()
    refusals: list[tuple[int, str]] = []  # (message index, reason): the first is reported
    result = summary if summary is not None else {}
    result.update(
        command="send",
        address=address,
        count=count,
        size=len(outgoing.body),
        mode="settled" if settled else "unsettled",
        sent=0,
        outcomes=outcomes,
    )
    bar = Progress(f"send {address}", count, enabled=progress)

    def record(index: int, outcome: asyncio.Future[str | None]) -> None:
        reason = outcome.result()
        if reason is None:
            outcomes["settled" if settled else "accepted"] += 1
        else:
            outcomes["refused"] += 1
            refusals.append((index, reason))
        bar.advance()

    pending: set[asyncio.Future[str | None]] = set()  # at most in_flight: each leaves once settled
    async with open_client(where) as client:
        sender = await client.sender(address, settled=settled, in_flight=in_flight)
        started = time.perf_counter()
        for i in range(count):
            if refusals:
                break
            future = await sender.send(outgoing.message(i))
            result["sent"] = i + 1
            pending.add(future)
            future.add_done_callback(functools.partial(record, i))
            future.add_done_callback(pending.discard)
            if future.done():  # refused before it was sent (too large): its callbacks run now, and stop the loop
                await asyncio.sleep(0)
        if pending:
            await asyncio.wait(pending)  # every outcome before the link closes
        seconds = time.perf_counter() - started
        await sender.close()
    bar.finish()
    taken = outcomes["accepted"] + outcomes["settled"]
    result.update(
        outcomes=dict(outcomes),
        seconds=round(seconds, 3),
        messages_per_second=round(taken / seconds, 1) if seconds > 0 else None,
        ok=not refusals and taken == count,
    )
    if refusals:
        index, reason = min(refusals)
        result["stopped"] = f"{address}: message {index} (counting from 0) was not accepted: {reason}"
    return result
