"""The local queue's errors: each a ``ServiceBusError``, naming the directory (and the
entity when a send failed) and what the user can do."""

from __future__ import annotations

from typing import Any

from amqplink.servicebus.exceptions import ServiceBusError

__all__ = ["LocalQueueCorruptError", "LocalQueueError", "LocalQueueFullError", "LocalQueueInUseError"]


class LocalQueueError(ServiceBusError):
    """The local queue could not store a message, or its directory cannot be used."""


class LocalQueueFullError(LocalQueueError):
    """The local queue holds ``max_bytes`` already: the message was not stored (nothing of
    the send was), and the send failed with the error it was to be shielded from."""

    default_retryable = True


class LocalQueueInUseError(LocalQueueError):
    """Another process (or another client of this one) holds the local queue's directory."""


class LocalQueueCorruptError(LocalQueueError):
    """A segment file of the local queue is damaged before its end (valid frames follow a
    frame that does not check, or a frame that checks does not parse): it is refused and
    nothing is changed, so that no acknowledged message is dropped silently."""

    def __init__(self, message: str, *, path: str, offset: int, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.path = path
        self.offset = offset
