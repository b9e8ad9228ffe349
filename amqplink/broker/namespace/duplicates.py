"""Duplicate detection: a message-id seen within the history window is accepted and dropped.

"Enabling duplicate detection helps keep track of the application-controlled
MessageId of all messages sent into a queue or topic during a specified time
window. If any new message is sent with MessageId that was logged during the time
window, the message is reported as accepted (the send operation succeeds), but
the newly sent message is instantly ignored and dropped." (Service Bus docs)

An id is *logged* only once its message is stored: a send that is refused (quota,
size, a fragment down, a full disk, an injected fault, a transaction rolled back)
leaves no trace, so that its retry is stored and not taken for a duplicate. The
detector therefore answers two separate questions: :meth:`DuplicateDetector.fresh`
(which of these messages are not duplicates; nothing recorded) before the store, and
:meth:`DuplicateDetector.record_all` after it succeeded. The namespace does both in one
place (:meth:`~amqplink.broker.namespace.namespace.Namespace.store`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["MAX_REMEMBERED_IDS", "DuplicateDetector", "Identified"]

MAX_REMEMBERED_IDS = 1_000_000
"""Message ids one entity remembers at most; the oldest are forgotten first."""


class Identified(Protocol):
    """What the detector reads of a message: its id (None: no id, never a duplicate)."""

    @property
    def message_id(self) -> Any:
        """The message's id (None: it has none)."""


M = TypeVar("M", bound=Identified)


class _Id:
    """A message id alone, as :meth:`DuplicateDetector.record_all` reads a message."""

    __slots__ = ("message_id",)

    def __init__(self, message_id: Any) -> None:
        self.message_id = message_id


def _key(message_id: Any) -> Any:
    """Ids of different types never match (the int 1 is not the string "1")."""
    return message_id if isinstance(message_id, str) else (type(message_id).__name__, message_id)


class DuplicateDetector:
    """Message ids of the messages stored in the last ``window`` seconds, oldest first.

    The window is fixed from the first time an id was stored: a duplicate does not extend it
    ("the feature will de-duplicate any message received after a message with the same ID has
    been seen once", Azure/azure-service-bus#243)."""

    __slots__ = ("_seen", "dropped", "limit", "on_seen", "window")

    def __init__(self, window: float, limit: int = MAX_REMEMBERED_IDS) -> None:
        self.window = window
        self.limit = limit
        self._seen: OrderedDict[Any, float] = OrderedDict()
        self.on_seen: Callable[[Any, float], None] | None = None
        """Told of every id recorded (a durable store keeps them for the window)."""
        self.dropped = 0
        """Messages found duplicates (accepted and dropped) since this detector was made, counted
        by the namespace once the send that held them was accepted; for observers (``amqplink
        demo`` shows it), not kept across a restart."""

    def _prune(self, now: float) -> None:
        seen = self._seen
        horizon = now - self.window
        while seen:
            at = next(iter(seen.values()))
            if at > horizon and len(seen) <= self.limit:
                break
            seen.popitem(last=False)

    def seen(self, message_id: Any, now: float) -> bool:
        """Whether a message with ``message_id`` was stored within the window (records nothing)."""
        if message_id is None:
            return False
        self._prune(now)
        return _key(message_id) in self._seen

    def fresh(self, messages: list[M], now: float) -> list[M]:
        """Those of ``messages`` (one send, in order) that are no duplicates: their id was not
        stored within the window, nor given by an earlier message of the same list (a batch is
        checked as if its messages were sent one after another). Nothing is recorded."""
        self._prune(now)
        seen = self._seen
        if len(messages) == 1:  # the usual: one message per transfer, no set to build
            message_id = messages[0].message_id
            if message_id is None:
                return messages
            return [] if (message_id if type(message_id) is str else _key(message_id)) in seen else messages
        kept: list[M] = []
        earlier: set[Any] = set()
        for message in messages:
            message_id = message.message_id
            if message_id is not None:
                key = _key(message_id)
                if key in seen or key in earlier:
                    continue
                earlier.add(key)
            kept.append(message)
        return kept

    def record(self, message_id: Any, now: float) -> None:
        """Log ``message_id``: its message was stored at ``now`` (a duplicate until the window ends)."""
        self.record_all((_Id(message_id),), now)

    def record_all(self, messages: Iterable[Identified], now: float) -> None:
        """:meth:`record` the id of each of ``messages`` (all stored at ``now``); one call for a
        send, whatever its size (the send path's cost)."""
        seen = self._seen
        on_seen = self.on_seen
        for message in messages:
            message_id = message.message_id
            if message_id is None:
                continue
            key = message_id if type(message_id) is str else _key(message_id)
            if key in seen:  # (stored again after its window ended and before a prune: now the newest)
                del seen[key]
            seen[key] = now
            if on_seen is not None:
                on_seen(message_id, now)
        if len(seen) > self.limit:
            self._prune(now)

    def remember(self, message_id: Any, seen_at: float) -> None:
        """Take back an id recorded at ``seen_at`` (ids must come oldest first), telling no one
        (read back from a durable store)."""
        self._seen[_key(message_id)] = seen_at

    def forget(self, message_id: Any) -> None:
        """Drop a recorded id (the store of its message was taken back: a retry is no duplicate)."""
        self._seen.pop(_key(message_id), None)

    def ids(self, now: float) -> dict[Any, float]:
        """The ids within the window at ``now`` and when each was stored (oldest first), as keyed
        here (a string as itself, any other id as ``(type name, id)``): for tests and inspection."""
        self._prune(now)
        return dict(self._seen)

    def __len__(self) -> int:
        return len(self._seen)
