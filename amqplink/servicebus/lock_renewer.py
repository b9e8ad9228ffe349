"""Automatic lock renewal on the client's own event loop (azure-servicebus's ``AutoLockRenewer``).

Each registered message or session gets one task on the event loop that runs the
client's connection, so a busy or blocking callback cannot starve it (in the blocking
facade that loop runs in its own thread while user code runs). The task renews ahead
of expiry (:func:`renew_ahead`), stops when the message is settled, the receiver is
closed, the renewer is closed, or ``max_lock_renewal_duration`` has passed, and
reports a failure on the renewable (``auto_renew_error``) and to
``on_lock_renew_failure`` instead of swallowing it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from amqplink.servicebus.exceptions import AutoLockRenewFailed, AutoLockRenewTimeout, ServiceBusError
from amqplink.servicebus.message import ServiceBusReceivedMessage
from amqplink.servicebus.session import ServiceBusSession

__all__ = ["RENEW_AHEAD", "AutoLockRenewer", "renew_ahead"]

log = logging.getLogger(__name__)

RENEW_AHEAD = 10.0
"""Renew this many seconds before the lock expires (the SDK's renew period) ..."""
RENEW_FRACTION = 0.5
"""... or, for locks shorter than twice that, when this fraction of the lock is left."""

Renewable = ServiceBusReceivedMessage | ServiceBusSession
FailureCallback = Callable[[Renewable, BaseException | None], Awaitable[None] | None]


def renew_ahead(lock_span: float) -> float:
    """Seconds before expiry to renew a lock that lasts ``lock_span`` seconds."""
    return min(RENEW_AHEAD, max(0.0, lock_span) * RENEW_FRACTION)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AutoLockRenewer:
    """Keeps message and session locks alive in the background; ``register`` each one."""

    def __init__(
        self,
        max_lock_renewal_duration: float = 300,
        on_lock_renew_failure: FailureCallback | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._max_lock_renewal_duration = max_lock_renewal_duration
        self._on_lock_renew_failure = on_lock_renew_failure
        self._tasks: dict[int, asyncio.Task[None]] = {}  # by id() of the renewable
        self._shutdown = False

    def __repr__(self) -> str:
        return f"<AutoLockRenewer {len(self._tasks)} renewing{', closed' if self._shutdown else ''}>"

    async def __aenter__(self) -> AutoLockRenewer:
        if self._shutdown:
            raise ServiceBusError("The AutoLockRenewer has already been shutdown. Please create a new instance.")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def renewing(self) -> int:
        """Locks being kept alive now."""
        return len(self._tasks)

    def register(
        self,
        receiver: Any,
        renewable: Renewable,
        max_lock_renewal_duration: float | None = None,
        on_lock_renew_failure: FailureCallback | None = None,
    ) -> None:
        """Keep ``renewable``'s lock (a message of ``receiver``, or its session) for up to
        ``max_lock_renewal_duration`` seconds (default: the renewer's). Call on the event loop."""
        if not isinstance(renewable, ServiceBusReceivedMessage | ServiceBusSession):
            raise TypeError(
                "AutoLockRenewer only supports registration of types ServiceBusReceivedMessage (via a receiver's"
                " receive methods) and ServiceBusSession (via a session receiver's property receiver.session)."
            )
        if self._shutdown:
            raise ServiceBusError("The AutoLockRenewer has already been shutdown. Please create a new instance.")
        if renewable.locked_until_utc is None:
            raise ValueError(
                "Only ServiceBusReceivedMessage objects in PEEK_LOCK receive mode may be lock-renewed (not"
                " messages received in RECEIVE_AND_DELETE mode, nor peeked ones)."
            )
        loop = asyncio.get_running_loop()
        duration = self._max_lock_renewal_duration if max_lock_renewal_duration is None else max_lock_renewal_duration
        task = loop.create_task(
            self._renew_until(
                receiver, renewable, loop.time() + duration, on_lock_renew_failure or self._on_lock_renew_failure
            )
        )
        key = id(renewable)
        previous = self._tasks.get(key)
        if previous is not None:
            previous.cancel()  # registered again: the newer registration decides
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._tasks.pop(key) if self._tasks.get(key) is done else None)

    def _settled(self, renewable: Renewable) -> None:
        """The receiver settled ``renewable``: stop its renewal now (not at its next wake-up)."""
        task = self._tasks.get(id(renewable))
        if task is not None:
            task.cancel()

    def _stopped(self, receiver: Any, renewable: Renewable) -> bool:
        if self._shutdown or getattr(receiver, "_closed", False):
            return True
        return bool(getattr(renewable, "_settled", False))

    async def _renew_until(
        self, receiver: Any, renewable: Renewable, deadline: float, callback: FailureCallback | None
    ) -> None:
        """Renew ``renewable``'s lock before each expiry until ``deadline`` (loop time), its
        settlement, the receiver's close or this renewer's shutdown; ``callback`` on a failure."""
        loop = asyncio.get_running_loop()
        error: BaseException | None = None
        clean = False
        until = renewable.locked_until_utc
        assert until is not None
        span = (until - _utcnow()).total_seconds()
        try:
            while True:
                if self._stopped(receiver, renewable):
                    clean = True
                    break
                until = renewable.locked_until_utc
                if until is None or renewable._lock_expired:
                    error = AutoLockRenewFailed("the lock expired or was lost before it could be renewed")
                    break
                left = (until - _utcnow()).total_seconds()
                if loop.time() >= deadline:
                    raise AutoLockRenewTimeout(f"Auto-renew period elapsed; the lock expires in {left:.1f} s.")
                wait = left - renew_ahead(span)
                if wait > 0:
                    # One wake-up per renewal: settling cancels the task (_settled), closing too.
                    await asyncio.sleep(min(wait, max(0.0, deadline - loop.time())))
                    continue
                if isinstance(renewable, ServiceBusSession):
                    new_until = await renewable.renew_lock()
                else:
                    new_until = await receiver.renew_message_lock(renewable)
                span = (new_until - _utcnow()).total_seconds()
                log.debug("%s: lock renewed until %s", getattr(receiver, "entity_name", "?"), new_until)
        except AutoLockRenewTimeout as exc:
            error = exc
            renewable.auto_renew_error = exc
            clean = not renewable._lock_expired
        except asyncio.CancelledError:
            clean = True
            raise
        except Exception as exc:  # every renewal failure is reported, none is swallowed
            log.warning("%s: automatic lock renewal failed: %s", getattr(receiver, "entity_name", "?"), exc)
            error = AutoLockRenewFailed(f"Failed to auto-renew lock: {exc}", error=exc)
        finally:
            if error is not None and not isinstance(error, AutoLockRenewTimeout):
                renewable.auto_renew_error = error
            if callback is not None and not clean:
                await _call(callback, renewable, error)

    async def close(self) -> None:
        """Stop renewing every lock."""
        self._shutdown = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _call(callback: FailureCallback, renewable: Renewable, error: BaseException | None) -> None:
    try:
        result = callback(renewable, error)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("on_lock_renew_failure raised")
