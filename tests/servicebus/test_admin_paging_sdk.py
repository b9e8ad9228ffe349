"""``ItemPaged.by_page`` beside azure-core's and the SDK's: the same pages, tokens and errors.

azure-core's ``ItemPaged``/``AsyncItemPaged`` over the same page source give what ours give;
the SDK's admin client and ours, against one broker, list the same pages with the same
continuation tokens (the feed's ``next`` link), and each resumes from the other's token."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.async_paging import AsyncItemPaged as CoreAsyncItemPaged
from azure.core.exceptions import ResourceNotFoundError as CoreNotFound
from azure.core.paging import ItemPaged as CoreItemPaged
from azure.servicebus.aio.management import ServiceBusAdministrationClient as SdkAsyncAdmin
from azure.servicebus.management import ServiceBusAdministrationClient as SdkAdmin
from hypothesis import given
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, QueueConfig
from amqplink.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from amqplink.servicebus.management import ResourceNotFoundError, ServiceBusAdministrationClient
from amqplink.servicebus.paging import AsyncItemPaged, ItemPaged
from tests.broker.sdkutil import running_broker
from tests.servicebus.admin_util import admin_connection_string

pytestmark = pytest.mark.sdk

QUEUES = [f"q{i}" for i in range(7)]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = BrokerConfig((NamespaceConfig(queues=tuple(QueueConfig(n) for n in QUEUES)),))
    with running_broker(config, http_port=0) as broker:
        yield broker


def _source(sizes: list[int], fail_at: int | None) -> Any:
    def fetch(token: str | None) -> tuple[list[int], str | None]:
        index = 0 if token is None else int(token[1:])
        if index == fail_at:
            raise ResourceNotFoundError("gone", status_code=404)
        start = sum(sizes[:index])
        return list(range(start, start + sizes[index])), (f"p{index + 1}" if index + 1 < len(sizes) else None)

    return fetch


def _walk(paged: Any, token: str | None) -> list[Any]:
    """What a user sees: each page's items and the token after it, then the error's token if one is raised."""
    out: list[Any] = []
    pages = paged.by_page(token)
    try:
        for page in pages:
            out.append((list(page), pages.continuation_token))
    except ResourceNotFoundError as exc:
        out.append(("error", exc.continuation_token))
    return out


@given(
    sizes=st.lists(st.integers(0, 4), min_size=1, max_size=6),
    fail_at=st.none() | st.integers(0, 5),
    start=st.integers(0, 5),
)
def test_same_as_azure_cores_item_paged(sizes: list[int], fail_at: int | None, start: int) -> None:
    token = None if start == 0 or start >= len(sizes) else f"p{start}"
    fetch = _source(sizes, fail_at)
    ours = ItemPaged(fetch)
    theirs = CoreItemPaged(fetch, lambda page: (page[1], iter(page[0])))
    assert _walk(ours, token) == _walk(theirs, token)
    if fail_at is None:
        assert list(ours) == list(theirs)


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=6), fail_at=st.none() | st.integers(0, 5))
def test_same_as_azure_cores_async_item_paged(sizes: list[int], fail_at: int | None) -> None:
    source = _source(sizes, fail_at)

    async def fetch(token: str | None) -> tuple[list[int], str | None]:
        return source(token)  # type: ignore[no-any-return]

    async def extract(page: tuple[list[int], str | None]) -> tuple[str | None, list[int]]:
        return page[1], page[0]

    async def walk(paged: Any) -> list[Any]:
        out: list[Any] = []
        pages = paged.by_page()
        try:
            async for page in pages:
                out.append(([item async for item in page], pages.continuation_token))
        except ResourceNotFoundError as exc:
            out.append(("error", exc.continuation_token))
        return out

    async def run() -> tuple[list[Any], list[Any]]:
        return await walk(AsyncItemPaged(fetch)), await walk(CoreAsyncItemPaged(fetch, extract))

    ours, theirs = asyncio.run(run())
    assert ours == theirs


def _pages(paged: Any, token: str | None = None) -> list[tuple[list[str], str | None]]:
    pages = paged.by_page(token)
    return [([q.name for q in page], pages.continuation_token) for page in pages]


def test_sdk_and_ours_page_the_broker_alike(broker: Broker) -> None:
    cs = admin_connection_string(broker)
    with (
        SdkAdmin.from_connection_string(cs, connection_verify=broker.http_ca) as sdk,
        ServiceBusAdministrationClient.from_connection_string(cs, connection_verify=broker.http_ca) as ours,
    ):
        theirs = _pages(sdk.list_queues(max_page_size=3))
        assert _pages(ours.list_queues(max_page_size=3)) == theirs
        assert [names for names, _ in theirs] == [QUEUES[:3], QUEUES[3:6], QUEUES[6:]]
        token = theirs[0][1]
        assert token is not None and theirs[-1][1] is None
        # each resumes from the other's token
        assert _pages(ours.list_queues(), token) == theirs[1:]
        assert _pages(sdk.list_queues(), _pages(ours.list_queues(max_page_size=3))[0][1]) == theirs[1:]
        assert _pages(ours.list_queues(start_index=4)) == _pages(sdk.list_queues(start_index=4))
        assert _pages(ours.list_queues_runtime_properties(max_page_size=5)) == _pages(
            sdk.list_queues_runtime_properties(max_page_size=5)
        )
        for admin in (sdk, ours):
            admin.create_topic("gone")
            for sub in ("a", "b"):
                admin.create_subscription("gone", sub)
            pages = admin.list_subscriptions("gone", max_page_size=1).by_page()
            next(pages)
            admin.delete_topic("gone")
            with pytest.raises(CoreNotFound) as caught:
                next(pages)
            assert caught.value.continuation_token == pages.continuation_token is not None


def test_sdk_and_ours_page_the_broker_alike_asyncio(broker: Broker) -> None:
    cs = admin_connection_string(broker)

    async def pages(paged: Any) -> list[tuple[list[str], str | None]]:
        by_page = paged.by_page()
        return [([q.name async for q in page], by_page.continuation_token) async for page in by_page]

    async def run() -> tuple[list[Any], list[Any]]:
        async with (
            SdkAsyncAdmin.from_connection_string(cs, connection_verify=broker.http_ca) as sdk,
            AsyncAdmin.from_connection_string(cs, connection_verify=broker.http_ca) as ours,
        ):
            return await pages(sdk.list_queues(max_page_size=4)), await pages(ours.list_queues(max_page_size=4))

    theirs, ours = asyncio.run(run())
    assert ours == theirs
    assert [names for names, _ in ours] == [QUEUES[:4], QUEUES[4:]]
