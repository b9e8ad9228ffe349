"""``list_*`` return ``ItemPaged`` (asyncio: ``AsyncItemPaged``): items one page at a time, and
``by_page(continuation_token)`` with the SDK's semantics; the broker's feed honours ``$skip``/``$top``.

The same semantics are checked against azure-core's own ``ItemPaged`` and the SDK's admin
client in ``test_admin_paging_sdk.py`` (sdk tier)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.broker import Broker
from amqplink.broker.config import BrokerConfig, NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from amqplink.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin
from amqplink.servicebus.management import ResourceNotFoundError, ServiceBusAdministrationClient
from amqplink.servicebus.paging import AsyncItemPaged, ItemPaged
from tests.broker.sdkutil import running_broker
from tests.servicebus.admin_util import admin_connection_string

QUEUES = [f"q{i}" for i in range(7)]
RULES = [f"r{i}" for i in range(4)]
CONFIG = BrokerConfig(
    (
        NamespaceConfig(
            queues=tuple(QueueConfig(n) for n in QUEUES),
            topics=(TopicConfig("t", subscriptions=(SubscriptionConfig("s"),)),),
        ),
    )
)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with running_broker(CONFIG, http_port=0) as broker:
        yield broker


def _client(broker: Broker) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        admin_connection_string(broker), connection_verify=broker.http_ca
    )


# -- the semantics, on a model listing -----------------------------------------------------
def _model_fetch(sizes: list[int], calls: list[str | None]) -> Any:
    """Pages of ``sizes`` items; the token of page i is ``"p<i>"``; records the tokens asked for."""

    def fetch(token: str | None) -> tuple[list[int], str | None]:
        calls.append(token)
        index = 0 if token is None else int(token[1:])
        start = sum(sizes[:index])
        items = list(range(start, start + sizes[index]))
        return items, (f"p{index + 1}" if index + 1 < len(sizes) else None)

    return fetch


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=6), resume=st.integers(0, 5))
def test_pages_items_and_tokens(sizes: list[int], resume: int) -> None:
    """Items come page by page, each page fetched once and only when reached; ``by_page`` gives the
    pages and their tokens; a token given back resumes there."""
    calls: list[str | None] = []
    paged = ItemPaged(_model_fetch(sizes, calls))
    assert calls == []  # nothing fetched before the first item is asked for
    assert list(paged) == list(range(sum(sizes)))
    assert calls == [None, *(f"p{i}" for i in range(1, len(sizes)))]
    assert list(paged) == []  # an iterator: used up

    pages = paged.by_page()
    seen, tokens = [], []
    for page in pages:
        seen.append(list(page))
        tokens.append(pages.continuation_token)
    assert [len(p) for p in seen] == sizes
    assert tokens == [*(f"p{i}" for i in range(1, len(sizes))), None]

    at = min(resume, len(sizes) - 1)
    token = None if at == 0 else f"p{at}"
    resumed = [item for page in paged.by_page(token) for item in page]
    assert resumed == list(range(sum(sizes[:at]), sum(sizes)))


@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_async_pages_equal_the_blocking_ones(sizes: list[int]) -> None:
    async def run() -> tuple[list[int], list[list[int]], list[str | None]]:
        async def fetch(token: str | None) -> tuple[list[int], str | None]:
            return _model_fetch(sizes, [])(token)  # type: ignore[no-any-return]

        paged = AsyncItemPaged(fetch)
        items = [item async for item in paged]
        pages, tokens = [], []
        by_page = paged.by_page()
        async for page in by_page:
            pages.append([item async for item in page])
            tokens.append(by_page.continuation_token)
        return items, pages, tokens

    items, pages, tokens = asyncio.run(run())
    blocking = ItemPaged(_model_fetch(sizes, []))
    assert items == list(blocking)
    by_page = blocking.by_page()
    expected = []
    for page in by_page:
        expected.append((list(page), by_page.continuation_token))
    assert list(zip(pages, tokens, strict=True)) == expected


# -- against the broker -------------------------------------------------------------------
def test_by_page_over_the_broker(broker: Broker) -> None:
    """``max_page_size`` pages the listing ($top), ``start_index`` starts it ($skip); tokens resume."""
    with _client(broker) as client:
        assert [q.name for q in client.list_queues()] == QUEUES
        assert next(client.list_queues()).name == "q0"
        pages = client.list_queues(max_page_size=3).by_page()
        first = [q.name for q in next(pages)]
        token = pages.continuation_token
        assert first == QUEUES[:3] and token is not None
        rest = [[q.name for q in page] for page in pages]
        assert rest == [QUEUES[3:6], QUEUES[6:]] and pages.continuation_token is None
        resumed = client.list_queues().by_page(continuation_token=token)
        assert [[q.name for q in page] for page in resumed] == [QUEUES[3:6], QUEUES[6:]]
        assert [q.name for q in client.list_queues(start_index=5)] == QUEUES[5:]
        runtime = client.list_queues_runtime_properties(max_page_size=4).by_page()
        assert [[q.name for q in page] for page in runtime] == [QUEUES[:4], QUEUES[4:]]

        for rule in RULES:
            client.create_rule("t", "s", rule)
        try:
            rules = client.list_rules("t", "s", max_page_size=2).by_page()
            assert [[r.name for r in page] for page in rules] == [["$Default", "r0"], ["r1", "r2"], ["r3"]]
            assert [s.name for page in client.list_subscriptions("t").by_page() for s in page] == ["s"]
            assert [len(list(p)) for p in client.list_topics_runtime_properties().by_page()] == [1]
        finally:
            for rule in RULES:
                client.delete_rule("t", "s", rule)


def test_a_failed_page_carries_its_token(broker: Broker) -> None:
    """As azure-core's: the error raised fetching a page has the token it was fetched with."""
    with _client(broker) as client:
        client.create_topic("gone")
        client.create_subscription("gone", "a")
        client.create_subscription("gone", "b")
        pages = client.list_subscriptions("gone", max_page_size=1).by_page()
        assert [s.name for s in next(pages)] == ["a"]
        token = pages.continuation_token
        client.delete_topic("gone")
        with pytest.raises(ResourceNotFoundError) as caught:
            next(pages)
        assert caught.value.continuation_token == token
        with pytest.raises(ValueError, match="not a continuation token"):
            next(client.list_queues().by_page("https://example/no-query"))


