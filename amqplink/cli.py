"""The ``amqplink`` command: ``demo`` (the main job: Spark -> Service Bus through an outage),
``roundtrip``, ``send``, ``receive``, ``peek``, ``list``, ``broker``, ``broker-store``,
``broker-fault``. This module wires them; each command's work (and, for the client
commands, its arguments) is in ``amqplink/commands/<command>.py``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import Any

from amqplink import __version__
from amqplink.commands.arguments import HelpFormatter, Parser, non_negative, port, positive, seconds

# The value types and help formatting every sub-command shares (kept under these names).
_positive, _non_negative, _port, _seconds = positive, non_negative, port, seconds
_Parser, _HelpFormatter = Parser, HelpFormatter

_MODULES = {
    "send": "amqplink.commands.send",
    "receive": "amqplink.commands.receive",
    "peek": "amqplink.commands.peek",
    "list": "amqplink.commands.listing",
    "local-queue": "amqplink.commands.local_queue",
    "syphon": "amqplink.commands.syphon",
    "spark-package": "amqplink.commands.spark_package",
}
"""Sub-commands whose arguments (``add_arguments``), examples (``EPILOG``) and run (``run``)
live in their own module."""
_HELP = {
    "send": "send messages (a body, properties, a session) and stop at the first the broker refuses",
    "receive": "receive messages (--show prints them) and settle them",
    "peek": "show messages without locking or removing them (a connection string's $management)",
    "list": "list queues, topics and subscriptions with their message counts (the management API)",
    "local-queue": "show what a client's local queue (LocalQueueOptions) holds, or --forward it by hand",
    "syphon": "move the messages parked in a secondary namespace's backlog queues back to the primary (a service)",
    "spark-package": "write the zip to ship amqplink to a Spark cluster (spark-submit --py-files)",
}

EPILOG = """\
examples:
  amqplink broker --port 0                    (prints a connection string: $CONN below)
  amqplink send "$CONN" orders --body hello
  amqplink receive "$CONN" orders --count 1 --show
  amqplink <command> --help                   (each command's options and examples)"""

_EXAMPLES = {
    "demo": "examples:\n  amqplink demo\n  amqplink demo --rows 20000 --json\n"
    "  amqplink demo --no-outage --input rows.parquet",
    "roundtrip": "examples:\n  amqplink roundtrip\n  amqplink roundtrip --count 100000 --size 64 --json",
}
"""Examples of the commands defined inline below that give no epilog of their own."""

BROKER_EPILOG = """\
examples:
  amqplink broker                             (loopback, port 5672, the emulator's key)
  amqplink broker --port 0 --data-dir ./data  (any free port; messages kept across restarts)
  amqplink broker --config Config.json --strict-entities
  amqplink broker --require-auth --key sender=s3cret:Send --http-port 5443"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``amqplink`` command and its sub-commands."""
    parser = _Parser(
        prog="amqplink",
        description="AMQP 1.0 toolkit: sans-IO engine, asyncio client, embedded broker.",
        formatter_class=_HelpFormatter,
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"amqplink {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log on stderr: -v connections, links, tokens and what the broker does (INFO); -vv DEBUG",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help: str, epilog: str | None = None) -> argparse.ArgumentParser:
        epilog = epilog or _EXAMPLES.get(name)
        p = sub.add_parser(name, help=help, description=help, epilog=epilog, formatter_class=_HelpFormatter)
        # -v after the command too (amqplink send ... -v); SUPPRESS keeps one given before it
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help="as amqplink -v")
        return p

    def json_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print only the final JSON line (no progress bar)")

    demo = command(
        "demo",
        "main job: a local Spark job writes rows through the PySpark sink to an embedded namespace with paired "
        "failover, the primary goes down midway and comes back, then every row is checked (needs the spark extra)",
    )
    demo.add_argument("--rows", type=_positive, default=200_000, help="rows to write")
    demo.add_argument("--size", type=_non_negative, default=1024, help="body bytes per row (at least 24)")
    demo.add_argument("--input", default=None, help="write this CSV (with header) or Parquet file instead")
    demo.add_argument("--outage-seconds", type=_seconds, default=6.0, help="how long the primary stays down")
    demo.add_argument("--no-outage", action="store_true", help="keep the primary up")
    demo.add_argument(
        "--connection-string", default=None, help="a real primary namespace instead of the embedded ones (no outage)"
    )
    demo.add_argument("--paired-connection-string", default=None, help="a real secondary namespace for failover")
    demo.add_argument("--entity", default="demo", help="queue to write to (must exist in a real namespace)")
    demo.add_argument("--streaming", action="store_true", help="Structured Streaming from the rate source instead")
    demo.add_argument("--duration", type=_seconds, default=20.0, help="seconds the --streaming query runs")
    json_flag(demo)

    roundtrip = command("roundtrip", "round-trip messages through the embedded broker (or --url), no Spark")
    roundtrip.add_argument("--url", default=None, help="broker URL (default: start the embedded broker in-process)")
    roundtrip.add_argument("--address", default="roundtrip", help="queue to use")
    roundtrip.add_argument("--count", type=_positive, default=10_000, help="messages to round-trip")
    roundtrip.add_argument("--size", type=_non_negative, default=1024, help="body bytes per message")
    json_flag(roundtrip)

    for name, module_name in _MODULES.items():
        module = import_module(module_name)
        module.add_arguments(command(name, _HELP[name], module.EPILOG))

    broker = command("broker", "run the embedded broker (a local Service Bus namespace)", BROKER_EPILOG)
    broker.add_argument("--host", default="127.0.0.1", help="address to listen on")
    broker.add_argument("--port", type=_port, default=5672, help="TCP port (0: any free port)")
    broker.add_argument(
        "--config", default=None, metavar="FILE", help="the Service Bus emulator's Config.json (default: no entities)"
    )
    broker.add_argument(
        "--require-auth",
        action="store_true",
        help="strict: every link needs a SAS token; without --key a random key is made and printed once"
        " (in the connection string): the emulator's public key would guard nothing, and refusing to start"
        " would push a key onto the command line",
    )
    broker.add_argument(
        "--key-name", default=None, metavar="NAME", help="name of a plain --key (default RootManageSharedAccessKey)"
    )
    broker.add_argument(
        "--key",
        action="append",
        default=None,
        metavar="KEY|NAME=KEY:RIGHTS",
        help="a plain SAS key (Manage; default: the emulator's public key on loopback without --require-auth,"
        " else random), or an authorization rule NAME=KEY:RIGHTS with RIGHTS from Listen,Send,Manage"
        " (e.g. sender=s3cret:Send); repeat for more rules",
    )
    broker.add_argument(
        "--host-name",
        action="append",
        default=None,
        metavar="NAME[:PORT]",
        help="a host name (or host:port) clients' token audiences may name besides the listen address;"
        " e.g. localhost:5673 for a port a container publishes",
    )
    broker.add_argument(
        "--strict-entities",
        action="store_true",
        help="refuse links to queues that are not defined (amqp:not-found) instead of making them on first use",
    )
    broker.add_argument("--plain", action="store_true", help="plain AMQP queues instead of a Service Bus namespace")
    broker.add_argument(
        "--data-dir", default=None, metavar="DIR", help="keep messages in this directory (default: in memory)"
    )
    broker.add_argument(
        "--http-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve the management REST API (HTTPS) on this port (0: any)",
    )
    broker.add_argument(
        "--http-cert", default=None, metavar="FILE", help="PEM certificate for --http-port (default: self-signed)"
    )
    broker.add_argument("--http-key", default=None, metavar="FILE", help="PEM private key of --http-cert")

    store = command(
        "broker-store",
        "show what a broker's --data-dir holds (read only; the broker may run)",
        "examples:\n  amqplink broker-store ./data\n  amqplink broker-store ./data --salvage   (broker stopped)",
    )
    store.add_argument("directory", help="the broker's --data-dir")
    store.add_argument(
        "--salvage",
        action="store_true",
        help="repair a damaged store (no broker running): keep a copy, read back every valid batch, say what is lost",
    )

    from amqplink.broker.faults import FaultKind
    from amqplink.commands.broker_fault import OPERATIONS

    fault = command(
        "broker-fault",
        "inject (or clear) a fault in a running broker through its $control node",
        'examples:\n  amqplink broker-fault "$CONN" list\n'
        '  amqplink broker-fault "$CONN" server-busy --entity orders --duration 30\n'
        '  amqplink broker-fault "$CONN" clear --id 1',
    )
    fault.add_argument("target", help="the broker's connection string, or amqp://host:port (with --key)")
    faults = [*(k.value for k in FaultKind), *OPERATIONS]
    fault.add_argument("fault", choices=faults, metavar="FAULT", help=f"one of: {', '.join(faults)}")
    fault.add_argument("--entity", default=None, help="queue, topic or subscription path the fault applies to")
    fault.add_argument("--condition", default=None, help="a refused send's condition: server-busy or internal-error")
    fault.add_argument("--fragment", type=_non_negative, default=None, help="fragment of a partitioned entity")
    fault.add_argument("--after-bytes", type=_non_negative, default=None, help="drop after this many more bytes")
    fault.add_argument("--after-frames", type=_non_negative, default=None, help="drop after this many more frames")
    fault.add_argument("--delay-ms", type=_positive, default=None, help="how long dispositions are held")
    fault.add_argument("--duration", type=_seconds, default=None, help="seconds until the fault ends by itself")
    fault.add_argument("--id", type=_positive, default=None, help="the fault to clear")
    fault.add_argument("--key-name", default=None, help="SAS key name (default: the connection string's)")
    fault.add_argument("--key", default=None, help="SAS key (default: the connection string's, or the emulator's)")
    return parser


