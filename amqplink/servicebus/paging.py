"""``ItemPaged`` and ``AsyncItemPaged``: what the paged listings return, with azure-core's behaviour.

The SDK's paged listings (the administration client's ``list_*``, ``list_queue_sessions`` /
``list_subscription_sessions``) return azure-core's ``ItemPaged`` (asyncio: ``AsyncItemPaged``):
an iterator of the items that fetches one page at a time, and
``by_page(continuation_token=None)``, a fresh iterator of pages (each an iterator of its items)
whose ``continuation_token`` names the page after the last one read (``None`` once the last page
is read), so a later ``by_page(that_token)`` goes on from there. Paging stops after the first
call that leaves no token. An error raised while fetching a page that has a
``continuation_token`` attribute (azure-core's ``AzureError`` and ours) carries the token it was
fetched with, as azure-core sets it.

A page is fetched by ``fetch(token)`` -> ``(items, next_token)``; what a token is, is the
caller's business (the management API: the feed's ``next`` link; sessions: the count to skip,
as text; both as in the SDK). Nothing here imports azure-core.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

__all__ = ["AsyncItemPaged", "AsyncPageIterator", "ItemPaged", "PageIterator"]

T = TypeVar("T")
Page = tuple[Sequence[T], str | None]
"""A page's items and the token of the next page (``None``: the last page)."""


def _mark(error: Exception, token: str | None) -> None:
    """Record the token a failed page was fetched with (azure-core's ``AzureError.continuation_token``)."""
    if hasattr(error, "continuation_token") and not error.continuation_token:
        error.continuation_token = token


class _Pages:
    """Where a page iterator is: the token of the next page, and whether the first was fetched."""

    def __init__(self, continuation_token: str | None) -> None:
        self.continuation_token = continuation_token
        """The token of the next page; ``None`` once the last page is read."""
        self._fetched = False

    def _finished(self) -> bool:
        return self.continuation_token is None and self._fetched

    def _read(self, page: Page[T]) -> Sequence[T]:
        self._fetched = True
        items, self.continuation_token = page
        return items


class PageIterator(_Pages, Iterator[Iterator[T]]):
    """The pages of a listing from ``continuation_token`` on (None: from the first)."""

    def __init__(self, fetch: Callable[[str | None], Page[T]], continuation_token: str | None = None) -> None:
        super().__init__(continuation_token)
        self._fetch = fetch

    def __iter__(self) -> PageIterator[T]:
        return self

    def __next__(self) -> Iterator[T]:
        if self._finished():
            raise StopIteration
        try:
            page = self._fetch(self.continuation_token)
        except Exception as error:
            _mark(error, self.continuation_token)
            raise
        return iter(self._read(page))


class ItemPaged(Iterator[T]):
    """The items of a listing, a page fetched when the one before is used up; :meth:`by_page` for pages."""

    def __init__(self, fetch: Callable[[str | None], Page[T]]) -> None:
        self._fetch = fetch
        self._items: Iterator[T] | None = None

    def by_page(self, continuation_token: str | None = None) -> PageIterator[T]:
        """A new iterator of pages (each an iterator of items), from ``continuation_token`` on."""
        return PageIterator(self._fetch, continuation_token)

    def __iter__(self) -> ItemPaged[T]:
        return self

    def __next__(self) -> T:
        if self._items is None:
            self._items = itertools.chain.from_iterable(self.by_page())
        return next(self._items)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {hex(id(self))}>"


class _AsyncPage(AsyncIterator[T]):
    """One page's items, for ``async for``."""

    def __init__(self, items: Sequence[T]) -> None:
        self._items = iter(items)

    def __aiter__(self) -> _AsyncPage[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None


class AsyncPageIterator(_Pages, AsyncIterator[AsyncIterator[T]]):
    """The asyncio :class:`PageIterator`: ``async for page in ...``, then ``async for item in page``."""

    def __init__(
        self, fetch: Callable[[str | None], Awaitable[Page[T]]], continuation_token: str | None = None
    ) -> None:
        super().__init__(continuation_token)
        self._fetch = fetch

    def __aiter__(self) -> AsyncPageIterator[T]:
        return self

    async def __anext__(self) -> AsyncIterator[T]:
        if self._finished():
            raise StopAsyncIteration
        try:
            page = await self._fetch(self.continuation_token)
        except Exception as error:
            _mark(error, self.continuation_token)
            raise
        return _AsyncPage(self._read(page))


class AsyncItemPaged(AsyncIterator[T]):
    """The asyncio :class:`ItemPaged`: ``async for item in ...``; :meth:`by_page` for pages."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page[T]]]) -> None:
        self._fetch = fetch
        self._pages: AsyncPageIterator[T] | None = None
        self._page: AsyncIterator[T] | None = None

    def by_page(self, continuation_token: str | None = None) -> AsyncPageIterator[T]:
        """A new async iterator of pages (each an async iterator of items), from ``continuation_token`` on."""
        return AsyncPageIterator(self._fetch, continuation_token)

    def __aiter__(self) -> AsyncItemPaged[T]:
        return self

    async def __anext__(self) -> T:
        if self._pages is None:
            self._pages = self.by_page()
        while True:
            if self._page is None:
                self._page = await self._pages.__anext__()  # StopAsyncIteration ends the items too
            try:
                return await self._page.__anext__()
            except StopAsyncIteration:
                self._page = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at {hex(id(self))}>"
