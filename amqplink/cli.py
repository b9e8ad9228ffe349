"""The ``amqplink`` command: ``demo`` (the main job: Spark -> Service Bus through an outage),
``roundtrip``, ``send``, ``receive``, ``broker``, ``broker-store``, ``broker-fault``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from amqplink import __version__


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0..65535 (0: any free port), not {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit 2), naming the sub-command."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default in ``--help``."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``amqplink`` command and its sub-commands."""
    parser = _Parser(
        prog="amqplink",
        description="AMQP 1.0 toolkit: sans-IO engine, asyncio client, embedded broker.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"amqplink {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=_HelpFormatter)

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

    send = command("send", "send N messages and report throughput")
    send.add_argument("url", help="amqp://[user:pass@]host[:port] or amqps://...")
    send.add_argument("address", help="target address (queue name)")
    send.add_argument("--count", type=_positive, default=1000, help="messages to send")
    send.add_argument("--size", type=_non_negative, default=1024, help="body bytes per message")
    send.add_argument("--settled", action="store_true", help="send pre-settled (no outcomes)")
    send.add_argument("--in-flight", type=_positive, default=1000, help="max unsettled messages")
    json_flag(send)

    receive = command("receive", "receive N messages and report throughput")
    receive.add_argument("url", help="amqp://[user:pass@]host[:port] or amqps://...")
    receive.add_argument("address", help="source address (queue name)")
    receive.add_argument("--count", type=_positive, default=1000, help="messages to receive")
    receive.add_argument(
        "--mode", choices=["peek-lock", "receive-and-delete"], default="peek-lock", help="settlement mode"
    )
    receive.add_argument("--prefetch", type=_non_negative, default=1000, help="credit kept granted to the sender")
    receive.add_argument("--timeout", type=_seconds, default=10.0, help="give up after this many idle seconds")
    json_flag(receive)

    broker = command("broker", "run the embedded broker (a local Service Bus namespace)")
    broker.add_argument("--host", default="127.0.0.1", help="address to listen on")
    broker.add_argument("--port", type=_port, default=5672, help="TCP port (0: any free port)")
    broker.add_argument("--config", default=None, help="the Service Bus emulator's Config.json")
    broker.add_argument(
        "--require-auth",
        action="store_true",
        help="strict: every link needs a SAS token; without --key a random key is made and printed once"
        " (in the connection string): the emulator's public key would guard nothing, and refusing to start"
        " would push a key onto the command line",
    )
    broker.add_argument("--key-name", default=None, help="name of a plain --key (default RootManageSharedAccessKey)")
    broker.add_argument(
        "--key",
        action="append",
        default=None,
        help="a plain SAS key (Manage; default: the emulator's public key on loopback without --require-auth,"
        " else random), or an authorization rule NAME=KEY:RIGHTS with RIGHTS from Listen,Send,Manage"
        " (e.g. sender=s3cret:Send); repeat for more rules",
    )
    broker.add_argument(
        "--host-name",
        action="append",
        default=None,
        help="a host name (or host:port) clients' token audiences may name besides the listen address;"
        " e.g. localhost:5673 for a port a container publishes",
    )
    broker.add_argument("--plain", action="store_true", help="plain AMQP queues instead of a Service Bus namespace")
    broker.add_argument("--data-dir", default=None, help="keep messages in this directory (default: in memory)")
    broker.add_argument(
        "--http-port", type=_port, default=None, help="serve the management REST API (HTTPS) on this port (0: any)"
    )
    broker.add_argument("--http-cert", default=None, help="PEM certificate for --http-port (default: self-signed)")
    broker.add_argument("--http-key", default=None, help="PEM private key of --http-cert")

    store = command("broker-store", "show what a broker's --data-dir holds (read only; the broker may run)")
    store.add_argument("directory", help="the broker's --data-dir")
    store.add_argument(
        "--salvage",
        action="store_true",
        help="repair a damaged store (no broker running): keep a copy, read back every valid batch, say what is lost",
    )

    from amqplink.broker.faults import FaultKind
    from amqplink.commands.broker_fault import OPERATIONS

    fault = command("broker-fault", "inject (or clear) a fault in a running broker through its $control node")
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
    if args.command == "send":
        from amqplink.commands.send import run_send

        return await run_send(
            args.url,
            args.address,
            count=args.count,
            size=args.size,
            settled=args.settled,
            in_flight=args.in_flight,
            progress=progress,
            summary=summary,
        )
    if args.command == "receive":
        from amqplink.commands.receive import run_receive

        return await run_receive(
            args.url,
            args.address,
            count=args.count,
            mode=args.mode,
            prefetch=args.prefetch,
            idle_timeout=args.timeout,
            progress=progress,
            summary=summary,
        )
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
            data_dir=args.data_dir,
            http_port=args.http_port,
            http_cert=None if args.http_cert is None else (args.http_cert, args.http_key or args.http_cert),
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``amqplink`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    summary: dict[str, Any] = {}
    try:
        result = asyncio.run(_dispatch(args, summary))
    except KeyboardInterrupt:
        # Ctrl-C: what was done so far, then the shell's convention for SIGINT (128 + 2).
        if summary:
            print(json.dumps({**summary, "interrupted": True}), flush=True)
        return 130
    except (ValueError, OSError, TimeoutError) as exc:
        print(f"amqplink {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from amqplink.aio.errors import AMQPError
        from amqplink.spark.session import ExecutorImportError

        if isinstance(exc, ExecutorImportError):
            print(f"amqplink {args.command}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(exc, AMQPError):
            raise
        print(f"amqplink {args.command}: {exc}", file=sys.stderr)
        return 1
    if result is None:
        return 0
    if args.command == "demo" and not args.json:
        from amqplink.commands.demo import format_table

        print(format_table(result), flush=True)
    else:
        print(json.dumps(result), flush=True)
    ok = result.get("ok", result.get("complete", True))
    if args.command == "send":
        ok = result["outcomes"].get("accepted", 0) + result["outcomes"].get("settled", 0) == result["count"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