def test_async_by_page_over_the_broker(broker: Broker) -> None:
    async def run() -> tuple[list[str], list[list[str]], list[list[str]]]:
        async with AsyncAdmin.from_connection_string(
            admin_connection_string(broker), connection_verify=broker.http_ca
        ) as client:
            items = [q.name async for q in client.list_queues()]
            pages = client.list_queues(max_page_size=3).by_page()
            paged = [[q.name async for q in page] async for page in pages]
            first = client.list_queues(max_page_size=5).by_page()
            await first.__anext__()
            resumed = [
                [q.name async for q in page] async for page in client.list_queues().by_page(first.continuation_token)
            ]
            return items, paged, resumed

    items, paged, resumed = asyncio.run(run())
    assert items == QUEUES
    assert paged == [QUEUES[:3], QUEUES[3:6], QUEUES[6:]]
    assert resumed == [QUEUES[5:]]  # the token keeps the first call's $top (5)


def test_the_feed_honours_skip_and_top(broker: Broker) -> None:
    """``$skip``/``$top`` as asked (a ``$top`` above 100 is taken as 100, Service Bus's limit); the
    next link keeps the request's api-version."""
    with _client(broker) as client:
        listing = client._core.list_entities("queues", lambda e: e)
        call = listing.page(None, "2017-04", start_index=2, max_page_size=500)
        items, token = client._run(call)
        assert len(items) == len(QUEUES) - 2 and token is None
        items, token = client._run(listing.page(None, "2017-04", start_index=1, max_page_size=2))
        assert len(items) == 2 and token is not None
        assert "$skip=3&$top=2&api-version=2017-04" in token
