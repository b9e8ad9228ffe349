"""One failure, one report: no "never retrieved" flood, no WARNING for an error the
caller gets, expected fallbacks at DEBUG/INFO."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from amqplink.aio import ConnectionClosedError, LinkDetachedError, connect
from amqplink.engine.errors import NOT_IMPLEMENTED
from amqplink.protocol.definitions import Error

from .helpers import HoldingServer, eventually


def _collect_loop_errors() -> list[dict[str, Any]]:
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
    return reported


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("amqplink") and r.levelno >= logging.WARNING]


async def test_connection_lost_with_a_thousand_outstanding_futures_reports_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink")
    reported = _collect_loop_errors()
    async with HoldingServer() as server:
        conn = await connect(server.url)
        sender = await conn.create_sender("q", max_in_flight=1000)
        futures = [await sender.send_nowait(b"x") for _ in range(1000)]
        await eventually(lambda: len(server.held) == 1000)
        for protocol in server.protocols:
            protocol.abort()
        with pytest.raises(ConnectionClosedError, match="connection:forced"):
            await futures[0]  # whoever awaits one gets the error
        await conn.close()
        del futures, sender, conn
        gc.collect()  # a future's "never retrieved" report comes when it is collected
        await asyncio.sleep(0)
    assert [c.get("message") for c in reported] == []
    assert _warnings(caplog) == []
    lost = [r for r in caplog.records if "connection:forced" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in lost]


async def test_a_detach_raised_to_the_caller_is_not_also_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink")
    async with HoldingServer() as server, await connect(server.url) as conn:
        sender = await conn.create_sender("q")
        await sender.send_nowait(b"x")
        await eventually(lambda: len(server.held) == 1)
        link, _ = server.held[0]
        link.detach(Error(condition=NOT_IMPLEMENTED, description="gone"))
        server.protocols[0].schedule_flush()
        await eventually(lambda: sender.closed)
        with pytest.raises(LinkDetachedError, match="not-implemented"):
            await sender.send(b"y")
    assert _warnings(caplog) == []


async def test_the_rcv_settle_mode_second_fallback_logs_below_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="amqplink")
    async with HoldingServer(refuse_rcv_second_after=0) as server, await connect(server.url) as conn:
        receiver = await conn.create_receiver("q", mode="peek-lock")
        assert not receiver.confirm
        again = await conn.create_receiver("q", mode="peek-lock")
        assert not again.confirm
    assert _warnings(caplog) == []
    info = [r for r in caplog.records if r.levelno == logging.INFO and "rcv-settle-mode" in r.getMessage()]
    assert len(info) == 1
