"""``list_queue_sessions`` / ``list_subscription_sessions``: the entity's session ids, page by
page over ``$management`` ``com.microsoft:get-message-sessions`` (as the SDK's
``_session_browser``: pages of 100 by ``skip``; ``last-updated-time`` = .NET's
DateTime.MaxValue for "every session with active messages or stored state", else the
sessions whose state was set after that time; ``timeout`` bounds every page together),
returned as :class:`~amqplink.servicebus.paging.AsyncItemPaged` (blocking: ``ItemPaged``) with
the SDK's continuation token, the count of ids to skip.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time

from amqplink.servicebus._base import ConnectionHolder
from amqplink.servicebus.exceptions import OperationTimeoutError
from amqplink.servicebus.management_node import ManagementClient
from amqplink.servicebus.paging import AsyncItemPaged
from amqplink.servicebus.retry import RetryPolicy, run_with_retry

__all__ = ["LIST_ALL_MS", "PAGE_SIZE", "SessionLister", "last_updated_ms", "next_skip"]

LIST_ALL_MS = 253402300800000
"""The SDK's ``_MAX_DATETIME_MS`` (10000-01-01T00:00:00Z): the default listing."""
PAGE_SIZE = 100
"""Session ids asked for per request (the SDK's ``_PAGE_SIZE``)."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def last_updated_ms(state_updated_after: dt.datetime | None) -> int:
    """The ``last-updated-time`` to send: :data:`LIST_ALL_MS` without a filter; a naive time is UTC."""
    if state_updated_after is None:
        return LIST_ALL_MS
    aware = (
        state_updated_after.replace(tzinfo=dt.UTC)
        if state_updated_after.tzinfo is None
        else state_updated_after.astimezone(dt.UTC)
    )
    return (aware - _EPOCH) // dt.timedelta(milliseconds=1)


class SessionLister:
    """Pages of one entity's session ids, on the client's connection, under its retry policy."""

    def __init__(
        self,
        holder: ConnectionHolder,
        entity: str,
        policy: RetryPolicy,
        *,
        state_updated_after: dt.datetime | None = None,
        timeout: float | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("The timeout must be greater than 0.")
        self.holder = holder
        self.entity = entity
        self.policy = policy
        self.last_updated = last_updated_ms(state_updated_after)
        self.timeout = timeout
        self._deadline: float | None = None
        self._management: ManagementClient | None = None

    async def page(self, skip: int) -> list[str]:
        """The ids from ``skip`` on (at most :data:`PAGE_SIZE`); [] past the last."""
        budget = self.policy.timeout
        if self.timeout is not None:
            if self._deadline is None:
                self._deadline = time.monotonic() + self.timeout
            budget = self._deadline - time.monotonic()
            if budget <= 0:
                raise OperationTimeoutError(
                    description="Listing sessions did not complete within the specified timeout.", entity=self.entity
                )

        async def attempt(_remaining: float) -> list[str]:
            mgmt = self._management
            if mgmt is None or mgmt.closed:
                conn = await self.holder.authorize(self.entity)
                mgmt = self._management = await ManagementClient.open(conn, self.entity)
            return await mgmt.get_message_sessions(self.last_updated, skip, PAGE_SIZE)

        policy = self.policy if budget == self.policy.timeout else dataclasses.replace(self.policy, timeout=budget)
        return await run_with_retry(attempt, policy, entity=self.entity)

    async def close(self) -> None:
        """Detach the ``$management`` link pair (the client's connection stays)."""
        mgmt, self._management = self._management, None
        if mgmt is not None:
            await mgmt.close()

    async def fetch(self, token: str | None) -> tuple[list[str], str | None]:
        """The page ``token`` names (the count to skip, as text, as the SDK's ``_session_browser``;
        None: the first) and the next page's token; after the last page (a short one) the
        ``$management`` link pair is closed and the token is None."""
        skip = int(token) if token else 0
        ids = await self.page(skip)
        after = next_skip(skip, ids)
        if after is None:
            await self.close()
        return ids, None if after is None else str(after)

    def paged(self) -> AsyncItemPaged[str]:
        """The ids as the SDK gives them: ``async for``, or ``by_page(continuation_token)``."""
        return AsyncItemPaged(self.fetch)


def next_skip(skip: int, ids: list[str]) -> int | None:
    """Where the next page starts, or None after a short (the last) page."""
    return None if len(ids) < PAGE_SIZE else skip + len(ids)
