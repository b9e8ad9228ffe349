"""What senders and receivers share: attaching, refusal, detaching, failing waiters."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import AMQPError, AttachTimeout, LinkDetachedError
from amqplink.engine.events import Event, LinkAttached, LinkDetached
from amqplink.engine.link import Link
from amqplink.engine.session import Session

if TYPE_CHECKING:
    from amqplink.aio.connection import Connection

__all__ = ["LinkBase"]

log = logging.getLogger(__name__)

DETACH_TIMEOUT = 5.0


class LinkBase:
    """One attached link, owned by a :class:`~amqplink.aio.connection.Connection`."""

    kind = "link"
    link: Link

    def __init__(self, connection: Connection, session: Session, address: str | None) -> None:
        self.connection = connection
        self.session = session
        self.address = address
        self.error: AMQPError | None = None
        self._loop = connection._loop
        self._protocol = connection.protocol
        self._attached: asyncio.Future[None] = self._loop.create_future()
        self._detached: asyncio.Future[None] = self._loop.create_future()

    def __repr__(self) -> str:
        state = "detached" if self._detached.done() else "attached" if self._attached.done() else "attaching"
        return f"<amqplink {self.kind} {self.address!r} on {self.connection.endpoint.url} {state}>"

    @property
    def name(self) -> str:
        """The link name (unique per connection and role)."""
        return self.link.name

    @property
    def closed(self) -> bool:
        """True once the link is detached (by either side) or failed."""
        return self._detached.done()

    def _what(self) -> str:
        """How errors and log lines name the link: by its entity (link names are generated ids)."""
        direction = "from" if self.kind == "receiver" else "to"
        return f"{self.kind} {direction} {self.address!r} on {self.connection.endpoint.url}"

    # -- attach -----------------------------------------------------------------------
    def _start(self, link: Link) -> None:
        self.link = link
        link.context = self
        self.connection._register(self)
        self._protocol.schedule_flush()

    async def _attach(self, timeout: float, deadline: float | None = None) -> None:
        """Wait for the peer's attach until ``deadline`` (loop time), else ``timeout`` s from now."""
        remaining = timeout if deadline is None else max(0.0, deadline - self._loop.time())
        try:
            await asyncio.wait_for(asyncio.shield(self._attached), remaining)
        except TimeoutError:
            self.link.detach()
            self._protocol.schedule_flush()
            failure = AttachTimeout(
                f"{self._what()}: the peer did not answer attach within {timeout} s;"
                " the link was detached (does the peer support this kind of link?)"
            )
            self._fail(failure)
            raise failure from None

    def _refused(self) -> bool:
        """True if the peer's attach carries a null terminus: a refusal, a detach follows."""
        return False

    def _on_attached(self) -> None:
        """Hook: the link is usable (credit grants and such go here)."""

    # -- events -----------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if type(event) is LinkAttached:
            if not self._refused() and not self._attached.done():
                log.info("%s attached", self._what())
                self._attached.set_result(None)
                self._on_attached()
        elif type(event) is LinkDetached:
            self._on_link_detached(event)

    def _on_link_detached(self, event: LinkDetached) -> None:
        # The engine answers a detach the peer started; ``by_peer`` tells who started it.
        if event.by_peer:
            failure = LinkDetachedError.from_error(
                f"{self._what()} was detached by the peer", event.error, _hint(event.error)
            )
            if event.error is not None:
                log.info("%s", failure)  # the caller gets the error itself (not WARNING too)
            self._fail(failure)
        elif event.error is not None:
            self._fail(LinkDetachedError.from_error(f"{self._what()} was detached on a protocol error", event.error))
        else:
            self._fail(None)  # the peer's answer to our detach

    def _fail(self, error: AMQPError | None) -> None:
        """End the link for this side; waiters get ``error`` (None: a clean close)."""
        if self._detached.done():
            return
        self.error = error
        self.connection._unregister(self)
        failure = error or LinkDetachedError(f"{self._what()} is closed")
        if not self._attached.done():
            self._attached.set_exception(failure)
            self._attached.exception()
        self._detached.set_result(None)
        self._on_failed(failure)

    def _on_failed(self, failure: AMQPError) -> None:
        """Hook: fail whatever the subclass has in flight."""

    def _flush_local(self) -> None:
        """Hook: push pending work into the engine before the connection closes."""

    def check_usable(self) -> None:
        """Raise the link's error if it can no longer be used."""
        if self._detached.done():
            raise self.error or LinkDetachedError(f"{self._what()} is closed")

    # -- close ------------------------------------------------------------------------
    async def close(self) -> None:
        """Detach with closed=true (2.6.6) and wait for the peer's detach."""
        if not self._detached.done() and not self.link.detach_sent:
            self._flush_local()
            self.link.detach()
            self._protocol.flush()
            try:
                await asyncio.wait_for(asyncio.shield(self._detached), DETACH_TIMEOUT)
            except TimeoutError:
                log.warning("%s: no detach from the peer within %s s", self._what(), DETACH_TIMEOUT)
                self._fail(None)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _hint(error: Any) -> str:
    condition = str(error.condition) if error is not None and error.condition is not None else ""
    return {
        "amqp:not-found": "check the entity address exists",
        "amqp:unauthorized-access": "check the credentials and the rights on this entity",
        "amqp:resource-limit-exceeded": "the peer is at a limit; retry later",
        "amqp:link:stolen": "another link with the same name took over",
        "amqp:link:detach-forced": "the peer forced a detach; reattach to continue",
    }.get(condition, "")
