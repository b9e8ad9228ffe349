"""CBS put-token: the request's shape, status checking, the pure refresh rule, and the
authorizer against the in-test responder, which verifies tokens with sas.verify_sas_token."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink import Message
from amqplink.aio import connect
from amqplink.codec.types import Timestamp
from amqplink.servicebus import AzureNamedKeyCredential, AzureSasCredential
from amqplink.servicebus.cbs import (
    CBS_NODE,
    REFRESH_FRACTION,
    CbsAuthorizer,
    check_put_token_response,
    put_token_request,
    refresh_at,
)
from amqplink.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusConnectionError, ServiceBusError
from amqplink.servicebus.sas import AccessToken, SasTokenError, generate_sas_token, verify_sas_token
from tests.responder import Responder

KEYS = {"Root": "the-key"}
AUDIENCE = "sb://127.0.0.1/orders"


def cbs_node(node: str, request: Message) -> Message | None:
    """$cbs as the broker answers it: verify the token for the audience named in the request."""
    assert node == CBS_NODE
    props = request.application_properties or {}
    try:
        verify_sas_token(request.body, keys=KEYS, audience=props["name"], now=time.time())
    except SasTokenError as exc:
        return Message(None, application_properties={"status-code": 401, "status-description": exc.detail})
    return Message(None, application_properties={"status-code": 202, "status-description": "Accepted"})


def puts(responder: Responder, audience: str = AUDIENCE) -> list[Message]:
    return [r for n, r in responder.requests if n == CBS_NODE and r.application_properties["name"] == audience]


def test_put_token_request_shape() -> None:
    request = put_token_request(AUDIENCE, AccessToken("SharedAccessSignature x", 1700000000))
    assert request.body == "SharedAccessSignature x" and request.body_type == "value"
    assert request.application_properties == {
        "operation": "put-token",
        "type": "servicebus.windows.net:sastoken",
        "name": AUDIENCE,
        "expiration": Timestamp(1700000000 * 1000),
    }
    assert isinstance(request.application_properties["expiration"], Timestamp)
    jwt = put_token_request(AUDIENCE, AccessToken("t", 1), token_type="jwt")
    assert jwt.application_properties["type"] == "jwt"


@pytest.mark.parametrize("code", [200, 202, 204])
def test_2xx_is_accepted(code: int) -> None:
    check_put_token_response(Message(None, application_properties={"status-code": code}), AUDIENCE)


def test_refusal_raises_authentication_error_with_the_description() -> None:
    response = Message(None, application_properties={"status-code": 401, "status-description": "InvalidSignature"})
    with pytest.raises(ServiceBusAuthenticationError) as info:
        check_put_token_response(response, AUDIENCE)
    exc = info.value
    assert (exc.status_code, exc.description, exc.entity, exc.retryable) == (401, "InvalidSignature", AUDIENCE, False)
    assert "InvalidSignature" in str(exc)
    busy = Message(None, application_properties={"statusCode": 503, "statusDescription": "busy"})
    with pytest.raises(ServiceBusAuthenticationError) as busy_info:
        check_put_token_response(busy, AUDIENCE)
    assert busy_info.value.retryable
    with pytest.raises(ServiceBusAuthenticationError, match="no status-code"):
        check_put_token_response(Message(None, application_properties={"status-code": "200"}), AUDIENCE)


@pytest.mark.parametrize(
    ("issued", "expires", "expected"),
    [
        (0, 3600, 3000),  # 1 h: 10 min before (6 min left would be later)
        (0, 1200, 600),  # 20 min: 10 min before
        (0, 36000, 32400),  # 10 h: 10% left (1 h) comes before 10 min left
        (0, 300, 270),  # 5 min: 10 min before expiry is before issue -> the 10% rule
        (100, 100, 100),  # no lifetime: at once
    ],
)
def test_refresh_rule(issued: float, expires: float, expected: float) -> None:
    assert refresh_at(issued, expires) == pytest.approx(expected)


@given(st.floats(min_value=0, max_value=2e9), st.floats(min_value=0.001, max_value=1e7))
def test_refresh_is_after_issue_with_at_least_ten_percent_left(issued: float, lifetime: float) -> None:
    expires = issued + lifetime
    at = refresh_at(issued, expires)
    slack = 1e-9 * max(1.0, expires)  # float rounding at large Unix times
    assert issued < at < expires or lifetime < slack
    assert expires - at >= REFRESH_FRACTION * (expires - issued) - slack


async def test_authorize_puts_a_token_the_broker_verifies() -> None:
    async with Responder(cbs_node) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, AzureNamedKeyCredential("Root", "the-key"))
        token = await cbs.authorize(AUDIENCE)
        [request] = puts(responder)
        assert request.body == token.token
        assert request.application_properties["expiration"] == Timestamp(token.expires_on * 1000)
        assert cbs.expires_on(AUDIENCE) == token.expires_on and cbs.audiences == [AUDIENCE]
        assert verify_sas_token(token.token, keys=KEYS, audience=AUDIENCE, now=time.time()).key_name == "Root"
        await cbs.close()


async def test_a_refused_token_raises_with_the_brokers_description() -> None:
    async with Responder(cbs_node) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, AzureNamedKeyCredential("Root", "wrong-key"))
        with pytest.raises(ServiceBusAuthenticationError) as info:
            await cbs.authorize(AUDIENCE)
        assert info.value.status_code == 401 and "does not match" in str(info.value)
        assert "wrong-key" not in str(info.value)
        unknown = CbsAuthorizer(conn, AzureNamedKeyCredential("Nobody", "the-key"))
        with pytest.raises(ServiceBusAuthenticationError, match="no key named"):
            await unknown.authorize(AUDIENCE)
        await cbs.close()
        await unknown.close()


async def test_sas_credential_token_is_put_as_given() -> None:
    token = generate_sas_token("sb://127.0.0.1/", "Root", "the-key", int(time.time()) + 60)
    async with Responder(cbs_node) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, AzureSasCredential(token))
        await cbs.authorize(AUDIENCE)
        assert [r.body for r in puts(responder)] == [token]
        await cbs.close()


async def test_the_token_is_refreshed_on_the_loop_before_it_expires() -> None:
    async with Responder(cbs_node) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, AzureNamedKeyCredential("Root", "the-key"), token_ttl=2)
        first = await cbs.authorize(AUDIENCE)
        await responder.wait_until(lambda: len(puts(responder)) >= 2, timeout=5)
        # when (before expiry) is refresh_at's, tested above; here: a fresh, valid token went out
        second = puts(responder)[1]
        claims = verify_sas_token(second.body, keys=KEYS, audience=AUDIENCE, now=time.time())
        assert claims.expires_at > first.expires_on
        await cbs.close()


async def test_a_failed_refresh_is_reported_not_swallowed() -> None:
    async with Responder(cbs_node) as responder, await connect(responder.url) as conn:
        failures: asyncio.Queue[tuple[str, ServiceBusError]] = asyncio.Queue()
        cbs = CbsAuthorizer(
            conn,
            AzureNamedKeyCredential("Root", "the-key"),
            token_ttl=2,
            on_refresh_failure=lambda audience, exc: failures.put_nowait((audience, exc)),
        )
        await cbs.authorize(AUDIENCE)
        responder.handler = lambda node, request: Message(
            None, application_properties={"status-code": 401, "status-description": "key rotated"}
        )
        audience, exc = await asyncio.wait_for(failures.get(), 5)
        assert audience == AUDIENCE and isinstance(exc, ServiceBusAuthenticationError)
        assert cbs.last_refresh_error(AUDIENCE) is exc and "key rotated" in str(exc)
        await cbs.close()


async def test_reauthorize_puts_every_audience_on_the_new_connection() -> None:
    async with Responder(cbs_node) as responder:
        first_conn = await connect(responder.url)
        cbs = CbsAuthorizer(first_conn, AzureNamedKeyCredential("Root", "the-key"))
        await cbs.authorize(AUDIENCE)
        await cbs.authorize("sb://127.0.0.1/other")
        responder.drop_connections()
        async with await connect(responder.url) as second_conn:
            await cbs.reauthorize(second_conn)
            assert len(puts(responder)) == 2 and len(puts(responder, "sb://127.0.0.1/other")) == 2
            assert cbs.connection is second_conn
            await cbs.close()
        await first_conn.close()


async def test_connection_loss_during_put_is_a_connection_error() -> None:
    async with Responder(lambda node, request: None) as responder, await connect(responder.url) as conn:
        cbs = CbsAuthorizer(conn, AzureNamedKeyCredential("Root", "the-key"))
        putting = asyncio.ensure_future(cbs.authorize(AUDIENCE))
        await responder.wait_until(lambda: len(responder.held) == 1)
        responder.drop_connections()
        with pytest.raises(ServiceBusConnectionError):
            await putting
        await cbs.close()
