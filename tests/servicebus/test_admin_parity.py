"""The official management samples' scenarios with the SDK's ServiceBusAdministrationClient and with
amqplink's, against the embedded broker: every call gives the same (sync and asyncio)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

azure_management = pytest.importorskip("azure.servicebus.management")
from azure.servicebus.aio.management import ServiceBusAdministrationClient as SdkAsyncAdmin  # noqa: E402

from amqplink.broker import Broker  # noqa: E402
from amqplink.broker.config import BrokerConfig  # noqa: E402
from amqplink.servicebus import management  # noqa: E402
from amqplink.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin  # noqa: E402
from tests.broker.sdkutil import running_broker  # noqa: E402
from tests.servicebus import admin_scenarios  # noqa: E402
from tests.servicebus.admin_util import admin_connection_string, sender  # noqa: E402

pytestmark = pytest.mark.sdk
SAMPLES = ["queue", "topic", "subscription", "rule", "namespace", "invalid input"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(BrokerConfig(), http_port=0) as broker:
        yield broker


def _sync(broker: Broker, module: Any, prefix: str, sample: str) -> list[tuple[str, Any]]:
    client = module.ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    )
    with client:
        scenario = admin_scenarios.scenarios(prefix, module)[sample]
        return admin_scenarios.run_sync(scenario, client, sender(broker), prefix)


def _async(broker: Broker, cls: Any, module: Any, prefix: str, sample: str) -> list[tuple[str, Any]]:
    async def run() -> list[tuple[str, Any]]:
        async with cls.from_connection_string(admin_connection_string(broker), connection_verify=broker.http_ca) as c:
            scenario = admin_scenarios.scenarios(prefix, module)[sample]
            return await admin_scenarios.run_async(scenario, c, sender(broker), prefix)

    return asyncio.run(run())


@pytest.mark.parametrize("sample", SAMPLES)
def test_blocking_clients_agree(broker: Broker, sample: str) -> None:
    """Each sample with the SDK's blocking client (its assertions hold: the broker serves the SDK) and
    with amqplink's: every call's result (models field by field, errors by class) is the same."""
    theirs = _sync(broker, azure_management, "sdk-sync", sample)
    ours = _sync(broker, management, "our-sync", sample)
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    for (label, mine), (_, sdk) in zip(ours, theirs, strict=True):
        assert mine == sdk, label


@pytest.mark.parametrize("sample", SAMPLES)
def test_asyncio_clients_agree(broker: Broker, sample: str) -> None:
    """The same with the asyncio clients (``azure.servicebus.aio.management`` and ours)."""
    theirs = _async(broker, SdkAsyncAdmin, azure_management, "sdk-aio", sample)
    ours = _async(broker, AsyncAdmin, management, "our-aio", sample)
    for (label, mine), (_, sdk) in zip(ours, theirs, strict=True):
        assert mine == sdk, label
