"""amqplink: an AMQP 1.0 library that speaks Azure Service Bus's dialect.

Layers (imports point down): ``codec`` <- ``protocol`` <- ``engine`` (sans-IO)
<- ``aio`` <- ``servicebus`` <- {``broker``, ``spark``, ``cli``}.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
