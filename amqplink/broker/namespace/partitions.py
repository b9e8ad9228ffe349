"""What the fragments of one partitioned entity share (:class:`Partitions`): their count,
which are down, and the rules that pick one for a message (:mod:`.partitioned` holds the
entities made of fragments). A module of its own below :mod:`.entity`, which names the
type, and :mod:`.partitioned`, which builds on :class:`~.entity.Entity`."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from amqplink.broker.namespace.duplicates import DuplicateDetector
from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.errors import ARGUMENT_ERROR, INTERNAL_ERROR, SERVER_BUSY, EntityError
from amqplink.sbwire.annotations import PARTITION_KEY

__all__ = ["DOWN_CONDITIONS", "RETRY", "SEQUENCE_SHIFT", "Partitions", "fragment_of"]

log = logging.getLogger(__name__)

SEQUENCE_SHIFT = 48
"""Fragment ``i``'s sequence numbers are ``(i << 48) + n``: the top 16 bits name the partition."""
DOWN_CONDITIONS = (INTERNAL_ERROR, SERVER_BUSY)
"""What a request needing a down fragment may be refused with (both retryable)."""
RETRY = "The service was unable to process the request; please retry the operation."


def fragment_of(sequence_number: int) -> int:
    """The fragment a sequence number of a partitioned entity belongs to."""
    return sequence_number >> SEQUENCE_SHIFT


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    return str(key).encode("utf-8", "surrogatepass")


