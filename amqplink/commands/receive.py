"""``amqplink receive``: receive messages, settling them in peek-lock mode (``--show``
prints each one). A receive that ends short of ``--count`` says why (``stopped``)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from amqplink.aio.receiver import ReceiverMode
from amqplink.commands.arguments import add_json, add_target, non_negative, positive, seconds
from amqplink.commands.endpoints import open_client
from amqplink.commands.messages import show_line
from amqplink.commands.progress import Progress
from amqplink.commands.target import Target, parse_target

__all__ = ["EPILOG", "add_arguments", "run", "run_receive"]

EPILOG = """\
examples:
  amqplink receive "$CONN" orders --count 1 --show
  amqplink receive "$CONN" events/Subscriptions/audit --count 10 --show --json
  amqplink receive "$CONN" orders --session-id customer-7 --show
  amqplink receive amqp://127.0.0.1:5672 bench --count 100000 --mode receive-and-delete
($CONN: the connection string `amqplink broker` prints)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``receive``'s arguments."""
    add_target(parser)
    parser.add_argument("--count", type=positive, default=1000, help="messages to receive")
    parser.add_argument(
        "--mode",
        choices=["peek-lock", "receive-and-delete"],
        default="peek-lock",
        help="peek-lock: each message is completed (accepted) once received; receive-and-delete: gone when sent",
    )
    parser.add_argument("--prefetch", type=non_negative, default=1000, help="credit kept granted to the sender")
    parser.add_argument("--timeout", type=seconds, default=10.0, help="give up after this many seconds without one")
    parser.add_argument("--session-id", default=None, help="receive from this session of a session queue")
    parser.add_argument(
        "--show", action="store_true", help="print each message: its body as text (with --json: a JSON object)"
    )
    add_json(parser)


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any]:
    """Run ``receive`` for parsed ``args``."""
    return await run_receive(
        args.target,
        args.address,
        count=args.count,
        mode=args.mode,
        prefetch=args.prefetch,
        idle_timeout=args.timeout,
        session_id=args.session_id,
        show="json" if args.show and args.json else "text" if args.show else None,
        progress=progress,
        summary=summary,
    )


async def run_receive(
    target: str | Target,
    address: str,
    *,
    count: int,
    mode: ReceiverMode = "peek-lock",
    prefetch: int = 1000,
    idle_timeout: float = 10.0,
    session_id: str | None = None,
    show: str | None = None,
    progress: bool | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Receive up to ``count`` messages; stop early after ``idle_timeout`` s without one.
    ``show``: print each message (``"text"``: its body, ``"json"``: its fields).

    ``summary`` (default: a new dict) is filled in as the run goes (``count`` received, and
    in peek-lock mode settled, so far) so a caller that is interrupted can still report it.
    """
    where = target if isinstance(target, Target) else parse_target(target)
    bar = Progress(f"receive {address}", count, enabled=progress and not show)
    result = summary if summary is not None else {}
    result.update(command="receive", address=address, count=0, requested=count, mode=mode, body_bytes=0)
    received = 0
    payload_bytes = 0
    stopped = None
    async with open_client(where) as client:
        receiver = await client.receiver(address, mode=mode, prefetch=prefetch, session_id=session_id)
        started = time.perf_counter()
        while received < count:
            batch = await receiver.receive(min(count - received, max(1, prefetch)), idle_timeout)
            if not batch:
                stopped = f"{address}: no message came for {idle_timeout:g} s (--timeout)"
                break
            await receiver.settle(batch)
            for item in batch:
                message = receiver.message(item)
                body = message.body
                payload_bytes += len(body) if isinstance(body, bytes | bytearray) else 0
                if show is not None:
                    print(show_line(message, as_json=show == "json"), flush=True)
            received += len(batch)
            result.update(count=received, body_bytes=payload_bytes)
            bar.advance(len(batch))
        elapsed = time.perf_counter() - started
        await receiver.close()
    bar.finish()
    result.update(
        seconds=round(elapsed, 3),
        messages_per_second=round(received / elapsed, 1) if elapsed > 0 else None,
        complete=received == count,
    )
    if stopped is not None:
        result["stopped"] = f"received {received} of {count}: {stopped}"
    return result
