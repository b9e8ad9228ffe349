"""``amqplink.sbwire``: Service Bus's wire contract, one copy for the client and the broker."""

from __future__ import annotations

import datetime as dt
import math
import uuid

from hypothesis import given
from hypothesis import strategies as st

from amqplink.sbwire import formats, lock_token, nodes, sas


@given(st.integers(min_value=0, max_value=253402300799 * 10**6))
def test_ticks_round_trip_to_the_microsecond(micros: int) -> None:
    seconds = micros / 10**6  # a float: exact to its ulp (2 us in year 9999)
    back = formats.datetime_from_ticks(formats.dotnet_ticks(seconds))
    expected = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=micros)
    assert abs(back - expected) <= dt.timedelta(microseconds=1, seconds=math.ulp(seconds))


def test_ticks_of_the_unix_epoch_and_one_second() -> None:
    assert formats.dotnet_ticks(0) == 621355968000000000
    one_second = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    assert formats.datetime_from_ticks(621355968000000000 + 10_000_000) == one_second


def test_the_lock_token_example_of_the_protocol_notes() -> None:
    tag = bytes.fromhex("5bad8f0fcbd99f46a1657086772895 0e".replace(" ", ""))
    token = lock_token.lock_token_from_delivery_tag(tag)
    assert token == uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    assert lock_token.delivery_tag_from_lock_token(str(token)) == tag


def test_the_client_paths_export_the_same_objects() -> None:
    from amqplink.broker.namespace.management import OPERATIONS
    from amqplink.servicebus import lock_token as client_lock_token
    from amqplink.servicebus import sas as client_sas
    from amqplink.servicebus.management_node import Operation

    for name in sas.__all__:
        assert getattr(client_sas, name) is getattr(sas, name), name
    assert client_lock_token.lock_token_from_delivery_tag is lock_token.lock_token_from_delivery_tag
    assert Operation is nodes.Operation and set(OPERATIONS) == set(nodes.Operation)


def test_a_minted_token_verifies_against_the_neutral_verifier() -> None:
    from amqplink.servicebus.credentials import AzureNamedKeyCredential
    from amqplink.servicebus.sas import mint_token

    minted = mint_token(AzureNamedKeyCredential("send", "k3y"), "sb://ns.example/q", now=1000, ttl=60)
    claims = sas.verify_sas_token(minted.token, keys={"send": "k3y"}, audience="sb://ns.example/q/x", now=1030)
    assert claims.key_name == "send" and claims.expires_at == 1060
