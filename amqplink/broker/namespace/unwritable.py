"""The guard behind the checks of :mod:`.storable`: a message the broker fails to write for a
delivery or a peek is given back, never lost (docs/broker-semantics.md#what-is-refused-at-the-transfer).

:mod:`.storable` admits only messages whose every delivery writes them back as they came,
so a failure here is a bug in the broker; what this module makes sure of is that such a
bug costs an error the receiver sees (``amqp:internal-error``, the entity and the message
named, logged once), not an acknowledged message gone: a message taken for the delivery
(locked, or removed by receive-and-delete) is restored as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from amqplink.broker.namespace.errors import INTERNAL_ERROR, EntityError
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.broker.namespace.store import StoredMessage

__all__ = ["unwritable"]

log = logging.getLogger(__name__)


def unwritable(
    entity: MessagingEntity, messages: Sequence[StoredMessage], exc: Exception, *, taken: bool = True
) -> EntityError:
    """What a delivery or a peek answers when writing one of ``messages`` failed (``exc``):
    the guard behind the checks above, which admit only what is written back, so this is a
    bug. A message taken for the delivery (``taken``) is given back to ``entity`` as it was
    (its delivery count unchanged, receive-and-delete undone), so nothing acknowledged is
    lost; the failure is logged once; the ``amqp:internal-error`` returned names the entity
    and the message."""
    failed = messages[0].sequence_number if messages else None
    for msg in messages:
        try:
            entity.encode(msg, peek=not taken)
        except Exception:
            failed = msg.sequence_number
            break
    if taken:
        for msg in messages:
            entity.restore(msg)
    log.error("%s: message %s could not be written for a delivery: %r", entity.path, failed, exc, exc_info=exc)
    return EntityError(
        INTERNAL_ERROR,
        f"the broker could not write message {failed} of {entity.path!r} ({type(exc).__name__}: {exc}); it stays in"
        " the entity, not delivered: report this broker error",
    )