class Partitions:
    """The fragments' shared state: count, availability, round robin, per-fragment duplicates.

    ``by_message_id``: the entity requires duplicate detection, so a MessageId is a key
    (and duplicates are detected per fragment, within ``duplicate_window`` seconds).
    """

    def __init__(self, path: str, count: int, *, by_message_id: bool = False, duplicate_window: float = 0.0) -> None:
        if not 1 <= count < 1 << 15:
            raise ValueError(f"{path!r}: a partitioned entity needs 1 to 32767 fragments, not {count}")
        self.path = path
        self.count = count
        self.by_message_id = by_message_id
        self.down = [False] * count
        self.conditions = [INTERNAL_ERROR] * count
        """The condition each fragment refuses with while down."""
        self.on_refused: Callable[[int, str], None] | None = None
        """Told (fragment, what) of each request refused because its fragment is down
        (fault injection counts its firings with it)."""
        self.duplicates = [DuplicateDetector(duplicate_window) for _ in range(count)] if by_message_id else None
        self._next = 0

    def __repr__(self) -> str:
        down = [i for i, d in enumerate(self.down) if d]
        return f"Partitions({self.path!r}, count={self.count}, down={down})"

    # -- availability -----------------------------------------------------------------
    def set_down(self, index: int, down: bool = True, *, condition: str = INTERNAL_ERROR) -> None:
        """Take fragment ``index`` down (or bring it back): the fault-injection hook.

        ``condition``: what requests needing the fragment get while it is down,
        ``amqp:internal-error`` (Service Bus's answer) or ``com.microsoft:server-busy``.
        """
        if not 0 <= index < self.count:
            raise IndexError(f"{self.path!r} has fragments 0 to {self.count - 1}, not {index}")
        if condition not in DOWN_CONDITIONS:
            raise ValueError(f"a down fragment refuses with {' or '.join(DOWN_CONDITIONS)}, not {condition!r}")
        self.conditions[index] = condition
        if self.down[index] != down:
            self.down[index] = down
            log.warning("%s: fragment %d is %s", self.path, index, "down" if down else "up again")

    def is_down(self, index: int) -> bool:
        """Whether fragment ``index`` is down (fault injection)."""
        return self.down[index]

    def require_up(self, index: int, what: str) -> None:
        """``amqp:internal-error`` (retryable) when fragment ``index`` is down."""
        if self.down[index]:
            if self.on_refused is not None:
                self.on_refused(index, what)
            raise EntityError(
                self.conditions[index],
                f"{RETRY} Fragment {index} of {self.path!r} is unavailable ({what}); retry later,"
                " or send without a partition key so another fragment takes the message",
            )

    def up_from(self, start: int) -> Iterator[int]:
        """The fragments that are up, starting at ``start`` and wrapping around."""
        down, n = self.down, self.count
        for k in range(n):
            i = (start + k) % n
            if not down[i]:
                yield i

    # -- choosing a fragment ----------------------------------------------------------
    def key(self, envelope: Envelope) -> Any:
        """The partition key: SessionId, else PartitionKey, else MessageId (with duplicate detection)."""
        session_id = envelope.session_id
        partition_key = envelope.annotations.get(PARTITION_KEY)
        if session_id is not None:
            if partition_key is not None and str(partition_key) != session_id:
                raise EntityError(
                    ARGUMENT_ERROR,
                    f"{self.path!r}: the PartitionKey {str(partition_key)!r} differs from the SessionId"
                    f" {session_id!r}; leave PartitionKey unset or make it equal to the SessionId",
                )
            return session_id
        if partition_key is not None:
            return partition_key
        if self.by_message_id:
            return envelope.message_id
        return None

    def index(self, key: Any) -> int:
        """The fragment a key pins to (stable across restarts: CRC-32, not ``hash``)."""
        return zlib.crc32(_key_bytes(key)) % self.count

    def round_robin(self) -> int:
        """The next fragment that is up (any fragment when all are down: the broker's own moves)."""
        start = self._next
        if not self.down[start]:  # the usual case (the loop's first turn, without the loop)
            self._next = start + 1 if start + 1 < self.count else 0
            return start
        down, count = self.down, self.count
        i = start
        for _ in range(count):  # per message: no generator
            if not down[i]:
                self._next = i + 1 if i + 1 < count else 0
                return i
            i = i + 1 if i + 1 < count else 0
        self._next = start + 1 if start + 1 < count else 0
        return start

    @property
    def round_robin_start(self) -> int:
        """The fragment the round robin tries first for the next message with no key."""
        return self._next

    @round_robin_start.setter
    def round_robin_start(self, index: int) -> None:
        self._next = index % self.count

    # -- a send arriving --------------------------------------------------------------
    def admit(self, envelopes: list[Envelope]) -> tuple[Any, DuplicateDetector | None, list[Envelope]]:
        """Check a send against the partition rules; their key, the duplicate detector of the
        key's fragment (:meth:`detector`) and the messages to store, stamped. (Duplicates are
        the namespace's to drop with that detector, and its to record once they are stored.)

        Refused: a PartitionKey that differs from the SessionId, a batch with distinct keys
        (``com.microsoft:argument-error``), a key whose fragment is down (``amqp:internal-error``).
        """
        first = self.key(envelopes[0])
        for envelope in envelopes[1:]:
            if self.key(envelope) != first:
                raise EntityError(
                    ARGUMENT_ERROR,
                    f"{self.path!r}: batching messages with distinct SessionId, PartitionKey, or MessageId"
                    " is not supported for a partitioned entity; send them separately or give them one key",
                )
        if first is None:
            return None, None, envelopes
        index = self.pinned(first)
        detector = None if self.duplicates is None else self.duplicates[index]
        return first, detector, [self.stamp(e) for e in envelopes]

    def detector(self, key: Any) -> DuplicateDetector | None:
        """The duplicate detector of the fragment ``key`` pins to (duplicates are detected per
        fragment); None without duplicate detection, or for no key (a message with no key has
        no message id either, when the entity detects duplicates)."""
        if self.duplicates is None or key is None:
            return None
        return self.duplicates[self.index(key)]

    def pinned(self, key: Any) -> int:
        """The fragment ``key`` pins to; ``amqp:internal-error`` (retryable) if it is down."""
        index = self.index(key)
        self.require_up(index, "the message's partition key pins it there")
        return index

    def stamp(self, envelope: Envelope) -> Envelope:
        """``x-opt-partition-key`` on the stored message when a SessionId or PartitionKey decided."""
        session_id = envelope.session_id
        if session_id is None or envelope.annotations.get(PARTITION_KEY) == session_id:
            return envelope
        return envelope.with_annotations({PARTITION_KEY: session_id})
