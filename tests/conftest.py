"""Shared test plumbing: ``async def`` tests run on a fresh event loop each."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from amqplink.broker import Broker


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run coroutine test functions with ``asyncio.run`` (no plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), timeout=120))
    return True


@contextmanager
def broker_thread(broker: Broker) -> Iterator[Broker]:
    """Run ``broker`` on an event loop of its own, in a thread (for blocking clients)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="embedded-broker", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    try:
        yield broker
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture()
def embedded_broker() -> Iterator[Broker]:
    """The embedded broker on an event loop of its own, in a thread (for blocking clients)."""
    with broker_thread(Broker()) as broker:
        yield broker
