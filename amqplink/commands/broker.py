"""``amqplink broker``: run the embedded broker (a local Service Bus namespace) until interrupted.

On loopback the emulator's well-known key (``SAS_KEY_VALUE`` for
``RootManageSharedAccessKey``) is the default, so existing emulator connection
strings work; bound to any other address the broker is strict. Strict (there, or with
``--require-auth``) and given no key, it makes a random one rather than guard the
namespace with a key everyone knows, or refuse to start: a strict broker started
without ceremony is then usable by whoever reads its output, and by no one else.
Either way it prints its connection string (the only place the key appears). ``--key
NAME=KEY:RIGHTS`` adds authorization rules (:mod:`amqplink.broker.rights`). With
``--http-port`` it also serves the management REST API over HTTPS (a self-signed
certificate unless ``--http-cert``/``--http-key``) and prints its URL and the certificate
file to trust. SIGTERM (how a container is stopped) stops it as SIGINT does: connections
closed, the store written and closed, the generated certificate and key removed; the
exit code is then 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import re
import signal
import sys
from collections.abc import Sequence

from amqplink import MissingExtraError
from amqplink.aio.server import SERVER_GC_THRESHOLD, raise_gc_threshold
from amqplink.broker import Broker
from amqplink.broker.config import ConfigError, load_config
from amqplink.broker.durable import StoreError
from amqplink.broker.namespace import Namespace
from amqplink.broker.namespace.counts import MessageCounts, entity_counts, topic_counts
from amqplink.broker.rights import AccessRule, parse_rights
from amqplink.broker.sbserver import EMULATOR_KEY_NAME

__all__ = ["entity_lines", "parse_keys", "run_broker"]

log = logging.getLogger(__name__)

_RULE = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)=(?P<key>.+):(?P<rights>(?:listen|send|manage)(?:,(?:listen|send|manage))*)",
    re.IGNORECASE | re.ASCII,
)


def parse_keys(values: Sequence[str], key_name: str | None = None) -> tuple[dict[str, str] | None, list[AccessRule]]:
    """``--key`` values: a plain key (named ``key_name``, a Manage rule) and rules written
    ``NAME=KEY:RIGHTS`` (RIGHTS: ``Listen``, ``Send``, ``Manage`` joined by commas).
    ``ValueError`` for two plain keys; the message never holds a key."""
    plain: dict[str, str] | None = None
    rules: list[AccessRule] = []
    for value in values:
        match = _RULE.fullmatch(value)
        if match is None:
            if plain is not None:
                raise ValueError("--key: give one plain key; write the others as NAME=KEY:RIGHTS")
            plain = {key_name or EMULATOR_KEY_NAME: value}
            continue
        name = match["name"]
        if any(rule.name == name for rule in rules):
            raise ValueError(f"--key: rule {name!r} is given twice")
        rules.append(AccessRule(name, (match["key"],), parse_rights(match["rights"].split(","), "--key")))
    return plain, rules


def _kept(broker: Broker) -> bool:
    """Whether the namespace was read back from a ``--data-dir``."""
    return broker.servicebus is not None and broker.servicebus.persistence is not None


def entity_lines(namespace: Namespace, *, recovered: bool = False, named: bool = False) -> list[str]:
    """What the broker holds at start: one line per queue, topic and subscription with its
    counts (``recovered``: read back from the data directory), or how queues come to be;
    ``named``: the lines say which namespace (a broker serving several)."""
    source = "read back from --data-dir" if recovered else "configured"
    if named:
        source = f"namespace {namespace.name}, {source}"
    lines: list[str] = []
    for queue in sorted(namespace.queues.values(), key=lambda q: q.name):
        lines.append(f"  queue {queue.name}: {_counted(entity_counts(queue, queue.dead_letter_queue))}")
    for topic in sorted(namespace.topics.values(), key=lambda t: t.name):
        lines.append(f"  topic {topic.name}: {topic_counts(topic).scheduled} scheduled")
        for sub in sorted(topic.subscriptions.values(), key=lambda s: s.name):
            lines.append(f"  subscription {sub.path}: {_counted(entity_counts(sub, sub.dead_letter_queue))}")
    if lines:
        lines.insert(0, f"entities ({source}):")
    if namespace.auto_create:
        lines.append("queues are made on first use of a new name (each logged once); --strict-entities refuses them")
    elif not lines:
        lines.append("no entities: links are refused (amqp:not-found) until some are defined (--config, REST API)")
    return lines


def _counted(counts: MessageCounts) -> str:
    return f"{counts.active} active, {counts.dead_letter} dead-lettered, {counts.scheduled} scheduled"


async def run_broker(
    host: str,
    port: int,
    *,
    ready: asyncio.Event | None = None,
    config: str | None = None,
    plain: bool = False,
    require_auth: bool | None = None,
    key_name: str | None = None,
    key: str | None = None,
    keys: Sequence[str] = (),
    host_names: Sequence[str] = (),
    data_dir: str | None = None,
    http_port: int | None = None,
    http_cert: tuple[str, str] | None = None,
    strict_entities: bool = False,
) -> None:
    """Serve on ``host:port`` until cancelled or sent SIGTERM; prints the URL (and connection
    string) once listening. ``key`` or ``keys`` (``--key`` values, see :func:`parse_keys`).
    The process's garbage-collector threshold is raised to ``SERVER_GC_THRESHOLD`` (a
    process-wide setting: the command owns its process)."""
    raise_gc_threshold(SERVER_GC_THRESHOLD)  # this process is a server (see SERVER_GC_THRESHOLD)
    if plain and http_port is not None:
        print("amqplink broker: --http-port serves a Service Bus namespace, not --plain queues", file=sys.stderr)
        raise SystemExit(2)
    if plain:
        if data_dir is not None:
            print("amqplink broker: --data-dir keeps a Service Bus namespace; leave out --plain", file=sys.stderr)
            raise SystemExit(2)
        broker = Broker()
    else:
        try:
            loaded = None if config is None else load_config(config)
            given, rules = parse_keys([*([] if key is None else [key]), *keys], key_name)
            broker = Broker(
                loaded,
                servicebus=True,
                keys=given,
                rules=rules,
                host_names=host_names,
                require_auth=require_auth,
                data_dir=data_dir,
                http_port=http_port,
                http_cert=http_cert,
            )
        except (ConfigError, StoreError, ValueError) as exc:
            print(f"amqplink broker: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        for namespace in broker.namespaces.values():
            namespace.first_use_level = logging.WARNING  # a mistyped name is seen, not a silent new queue
            if strict_entities:
                namespace.auto_create = False
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    terminated = False
    with contextlib.suppress(NotImplementedError, RuntimeError):  # (no signals off the main thread)
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
        terminated = True
    try:
        await _serve(broker, host, port, plain, ready, stopping)
    finally:
        if terminated:
            loop.remove_signal_handler(signal.SIGTERM)


async def _serve(
    broker: Broker, host: str, port: int, plain: bool, ready: asyncio.Event | None, stopping: asyncio.Event
) -> None:
    """Start ``broker``, say where it listens, and stop it once ``stopping`` is set (or on cancel)."""
    try:
        await broker.start(host, port)
    except MissingExtraError:  # --http-port without the broker extra: the command says so in one line
        await broker.stop()
        raise
    except OSError as exc:
        await broker.stop()
        if exc.errno == errno.EADDRINUSE:
            why = f"port {port} is in use (another broker?); --port 0 takes any free port"
        else:
            why = str(exc.strerror or exc)
        raise OSError(f"cannot listen on {host}:{port}: {why}") from None
    print(f"amqplink broker listening on amqp://{host}:{broker.port}", flush=True)
    if not plain:
        print(broker.connection_string, flush=True)
        if broker.management is not None:
            print(f"management API on https://{host}:{broker.http_port} (CA certificate: {broker.http_ca})", flush=True)
        for name in list(broker.namespaces)[1:]:  # a Config.json's other namespaces, each on its own name
            print(f"namespace {name}: {broker.connection_string_for(name)}", flush=True)
        several = len(broker.namespaces) > 1
        for namespace in broker.namespaces.values():
            for line in entity_lines(namespace, recovered=_kept(broker), named=several):
                print(line, flush=True)
    if ready is not None:
        ready.set()
    try:
        await stopping.wait()
        log.warning("SIGTERM: stopping the broker")
    finally:
        await broker.stop()
