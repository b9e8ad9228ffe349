"""``amqplink broker``: run the embedded broker (a local Service Bus namespace) until interrupted.

On loopback the emulator's well-known key (``SAS_KEY_VALUE`` for
``RootManageSharedAccessKey``) is the default, so existing emulator connection
strings work; bound to any other address the broker is strict and, without a
key, makes a random one. Either way it prints its connection string.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from amqplink.broker import Broker
from amqplink.broker.config import ConfigError, load_config
from amqplink.broker.durable import StoreError
from amqplink.broker.sbserver import EMULATOR_KEY_NAME

__all__ = ["run_broker"]

log = logging.getLogger(__name__)


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
    data_dir: str | None = None,
) -> None:
    """Serve on ``host:port`` until cancelled; prints the URL (and connection string) once listening."""
    if plain:
        if data_dir is not None:
            print("amqplink broker: --data-dir keeps a Service Bus namespace; leave out --plain", file=sys.stderr)
            raise SystemExit(2)
        broker = Broker()
    else:
        try:
            loaded = None if config is None else load_config(config)
            keys = None if key is None else {key_name or EMULATOR_KEY_NAME: key}
            broker = Broker(loaded, servicebus=True, keys=keys, require_auth=require_auth, data_dir=data_dir)
        except (ConfigError, StoreError) as exc:
            print(f"amqplink broker: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    try:
        await broker.start(host, port)
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    print(f"amqplink broker listening on amqp://{host}:{broker.port}", flush=True)
    if not plain:
        print(broker.connection_string, flush=True)
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()
