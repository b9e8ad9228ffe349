"""``LocalQueueOptions``: where a client keeps the messages no namespace could take, and
how much it may keep."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_BYTES", "LocalQueueOptions"]

DEFAULT_MAX_BYTES = 256 << 20
"""What the messages not yet forwarded may take at most (256 MiB)."""


@dataclass(frozen=True)
class LocalQueueOptions:
    """A durable client-side queue (seed 003) for a ``ServiceBusClient``.

    ``directory``: kept by one client at a time (a lock file); created if missing.
    ``max_bytes``: what the stored messages may take (their records; the files take up to
    about twice that between two compactions); a send that would pass it raises
    :class:`~amqplink.servicebus.localqueue.errors.LocalQueueFullError` and stores nothing.
    ``forward_batch``: messages forwarded per send at most. ``retry_interval`` and
    ``max_retry_interval``: seconds between two attempts to forward an entity's messages
    after a failure (doubling from the first to the second).
    """

    directory: str | os.PathLike[str]
    max_bytes: int = DEFAULT_MAX_BYTES
    forward_batch: int = 256
    retry_interval: float = 0.5
    max_retry_interval: float = 5.0

    def __post_init__(self) -> None:
        if not str(self.directory):
            raise ValueError("LocalQueueOptions.directory must name a directory")
        if not isinstance(self.max_bytes, int) or self.max_bytes < 1024:
            raise ValueError(f"LocalQueueOptions.max_bytes must be an int of at least 1024, not {self.max_bytes!r}")
        if not isinstance(self.forward_batch, int) or self.forward_batch < 1:
            raise ValueError(f"LocalQueueOptions.forward_batch must be a positive int, not {self.forward_batch!r}")
        if not 0 < self.retry_interval <= self.max_retry_interval:
            raise ValueError("LocalQueueOptions: 0 < retry_interval <= max_retry_interval is needed")

    @property
    def path(self) -> str:
        """The directory, as an absolute path."""
        return os.path.abspath(os.fspath(self.directory))
