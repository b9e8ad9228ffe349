"""``$control``: faults injected from another connection, authorised with the namespace key."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqplink.aio import connect
from amqplink.aio.errors import ConnectionClosedError
from amqplink.aio.request_response import RequestResponseLink
from amqplink.broker import Broker
from amqplink.broker.control import handle_control
from amqplink.broker.faults import INTERNAL_ERROR, FaultKind
from amqplink.broker.namespace.cbs import Authorizations
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


_values = st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats(allow_nan=True) | st.text(max_size=30)
_keys = st.sampled_from(
    ["fault", "entity", "condition", "fragment", "after-bytes", "after-frames", "delay-ms", "duration", "id", "x"]
)
_faults = st.sampled_from([*(k.value for k in FaultKind), "explode"])


@given(
    operation=st.sampled_from(["inject", "clear", "clear-all", "list", "boom"]) | st.text(max_size=5),
    fault=_faults,
    body=st.dictionaries(_keys, _values, max_size=5),
)
@settings(deadline=None)
def test_any_control_request_gets_an_answer(operation: str, fault: str, body: dict[str, Any]) -> None:
    broker = Broker(servicebus=True)
    assert broker.servicebus is not None
    root = "sb://127.0.0.1:5672/"
    app = {"operation": operation, "security_token": token(root)}
    request = Message({"fault": fault, **body}, application_properties=app, message_id="m")
    response = handle_control(broker.faults, broker.servicebus.keys, Authorizations(), request, time.time())
    code, _ = status(response)
    assert code in (200, 400, 404) and response.correlation_id == "m"
    broker.faults.clear_all()


async def test_a_strict_namespace_takes_its_own_key_only() -> None:
    async with Broker(servicebus=True, keys={"admin": "s3cret"}, require_auth=True) as broker:
        fault = await control_request(broker.connection_string, "inject", {"fault": "expire-locks"})
        assert fault["fault"] == "expire-locks"
        url = f"amqp://127.0.0.1:{broker.port}"
        with pytest.raises(ControlError, match=r"401 the token was refused: .*no key named 'RootManage"):
            await control_request(url, "list")  # the emulator's key
        assert await control_request(url, "list", key_name="admin", key="s3cret") == []
