"""A Service Bus settlement on the receive link, started when ``complete_message`` (or
abandon, defer, dead-letter) is called: what the call returns, awaited for the broker's
confirmation (the link is in rcv-settle-mode ``second``, 2.8.3).

It stands in for the coroutine of an ``async def`` without costing an asyncio Task when
gathered: it is an :class:`asyncio.Future` (``asyncio.gather``, ``ensure_future`` and
``wait_for`` take it as it is, with no Task around it) that also speaks the coroutine
protocol (``send``/``throw``/``close``), so ``asyncio.create_task`` drives it as it drives
a coroutine. Its result or error is the coroutine's: the broker's refusal (e.g. lock lost)
or the link's failure, mapped to the Service Bus exceptions, is raised where it is awaited.

Unlike a coroutine, it does not wait to be awaited: the disposition leaves at the end of
the loop turn in which the call was made, and the broker's confirmation marks the message
settled whether or not anyone awaits it. So a call never awaited settles the message
(where an ``async def`` would send nothing and warn; an error nobody awaits is logged by
asyncio as never retrieved); cancelling the wait (the awaiting task, ``wait_for``'s
time-out) cancels only the wait, and a later settle call of a message the broker
confirmed meanwhile raises ``MessageAlreadySettled``. A settle call while another one of
the same message still waits for the broker raises ``MessageAlreadySettled`` too and
sends nothing: a message is settled once. Called off the loop thread or for a deferred
message, the settle methods return a plain coroutine instead (the blocking facade calls
them on the loop thread, and waits for the settlement through :meth:`LinkSettlement.report_to`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any

from amqplink.aio.errors import SettlementError
from amqplink.aio.receiver import SettlementWaiter
from amqplink.servicebus.management_node import DispositionStatus
from amqplink.servicebus.message import ServiceBusReceivedMessage

if TYPE_CHECKING:
    from amqplink.servicebus.receiver import ServiceBusReceiver

__all__ = ["LinkSettlement"]


class LinkSettlement(asyncio.Future[None], Coroutine[Any, Any, None], SettlementWaiter):
    """One message's settlement on the receive link; done when the broker confirmed it."""

    __slots__ = ("_action", "_message", "_receiver", "_report", "_status")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        receiver: ServiceBusReceiver,
        message: ServiceBusReceivedMessage,
        action: str,
        status: DispositionStatus,
    ) -> None:
        super().__init__(loop=loop)
        self._receiver = receiver
        self._message = message
        self._action = action
        self._status = status
        self._report: Callable[[asyncio.Future[None]], None] | None = None

    def report_to(self, report: Callable[[asyncio.Future[None]], None]) -> None:
        """Call ``report`` with this settlement once it is decided (at once if it is): as the
        broker's confirmation is handled, not one loop turn later as a done-callback is (what
        the blocking facade waits with)."""
        if self.done():
            report(self)
        else:
            self._report = report

    def _decided(self) -> None:
        report, self._report = self._report, None
        if report is not None:
            report(self)

    # -- told by the receive link (SettlementWaiter) ------------------------------------
    def confirmed(self) -> None:
        """The broker settled the delivery: its outcome is the answer (a rejected one is a
        refusal, e.g. the lock was lost); once accepted, the message is settled."""
        receiver = self._receiver
        try:
            receiver._check_answer(self._message._delivery, self._action, self._status)
        except Exception as error:
            if not self.done():
                self.set_exception(error)
                self._decided()
            return
        receiver._mark_settled(self._message)
        if not self.done():
            self.set_result(None)
            self._decided()

    def failed(self, error: SettlementError) -> None:
        """The link failed first: the message stays unsettled (its lock is lost with the link)."""
        if not self.done():
            self.set_exception(self._receiver._link_error(error))
            self.exception()  # one failure, one report: the awaiting caller gets it
            self._decided()

    # -- the coroutine protocol (asyncio.create_task drives the object with it) ----------
    def send(self, value: Any) -> Any:
        """Step as a coroutine awaiting this future steps: yield the future while it is
        pending, then finish with its result (raising its exception)."""
        if not self.done():
            self._asyncio_future_blocking = True
            return self
        raise StopIteration(self.result())

    def throw(
        self,
        typ: type[BaseException] | BaseException,
        val: BaseException | object = None,
        tb: TracebackType | None = None,
    ) -> Any:
        """Raise what the driving task throws in (its cancellation, the future's exception):
        a coroutine awaiting this future would not catch it."""
        if isinstance(typ, BaseException):
            raise typ
        raise val if isinstance(val, BaseException) else typ()

    def close(self) -> None:
        """Nothing to end: the settlement is under way (closing an un-awaited coroutine
        does not cancel what it awaits either)."""
