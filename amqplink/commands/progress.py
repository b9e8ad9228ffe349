"""A one-line progress bar on a terminal (stderr), silent elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Counts work done toward ``total`` and redraws at most ``rate`` times a second."""

    def __init__(self, label: str, total: int, *, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.started = time.monotonic()
        self._last_draw = 0.0

    def advance(self, n: int = 1) -> None:
        """Record ``n`` more items done; redraw if it is time."""
        self.done += n
        if self.enabled:
            now = time.monotonic()
            if now - self._last_draw >= 0.1 or self.done >= self.total:
                self._last_draw = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        width = 30
        fraction = min(1.0, self.done / self.total) if self.total else 1.0
        filled = int(width * fraction)
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {rate:,.0f} msg/s")
        self.stream.flush()

    def finish(self) -> None:
        """End the line the bar was drawn on."""
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
