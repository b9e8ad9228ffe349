"""Sending an entity's messages to a peer's receiving link while it has credit."""

from __future__ import annotations

import logging
from collections.abc import Callable

from amqplink.broker.connection.consumer import Consumer
from amqplink.broker.connection.settle import error
from amqplink.broker.namespace.errors import EntityError
from amqplink.broker.namespace.unwritable import unwritable
from amqplink.engine import errors as engine_errors
from amqplink.engine.link import Link
from amqplink.protocol.definitions import Error

__all__ = ["DISPATCH_BATCH", "dispatch"]

log = logging.getLogger("amqplink.broker.sbserver")

DISPATCH_BATCH = 128
"""Messages a receiving link is handed per step (taken, locked and encoded together; fewer
when its credit is lower)."""


def dispatch(consumer: Consumer, clock: Callable[[], float], drop: Callable[[Link], None]) -> None:
    """Send messages while the link has credit and the socket keeps up; ``drop`` forgets a
    link this detaches (the session lock ran out, a message it cannot carry)."""
    if consumer.busy:
        consumer.again = True  # a listener fired inside receive(): loop once more
        return
    consumer.busy = True
    link, entity, lock = consumer.link, consumer.entity, consumer.lock
    send, send_all, held, encode_all = link.send, link.send_all, consumer.held, consumer.encode_all
    sent = False
    try:
        while True:
            consumer.again = False
            while link.credit > 0 and link.is_attached and consumer.writable():
                wanted = min(link.credit, DISPATCH_BATCH)
                try:
                    batch = entity.receive_many(
                        clock(),
                        wanted,
                        lock=lock,
                        session_id=consumer.session_id,
                        owner=link,
                    )
                except EntityError as exc:  # the session lock ran out
                    link.detach(error(exc.condition, exc.description))
                    drop(link)
                    break
                if not batch:
                    break
                sent = True
                tokens: list[bytes] | None = [msg.lock for msg in batch] if lock else None  # type: ignore[misc]  # bytes: receive_many(lock=True) locked each
                try:
                    payloads = encode_all(batch, tokens)
                except Exception as exc:  # a bug (storable admits what is written back): nothing lost
                    refusal = unwritable(entity, batch, exc)
                    link.detach(error(refusal.condition, refusal.description))
                    drop(link)
                    break
                i = 0
                try:
                    if tokens is not None:
                        made = send_all(payloads, tokens)
                        held.update(zip(tokens, made, strict=False))  # made: a prefix; each tag is its token
                        i = len(made)
                        while i < len(batch):  # send_all stopped before one send refuses: it raises
                            held[tokens[i]] = send(payloads[i], tag=tokens[i], settled=False)
                            i += 1
                    else:
                        for payload in payloads:
                            send(payload, tag=b"")  # an empty delivery-tag, as Service Bus sends
                            i += 1
                except engine_errors.MessageSizeExceededError as exc:
                    # "Any attempt to deliver a message larger than this results in a
                    # message-size-exceeded link-error" (2.7.3): the link ends, the
                    # message (and the rest of the batch) stays for other receivers.
                    for left in batch[i:]:
                        entity.restore(left)
                    log.info("%s: detaching receiver %r: %s", consumer.path, link.name, exc)
                    link.detach(Error(condition=exc.condition, description=str(exc), info={}))
                    drop(link)
                    break
                if len(batch) < wanted:
                    # The entity had no more: asking again finds none (a lock that runs
                    # out meanwhile wakes this consumer through the entity's tick).
                    break
            if not consumer.again:
                break
    finally:
        consumer.busy = False
    if sent:
        consumer.flush()