async def _dispatch(args: argparse.Namespace, summary: dict[str, Any]) -> dict[str, Any] | None:
    """Run the sub-command; ``summary`` holds its counts so far while it runs."""
    progress = False if getattr(args, "json", False) else None
    if args.command == "demo":
        from amqplink.commands.demo import DemoOptions, run_demo

        options = DemoOptions(
            rows=args.rows,
            size=args.size,
            input=args.input,
            outage_seconds=None if args.no_outage or args.connection_string else args.outage_seconds,
            connection_string=args.connection_string,
            paired_connection_string=args.paired_connection_string,
            entity=args.entity,
            streaming=args.streaming,
            duration=args.duration,
        )
        return await run_demo(options, progress=progress, summary=summary)
    if args.command == "roundtrip":
        from amqplink.commands.roundtrip import run_roundtrip

        return await run_roundtrip(
            args.url, args.address, count=args.count, size=args.size, progress=progress, summary=summary
        )
    module_name = _MODULES.get(args.command)
    if module_name is not None:
        result: dict[str, Any] | None = await import_module(module_name).run(args, summary, progress)
        return result
    if args.command == "broker-fault":
        from amqplink.commands.broker_fault import run_broker_fault

        names = ("entity", "condition", "fragment", "after_bytes", "after_frames", "delay_ms", "duration", "id")
        params = {name.replace("_", "-"): getattr(args, name) for name in names}
        return await run_broker_fault(args.target, args.fault, params=params, key_name=args.key_name, key=args.key)
    if args.command == "broker-store":
        from amqplink.commands.broker_store import run_broker_store

        return run_broker_store(args.directory, salvage=args.salvage)
    if args.command == "broker":
        from amqplink.commands.broker import run_broker

        await run_broker(
            args.host,
            args.port,
            config=args.config,
            plain=args.plain,
            require_auth=True if args.require_auth else None,
            key_name=args.key_name,
            keys=args.key or [],
            host_names=args.host_name or [],
            strict_entities=args.strict_entities,
            data_dir=args.data_dir,
            http_port=args.http_port,
            http_cert=None if args.http_cert is None else (args.http_cert, args.http_key or args.http_cert),
        )
    return None


