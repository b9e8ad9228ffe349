"""``$control``: faults injected from another connection, authorised with the namespace key."""

from __future__ import annotations

import time
from typing import Any

import pytest

from amqplink.aio import connect
from amqplink.aio.errors import ConnectionClosedError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker import Broker
from amqplink.broker.faults import INTERNAL_ERROR, FaultKind
from amqplink.broker.sbserver import EMULATOR_KEY, EMULATOR_KEY_NAME
from amqplink.commands.broker_fault import ControlError, control_request
from amqplink.message import Message
from amqplink.servicebus.cbs import put_token_request
from amqplink.servicebus.sas import AccessToken, generate_sas_token
from tests.broker.test_faults import refusal


def token(audience: str, key: str = EMULATOR_KEY, ttl: int = 300) -> str:
    return generate_sas_token(audience, EMULATOR_KEY_NAME, key, int(time.time()) + ttl)


async def raw_request(
    broker: Broker, app: dict[str, Any], body: Any = None, *, cbs_token: str | None = None
) -> Message:
    conn = await connect(broker.url)
    try:
        if cbs_token is not None:
            cbs = await RequestResponseLink.open(conn, "$cbs")
            audience = f"sb://127.0.0.1:{broker.port}/"
            answer = await cbs.request(put_token_request(audience, AccessToken(cbs_token, int(time.time()) + 300)))
            assert (answer.application_properties or {})["status-code"] == 202
        pair = await RequestResponseLink.open(conn, "$control")
        return await pair.request(Message(body or {}, application_properties=app))
    finally:
        await conn.close()


def status(response: Message) -> tuple[int, str]:
    app = response.application_properties or {}
    return app["status-code"], app["status-description"]


async def test_authorised_inject_list_and_clear() -> None:
    async with Broker(servicebus=True) as broker:
        target = broker.connection_string
        fault = await control_request(
            target, "inject", {"fault": "entity-unavailable", "entity": "q", "condition": INTERNAL_ERROR}
        )
        assert fault["fault"] == "entity-unavailable" and fault["active"] is True
        (active,) = broker.faults.active
        assert active.id == fault["id"] and active.kind is FaultKind.ENTITY_UNAVAILABLE
        conn = await connect(broker.url)
        try:
            sender = await conn.create_sender("q")
            assert await refusal(sender) == INTERNAL_ERROR
            listed = await control_request(target, "list")
            assert [f["id"] for f in listed] == [fault["id"]] and listed[0]["fired"] == 1
            assert await control_request(target, "clear", {"id": fault["id"]}) == {"cleared": 1}
            await sender.send(Message(b"y"))
            with pytest.raises(ControlError, match="404 no active fault"):
                await control_request(target, "clear", {"id": fault["id"]})
            await control_request(target, "inject", {"fault": "refuse-connections", "duration": 60})
            assert await control_request(target, "clear-all") == {"cleared": 1}
        finally:
            await conn.close()


async def test_a_bad_fault_is_a_400_naming_it() -> None:
    async with Broker(servicebus=True) as broker:
        with pytest.raises(ControlError, match="400 unknown fault 'explode'"):
            await control_request(broker.connection_string, "inject", {"fault": "explode"})
        with pytest.raises(ControlError, match="400 operation 'boom' is not one of"):
            await control_request(broker.connection_string, "boom")
        assert broker.faults.active == []


async def test_refused_without_a_root_token_signed_with_the_key() -> None:
    async with Broker(servicebus=True) as broker:
        root = f"sb://127.0.0.1:{broker.port}/"
        inject = {"operation": "inject"}
        spec = {"fault": "refuse-connections"}
        cases = {
            "no token": ({**inject}, "needs a 'security_token'"),
            "entity token": ({**inject, "security_token": token(root + "q")}, "token is for 'q'"),
            "wrong key": ({**inject, "security_token": token(root, key="not-the-key")}, "signature does not match"),
            "expired": ({**inject, "security_token": token(root, ttl=-10)}, "expired"),
        }
        for app, why in cases.values():
            code, description = status(await raw_request(broker, app, spec))
            assert code == 401 and why in description
        assert broker.faults.active == []
        # A root token put on $cbs authorises the connection's requests too.
        code, _ = status(await raw_request(broker, inject, spec, cbs_token=token(root)))
        assert code == 200 and broker.faults.refusing is not None


async def test_connection_faults_spare_the_controller() -> None:
    async with Broker(servicebus=True) as broker:
        other = await connect(broker.url)
        sender = await other.create_sender("q")
        target = broker.connection_string
        closed = await control_request(target, "inject", {"fault": "close-connections"})
        assert closed["fired"] == 1 and closed["active"] is False  # the client's, not $control's
        with pytest.raises(ConnectionClosedError) as failure:
            await sender.send(Message(b"x"))
        assert failure.value.condition == "amqp:connection:forced"
        refusing = await control_request(target, "inject", {"fault": "refuse-connections"})
        assert await control_request(target, "list") == [refusing]  # a new $control connection is let in
        dropped = await control_request(target, "inject", {"fault": "drop-connections"})
        assert dropped["fired"] == 0
        await control_request(target, "clear-all")
