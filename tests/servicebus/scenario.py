"""Plumbing for the scenario suites: the two client APIs (only the import differs) and a
Service Bus broker with the entities the scenarios need, on a thread of its own."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest

from amqplink.broker import Broker
from amqplink.broker.config import parse_config
from amqplink.codec.types import Symbol
from amqplink.protocol.definitions import Error

CLIENTS = ("azure", "amqplink")
"""``azure``: the official SDK; ``amqplink``: ours. The same test bodies run with both."""

LOCK = 3.0
"""Lock duration (seconds) of the ``short`` queues."""
SHORT_LOCK = 1.0
MAX_DELIVERY = 3


@dataclass
class Api:
    """One client library: ``sb`` (blocking package), ``aio``, ``exceptions``."""

    name: str
    sb: ModuleType
    aio: ModuleType
    exceptions: ModuleType


def load_api(name: str) -> Api:
    root = "azure.servicebus" if name == "azure" else "amqplink.servicebus"
    return Api(
        name,
        importlib.import_module(root),
        importlib.import_module(f"{root}.aio"),
        importlib.import_module(f"{root}.exceptions"),
    )


def _queue(name: str, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": properties}


CONFIG = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    _queue("plain"),
                    _queue("other"),
                    _queue("locks", LockDuration=f"PT{int(LOCK)}S"),
                    _queue("expiring", LockDuration=f"PT{int(SHORT_LOCK)}S"),
                    _queue("retries", MaxDeliveryCount=MAX_DELIVERY),
                    _queue("sessions", RequiresSession=True),
                    _queue("short-sessions", RequiresSession=True, LockDuration=f"PT{int(LOCK)}S"),
                ],
                "Topics": [
                    {
                        "Name": "events",
                        "Properties": {},
                        "Subscriptions": [
                            {"Name": "all", "Properties": {}, "Rules": []},
                            {
                                "Name": "red",
                                "Properties": {},
                                "Rules": [
                                    {
                                        "Name": "red-only",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {"Label": "red"},
                                        },
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ]
    }
}


class BrokerThread:
    """The broker on its own loop thread; ``call`` runs a coroutine there."""

    def __init__(self, *, require_auth: bool | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(parse_config(CONFIG), require_auth=require_auth)
        self.thread = threading.Thread(target=self.loop.run_forever, name="sb-scenario-broker", daemon=True)
        self.thread.start()
        self.call(self.broker.start())

    def call(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)  # type: ignore[arg-type]

    @property
    def connection_string(self) -> str:
        return self.broker.connection_string

    def force(self, condition: str) -> int:
        """Fault: the broker detaches every entity link (a ``amqp:link:...`` condition) or closes
        every connection (``amqp:connection:forced``), as Service Bus does on an update or idle.
        Returns how many links or connections it ended."""

        async def act() -> int:
            host = self.broker.servicebus
            assert host is not None
            error = Error(condition=Symbol(condition), description="forced by the test")
            ended = 0
            for conn in list(host.connections):
                if condition.startswith("amqp:connection:"):
                    conn.engine.close(error)
                    ended += 1
                else:
                    for link in [*conn.consumers, *conn.producers]:
                        link.detach(error)
                        conn.drop(link)
                        ended += 1
                conn.protocol.schedule_flush()
            return ended

        return int(self.call(act()))

    def stop(self) -> None:
        self.call(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(params=CLIENTS)
def api(request: pytest.FixtureRequest) -> Api:
    return load_api(request.param)


@pytest.fixture()
def broker() -> Iterator[BrokerThread]:
    b = BrokerThread()
    try:
        yield b
    finally:
        b.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``predicate`` (a condition on the broker's state) until true or fail."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def body(message: Any) -> bytes:
    """A received message's data body, the same way for both libraries."""
    return b"".join(message.body)
