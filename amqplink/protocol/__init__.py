"""AMQP 1.0 protocol definitions: the spec's composite and restricted types.

Everything here comes from :mod:`amqplink.protocol.definitions`, which
``specs/generate.py`` writes from the project's own machine-readable spec
``specs/amqp-1.0.json`` (do not edit it by hand; run ``python specs/generate.py``).
Importing this package registers every described type with the codec's decoder,
so :func:`amqplink.codec.decode.decode_all` yields ``Open``, ``Transfer``,
``Data``... objects instead of bare ``Described`` values.

Main names: the performatives (``Open``, ``Begin``, ``Attach``, ``Flow``,
``Transfer``, ``Disposition``, ``Detach``, ``End``, ``Close``), ``Error``, the SASL
frames, delivery states and outcomes, ``Source``/``Target``, the message sections
(``Header``, ``Properties``, ``Data``, ``AmqpValue``...), the choice constants
(``Role``, ``SenderSettleMode``, ``AmqpErrorCondition``...) and the lookup tables
``PERFORMATIVES``, ``SASL_FRAMES``, ``COMPOSITES``, ``SECTIONS``, ``OUTCOMES``.
"""

from __future__ import annotations

from amqplink.protocol import definitions
from amqplink.protocol.definitions import *  # noqa: F403

__all__ = ["definitions"]
__all__ += definitions.__all__
