"""A session held by a session receiver (azure-servicebus's ``aio.ServiceBusSession``).

The session id and its lock come with the receiver's attach: the broker answers the
``com.microsoft:session-filter`` with the session it locked and puts
``com.microsoft:locked-until-utc`` (.NET ticks) in the attach properties. State and
lock renewal go over ``$management`` (``get-session-state``, ``set-session-state``,
``renew-session-lock``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from amqplink.sbwire.formats import datetime_from_ticks
from amqplink.sbwire.nodes import LOCKED_UNTIL_UTC, SESSION_FILTER

if TYPE_CHECKING:
    from amqplink.servicebus.receiver import ServiceBusReceiver

__all__ = ["LOCKED_UNTIL_UTC", "SESSION_FILTER", "ServiceBusSession", "datetime_from_ticks"]


class ServiceBusSession:
    """The locked session of a session receiver: its id, lock, and state."""

    def __init__(self, session_id: str, receiver: ServiceBusReceiver, locked_until_utc: dt.datetime | None) -> None:
        self._session_id = session_id
        self._receiver = receiver
        self._locked_until_utc = locked_until_utc
        self._lock_lost = False
        self.auto_renew_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"ServiceBusSession(session_id={self._session_id!r}, locked_until_utc={self._locked_until_utc})"

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._session_id

    @property
    def locked_until_utc(self) -> dt.datetime | None:
        """Until when this receiver holds the session."""
        return self._locked_until_utc

    @property
    def _lock_expired(self) -> bool:
        until = self._locked_until_utc
        return self._lock_lost or (until is not None and until <= dt.datetime.now(dt.UTC))

    async def get_state(self, *, timeout: float | None = None, **kwargs: Any) -> bytes | None:
        """The session's state (None when it has none)."""
        return await self._receiver._mgmt_call(lambda m: m.get_session_state(self._session_id), timeout)

    async def set_state(
        self, state: str | bytes | bytearray | None, *, timeout: float | None = None, **kwargs: Any
    ) -> None:
        """Replace the session's state (None clears it)."""
        value = state.encode("utf-8") if isinstance(state, str) else None if state is None else bytes(state)
        await self._receiver._mgmt_call(lambda m: m.set_session_state(self._session_id, value), timeout)

    async def renew_lock(self, *, timeout: float | None = None, **kwargs: Any) -> dt.datetime:
        """Extend the session lock; the new ``locked_until_utc``."""
        until = await self._receiver._mgmt_call(lambda m: m.renew_session_lock(self._session_id), timeout)
        self._locked_until_utc = until
        return until
