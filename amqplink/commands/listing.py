"""``amqplink list``: a namespace's queues, topics and subscriptions with their message
counts, read from the management REST API (what the Azure portal and the SDK's
``ServiceBusAdministrationClient`` read). AMQP has no way to list entities: Service Bus's
``$management`` node answers only about the entity it belongs to. So a real namespace is
listed from its connection string as it is (HTTPS on port 443), and the embedded broker
when it serves the API (``amqplink broker --http-port PORT``): give that port and the CA
certificate file it printed (``--http-port PORT --ca FILE``)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from amqplink.commands.arguments import add_json, add_target, port
from amqplink.commands.target import parse_target
from amqplink.servicebus.connection_string import parse_connection_string

__all__ = ["EPILOG", "add_arguments", "list_entities", "run"]

EPILOG = """\
examples:
  amqplink broker --port 0 --http-port 0     (prints the connection string, the API's port and CA file)
  amqplink list "$CONN" --http-port 5443 --ca /tmp/amqplink-xxx/cert.pem
  amqplink list "Endpoint=sb://NAMESPACE.servicebus.windows.net/;SharedAccessKeyName=...;SharedAccessKey=..."
($CONN: the connection string `amqplink broker` prints)"""

COLUMNS = ("active", "dead_letter", "scheduled")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``list``'s arguments."""
    add_target(parser, address=False)
    parser.add_argument(
        "--http-port",
        type=port,
        default=None,
        help="the port of the management API (the embedded broker's --http-port; default: the namespace's 443)",
    )
    parser.add_argument(
        "--ca", default=None, metavar="FILE", help="CA certificate to trust (the file the broker printed)"
    )
    add_json(parser)


def list_entities(conn_str: str, *, http_port: int | None = None, ca: str | None = None) -> list[dict[str, Any]]:
    """Each entity as ``{"entity", "kind", "active", "dead_letter", "scheduled"}`` (blocking)."""
    from amqplink.servicebus.management import ServiceBusAdministrationClient
    from amqplink.servicebus.management._operations import endpoint_from_connection_string

    parsed = parse_connection_string(conn_str)
    host = parsed.fully_qualified_namespace
    netloc = f"[{host}]" if ":" in host else host
    if http_port is not None:
        netloc = f"{netloc}:{http_port}"
    elif not parsed.use_tls:
        raise ValueError(
            "list reads the management REST API over HTTPS: start the broker with --http-port and give"
            " that port and the CA file it printed (--http-port PORT --ca FILE)"
        )
    credential = endpoint_from_connection_string(conn_str)[2]
    rows: list[dict[str, Any]] = []
    with ServiceBusAdministrationClient(netloc, credential, connection_verify=ca) as admin:
        for queue in admin.list_queues_runtime_properties():
            rows.append(_row(queue.name, "queue", queue))
        for topic in admin.list_topics_runtime_properties():
            rows.append({"entity": topic.name, "kind": "topic", "scheduled": topic.scheduled_message_count})
            for sub in admin.list_subscriptions_runtime_properties(topic.name):
                rows.append(_row(f"{topic.name}/Subscriptions/{sub.name}", "subscription", sub))
    return rows


def _row(name: str, kind: str, props: Any) -> dict[str, Any]:
    row = {
        "entity": name,
        "kind": kind,
        "active": props.active_message_count,
        "dead_letter": props.dead_letter_message_count,
    }
    scheduled = getattr(props, "scheduled_message_count", None)
    return row if scheduled is None else {**row, "scheduled": scheduled}


def table(rows: list[dict[str, Any]]) -> str:
    """``rows`` as aligned text columns (``-`` where a count does not apply)."""
    header = ("ENTITY", "KIND", "ACTIVE", "DEAD-LETTER", "SCHEDULED")
    lines = [header, *((r["entity"], r["kind"], *(str(r.get(c, "-")) for c in COLUMNS)) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    def aligned(line: tuple[str, ...]) -> str:
        cells = (c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        return "  ".join(cells).rstrip()

    return "\n".join(aligned(line) for line in lines)


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any] | None:
    """Print the table (``--json``: one JSON line with ``entities``)."""
    target = parse_target(args.target)
    if not target.servicebus:
        raise ValueError("list reads a Service Bus namespace's management API: give the connection string")
    rows = await asyncio.to_thread(list_entities, target.text, http_port=args.http_port, ca=args.ca)
    if args.json:
        return {"command": "list", "entities": rows}
    print(table(rows) if rows else "(no entities)", flush=True)
    return None