def _failure(exc: BaseException) -> int | None:
    """The exit status for an error a user can act on (its message is shown), else None."""
    from amqplink import MissingExtraError

    too_large = getattr(sys.modules.get("amqplink.engine.errors"), "MessageSizeExceededError", None)
    if isinstance(too_large, type) and isinstance(exc, too_large):  # refused, as by the broker (either client)
        return 1
    if isinstance(exc, ValueError | OSError | TimeoutError | MissingExtraError):
        return 2
    from amqplink.aio.errors import AMQPError

    if isinstance(exc, AMQPError):
        return 1
    # Errors of modules a command may have loaded (looked up only if loaded).
    for module, name, status in (
        ("amqplink.servicebus.exceptions", "ServiceBusError", 1),
        ("amqplink.servicebus.management._errors", "HttpResponseError", 1),
        ("amqplink.servicebus.management._errors", "ServiceRequestError", 1),
        ("amqplink.spark.session", "ExecutorImportError", 2),  # Spark's workers cannot import amqplink
        ("amqplink.spark.session", "JavaStartError", 2),  # no java (or too old) for Spark
    ):
        kind = getattr(sys.modules.get(module), name, None)
        if isinstance(kind, type) and isinstance(exc, kind):
            return status
    return None


def _configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    shape = "%(levelname)s %(name)s: %(message)s" if verbose else "%(levelname)s %(message)s"
    logging.basicConfig(level=level, format=shape)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``amqplink`` console script."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while loading a command or starting it: no traceback
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # No command is a usage error, as for any other missing argument.
        parser.print_help(sys.stderr)
        return 2
    _configure_logging(args.verbose)
    summary: dict[str, Any] = {}
    try:
        result = asyncio.run(_dispatch(args, summary))
    except KeyboardInterrupt:
        # Ctrl-C: what was done so far, then the shell's convention for SIGINT (128 + 2).
        if summary:
            print(json.dumps({**summary, "interrupted": True}), flush=True)
        print(f"amqplink {args.command}: interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:
        code = _failure(exc)
        if code is None:
            raise
        if summary:  # a command that had started: what it did, and why it stopped
            print(json.dumps({**summary, "stopped": str(exc)}), flush=True)
        print(f"amqplink {args.command}: {exc}", file=sys.stderr)
        return code
    if result is None:
        return 0
    if args.command == "demo" and not args.json:
        from amqplink.commands.demo import format_table

        print(format_table(result), flush=True)
    else:
        print(json.dumps(result), flush=True)
    if "stopped" in result:
        print(f"amqplink {args.command}: {result['stopped']}", file=sys.stderr)
    return 0 if result.get("ok", result.get("complete", True)) else 1


if __name__ == "__main__":
    sys.exit(main())
