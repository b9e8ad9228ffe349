"""``amqplink syphon PRIMARY_CONN SECONDARY_CONN``: the paired namespaces' syphon as a
long-lived service (seed 001: "at least one executable program in the application should
be actively running the syphon").

It moves the messages parked in the secondary's backlog queues back to their entities in
the primary (at least once: each is completed as soon as its forward is accepted, so a
crash repeats what was in flight; duplicate detection on the destination removes the
repeats). Every ``--report-every`` seconds it logs what it moved per queue and what is
left, warns (once per queue, and again when the count changes) about backlog queues it
does not move (an index beyond ``--backlog-queues``, a queue parked for a primary of
another name), and writes the same as JSON to ``--status-file`` (with the metrics of :mod:`amqplink.servicebus.metrics`,
the same an OpenTelemetry reader collects). SIGTERM (or SIGINT) stops
it cleanly: receivers closed, the final status printed as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import time
from contextlib import suppress
from typing import Any

from amqplink.commands.arguments import positive, seconds

__all__ = ["EPILOG", "add_arguments", "run"]

log = logging.getLogger("amqplink.syphon")

EPILOG = """\
examples:
  amqplink syphon "$PRIMARY" "$SECONDARY"
  amqplink syphon "$PRIMARY" "$SECONDARY" --backlog-queues 10 --status-file /run/syphon.json
  amqplink syphon "$PRIMARY" "$SECONDARY" --management-endpoint https://127.0.0.1:5443/ --ca ca.pem
($PRIMARY, $SECONDARY: the two namespaces' connection strings; stop it with SIGTERM)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``syphon``'s arguments."""
    parser.add_argument("primary", metavar="PRIMARY_CONN", help="the primary namespace's connection string")
    parser.add_argument("secondary", metavar="SECONDARY_CONN", help="the secondary namespace's (the backlog queues)")
    parser.add_argument(
        "--backlog-queues", type=positive, default=10, help="backlog queues to move (the clients' backlog_queue_count)"
    )
    parser.add_argument(
        "--management-endpoint", default=None, metavar="URL", help="the secondary's management API (default: its host)"
    )
    verify = parser.add_mutually_exclusive_group()
    verify.add_argument("--ca", default=None, metavar="FILE", help="CA bundle for the management endpoint's TLS")
    verify.add_argument("--insecure", action="store_true", help="do not check the management endpoint's certificate")
    parser.add_argument("--wait", type=seconds, default=60.0, help="seconds one receive waits for a parked message")
    parser.add_argument("--report-every", type=seconds, default=60.0, help="seconds between two progress reports")
    parser.add_argument("--status-file", default=None, metavar="FILE", help="write the JSON status here at each report")


async def run(args: argparse.Namespace, summary: dict[str, Any], progress: bool | None) -> dict[str, Any]:
    """Run the syphon until SIGTERM or SIGINT; the final status."""
    from amqplink.servicebus import PairedNamespaceOptions
    from amqplink.servicebus.aio import ServiceBusClient

    options = PairedNamespaceOptions(
        args.secondary,
        backlog_queue_count=args.backlog_queues,
        enable_syphon=True,
        management_endpoint=args.management_endpoint,
        connection_verify=False if args.insecure else args.ca,
        syphon_wait=args.wait,
    )
    client = ServiceBusClient.from_connection_string(args.primary, paired_namespace=options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    service = SyphonService(client, options, args.status_file)
    try:
        async with client:
            log.warning("syphon: moving %d backlog queue(s) of %s to %s", len(service.names),
                        options.secondary.amqp_url, client.fully_qualified_namespace)  # fmt: skip
            while not stop.is_set():
                summary.update(await service.report())
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.report_every)
            final = await service.report(inventory=False)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.warning("syphon: stopped; %d message(s) moved", final["moved"])
    return {**final, "running": False}


class SyphonService:
    """The reports of one syphon process: progress per queue, stranded messages, the status file."""

    def __init__(self, client: Any, options: Any, status_file: str | None) -> None:
        self.client = client
        self.options = options
        self.status_file = status_file
        state = client.paired_state
        self.names: tuple[str, ...] = state.backlog_queues
        self.label: str = state.primary_label
        self.started = time.monotonic()
        self.depths: dict[str, int | None] = {}
        self.stranded: dict[str, int] = {}
        """Stranded queue -> the count last warned about."""
        self.inventory_error: str | None = None
        self._reported: dict[str, tuple[int, int | None]] = {}

    async def report(self, *, inventory: bool = True) -> dict[str, Any]:
        from amqplink.servicebus.metrics import readings, sources_of
        from amqplink.servicebus.paired.inventory import take_inventory

        stranded: list[dict[str, Any]] = []
        if inventory:
            try:
                found = await asyncio.to_thread(take_inventory, self.options, self.names, self.label)
            except Exception as exc:  # the management API is down: the syphon goes on, the status says so
                if self.inventory_error is None:
                    log.warning("syphon: the backlog queues could not be listed (%s); moving goes on", exc)
                self.inventory_error = f"{type(exc).__name__}: {exc}"
            else:
                self.inventory_error = None
                self.depths = found.depths
                for item in found.stranded:
                    if self.stranded.get(item.queue) != item.messages:
                        log.warning("syphon: %s holds %d message(s) this syphon does not move: %s", item.queue,
                                    item.messages, item.why)  # fmt: skip
                    stranded.append({"queue": item.queue, "messages": item.messages, "why": item.why})
                self.stranded = {item.queue: item.messages for item in found.stranded}
        state = self.client.paired_state
        moved = dict(state.syphon_moved)
        queues = {name: {"moved": moved.get(name, 0), "left": self.depths.get(name)} for name in self.names}
        for name, values in queues.items():
            now = (values["moved"], values["left"])
            if now != self._reported.get(name, (0, None)) and (values["moved"] or values["left"]):
                log.info("syphon: %s: %d moved, %s left", name, values["moved"], values["left"])
            self._reported[name] = now
        status = {
            "command": "syphon",
            "running": state.syphon_running,
            "primary": self.client.fully_qualified_namespace,
            "secondary": self.options.secondary.amqp_url,
            "seconds": round(time.monotonic() - self.started, 3),
            "moved": sum(moved.values()),
            "queues": queues,
            "stranded": stranded if inventory else [{"queue": q, "messages": n} for q, n in self.stranded.items()],
            "faulted": state.syphon_faulted,
            "backlog_error": state.backlog_error,
            "inventory_error": self.inventory_error,
            "metrics": readings(sources_of(self.client, backlog_depths=lambda: self.depths)),
        }
        if self.status_file is not None:
            _write_atomically(self.status_file, json.dumps(status))
        return status


def _write_atomically(path: str, text: str) -> None:
    """``text`` to ``path`` by a rename: a reader sees the old status or the new, never half."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.replace(temporary, path)
