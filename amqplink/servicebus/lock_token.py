"""Lock tokens <-> delivery-tags: moved to :mod:`amqplink.sbwire.lock_token` (shared with the broker)."""

from __future__ import annotations

from amqplink.sbwire.lock_token import delivery_tag_from_lock_token, lock_token_from_delivery_tag

__all__ = ["delivery_tag_from_lock_token", "lock_token_from_delivery_tag"]
