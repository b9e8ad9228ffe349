"""What a receiver's outcome does to the message it settles (docs/protocol.md#settlement-mapping):
applied at once, or at a transaction's commit (:mod:`amqplink.broker.transactions`),
which first checks that each would be (:func:`check_outcome`).

* ``accepted``: complete (the message leaves the entity);
* ``modified(undeliverable-here=true)``: defer; ``modified`` otherwise: abandon;
* ``rejected``: dead-letter, its ``DeadLetterReason``/``DeadLetterErrorDescription`` from
  the error's info (or the condition and description of an error that is not Service Bus's
  ``com.microsoft:dead-letter``);
* ``released``: abandon without counting a delivery attempt (AMQP 1.0 3.4.4);
* no outcome (settled without one): the lock is released, as Service Bus does.
"""

from __future__ import annotations

from typing import Any

from amqplink.broker.namespace.entity import dead_letter_refusal
from amqplink.broker.namespace.interface import MessagingEntity
from amqplink.protocol.definitions import Accepted, Modified, Rejected, Released
from amqplink.sbwire.conditions import DEAD_LETTER

__all__ = ["apply_outcome", "check_outcome", "echo_of", "is_outcome"]

_REJECTED = Rejected()
_SETTLEMENT_OUTCOMES = (Accepted, Modified, Rejected, Released)


def is_outcome(state: Any) -> bool:
    """Whether ``state`` is one of the outcomes a receiver settles a message with."""
    return isinstance(state, _SETTLEMENT_OUTCOMES)


def echo_of(state: Any) -> Any:
    """The outcome the broker settles a delivery with once ``state`` is applied: the same one,
    but a dead-letter is echoed as a plain ``rejected`` (a rejected *with* an error means "not
    applied")."""
    return _REJECTED if isinstance(state, Rejected) else state


def apply_outcome(entity: MessagingEntity, token: bytes, state: Any, now: float) -> Any:
    """Apply ``state`` to the message ``token`` locks in ``entity``; the outcome to settle
    the delivery with (the one applied: a rejected *with* an error means "not applied", so
    a dead-letter is echoed as a plain ``rejected``; None for a lock released without an
    outcome). Raises :class:`~amqplink.broker.namespace.errors.EntityError` when refused
    (the lock is lost; a dead-letter in a dead-letter queue)."""
    if isinstance(state, Accepted):
        entity.complete(token, now)
        return state
    if isinstance(state, Modified):
        annotations = state.message_annotations if isinstance(state.message_annotations, dict) else None
        if state.undeliverable_here:
            entity.defer(token, now, annotations)
        else:
            entity.abandon(token, now, annotations)
        return state
    if isinstance(state, Rejected):
        error = state.error
        info = error.info if error is not None and isinstance(error.info, dict) else {}
        info = {str(k): v for k, v in info.items()}
        reason = info.get("DeadLetterReason")
        description = info.get("DeadLetterErrorDescription")
        if error is not None and str(error.condition) != DEAD_LETTER and reason is None:
            reason, description = str(error.condition), error.description
        entity.dead_letter(token, now, _opt_text(reason), _opt_text(description))
        return echo_of(state)
    if isinstance(state, Released):
        # not a delivery attempt (AMQP 1.0 3.4.4; the SDK releases what it prefetched)
        entity.abandon(token, now, counted=False)
        return state
    entity.release([token], now)  # settled with no outcome: as Service Bus, the lock is simply released
    return None


def check_outcome(entity: MessagingEntity, token: bytes, state: Any, now: float) -> None:
    """Raise what :func:`apply_outcome` would raise, changing nothing (but what time has
    decided already: an expired lock is noticed): the lock is lost, or a dead-letter in a
    dead-letter queue."""
    entity.locked(token, now)
    if isinstance(state, Rejected) and entity.is_dead_letter_queue:
        raise dead_letter_refusal(entity.path)


def _opt_text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
