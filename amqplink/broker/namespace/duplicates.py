"""Duplicate detection: a message-id seen within the history window is accepted and dropped.

"Enabling duplicate detection helps keep track of the application-controlled
MessageId of all messages sent into a queue or topic during a specified time
window. If any new message is sent with MessageId that was logged during the time
window, the message is reported as accepted (the send operation succeeds), but
the newly sent message is instantly ignored and dropped." (Service Bus docs)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_REMEMBERED_IDS", "DuplicateDetector"]

MAX_REMEMBERED_IDS = 1_000_000
"""Message ids one entity remembers at most; the oldest are forgotten first."""


def _key(message_id: Any) -> Any:
    """Ids of different types never match (the int 1 is not the string "1")."""
    return message_id if isinstance(message_id, str) else (type(message_id).__name__, message_id)


class DuplicateDetector:
    """Message ids seen in the last ``window`` seconds, oldest first."""

    __slots__ = ("_seen", "dropped", "limit", "on_seen", "window")

    def __init__(self, window: float, limit: int = MAX_REMEMBERED_IDS) -> None:
        self.window = window
        self.limit = limit
        self._seen: OrderedDict[Any, float] = OrderedDict()
        self.on_seen: Callable[[Any, float], None] | None = None
        """Told of every id recorded (a durable store keeps them for the window)."""
        self.dropped = 0
        """Messages found duplicates (accepted and dropped) since this detector was made; a
        count for observers (``amqplink demo`` shows it), not kept across a restart."""

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
        key = _key(message_id)
        if key in self._seen:
            self.dropped += 1
            return True
        self._seen[key] = now
        if self.on_seen is not None:
            self.on_seen(message_id, now)
        return False

    def remember(self, message_id: Any, seen_at: float) -> None:
        """Take back an id recorded at ``seen_at`` (ids must come oldest first)."""
        key = _key(message_id)
        self._seen[key] = seen_at

    def forget(self, message_id: Any) -> None:
        """Drop a recorded id (its send was refused: a retry is not a duplicate)."""
        self._seen.pop(_key(message_id), None)

    def __len__(self) -> int:
        return len(self._seen)
