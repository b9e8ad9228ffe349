"""Duplicate detection: a message-id seen within the history window is accepted and dropped.

"Enabling duplicate detection helps keep track of the application-controlled
MessageId of all messages sent into a queue or topic during a specified time
window. If any new message is sent with MessageId that was logged during the time
window, the message is reported as accepted (the send operation succeeds), but
the newly sent message is instantly ignored and dropped." (Service Bus docs)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["MAX_REMEMBERED_IDS", "DuplicateDetector"]

MAX_REMEMBERED_IDS = 1_000_000
"""Message ids one entity remembers at most; the oldest are forgotten first."""


class DuplicateDetector:
    """Message ids seen in the last ``window`` seconds, oldest first."""

    __slots__ = ("_seen", "limit", "window")

    def __init__(self, window: float, limit: int = MAX_REMEMBERED_IDS) -> None:
        self.window = window
        self.limit = limit
        self._seen: OrderedDict[Any, float] = OrderedDict()

    def _prune(self, now: float) -> None:
        seen = self._seen
        horizon = now - self.window
        while seen:
            at = next(iter(seen.values()))
            if at > horizon and len(seen) <= self.limit:
                break
            seen.popitem(last=False)

    def is_duplicate(self, message_id: Any, now: float) -> bool:
        """Whether ``message_id`` was seen within the window; records it if not."""
        if message_id is None:
            return False
        self._prune(now)
        key = (type(message_id).__name__, message_id) if not isinstance(message_id, str) else message_id
        if key in self._seen:
            return True
        self._seen[key] = now
        return False

    def __len__(self) -> int:
        return len(self._seen)
