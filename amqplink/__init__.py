"""amqplink: an AMQP 1.0 library that speaks Azure Service Bus's dialect.

Layers (imports point down): ``codec`` <- ``protocol`` <- ``engine`` (sans-IO)
<- ``aio`` <- ``servicebus`` <- {``broker``, ``spark``, ``cli``}.

The client lives in :mod:`amqplink.aio` (asyncio; ``amqplink.connect`` is its
entry point) and :mod:`amqplink.sync` (blocking); :class:`Message` is shared by both.
"""

from __future__ import annotations

from amqplink.aio import connect
from amqplink.message import Message

__version__ = "0.1.0"
__all__ = ["Message", "__version__", "connect"]
