"""The SDK's connection options that are not about the transport: ``user_agent``,
``logging_enable``, ``socket_timeout``, ``client_identifier`` (azure-servicebus 7.15), and
what becomes of keywords neither the SDK nor amqplink knows.

* ``user_agent`` (client): the connection's open properties are the SDK's
  (``_common/utils.create_properties``): ``product``, ``version``, ``framework``
  (``Python/X.Y.Z``), ``platform`` and ``user-agent``, whose value starts with the user's
  string ("If specified, this will be added in front of the built-in user agent string")
  followed by amqplink's own (``amqplink/VERSION Python/X.Y.Z (PLATFORM)``).
* ``logging_enable`` (client): "Whether to output network trace logs to the logger":
  this client's connection logs every frame on ``amqplink.frames`` at INFO (the project's
  frame trace, SASL responses redacted), other connections untouched.
* ``socket_timeout`` (client, ``get_queue_sender``...): "The time in seconds that the
  underlying socket on the connection should wait when sending and receiving data before
  timing out ... If connection errors are occurring due to write timing out, a larger than
  default value may need to be passed in." A send that waits longer than this for the
  socket to take data fails with ``ServiceBusConnectionError`` (retried by the policy).
  Reading needs no such bound here (nothing polls: a receive returns when a message comes,
  ``max_wait_time`` bounds it), and a receiver never waits on the socket to write, so on a
  receiver the value is checked and kept, and bounds nothing.
* ``client_identifier`` (``get_queue_sender``, ``get_queue_receiver``...): "A string-based
  identifier to uniquely identify the sender instance. Service Bus will associate it with
  some error messages"; default ``SBSender-<uuid4>`` / ``SBReceiver-<uuid4>`` as the SDK's,
  read back as ``.client_identifier``. A receiver sends it as the attach property
  ``com.microsoft:receiver-name`` (the SDK's ``CONSUMER_IDENTIFIER``); every link's name
  starts with it; a sender or receiver constructed directly (with a connection of its own)
  also uses it as the connection's container-id, as the SDK's pyamqp ``client_name`` does.
* Unknown keywords are ignored, as the SDK's ``Configuration(**kwargs)`` ignores them
  (logged once at DEBUG, naming them).
"""

from __future__ import annotations

import logging
import math
import platform
import sys
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from amqplink import __version__
from amqplink.codec.types import Symbol

__all__ = [
    "FRAME_TRACE_LEVEL",
    "RECEIVER_NAME",
    "check_socket_timeout",
    "client_identifier",
    "connection_properties",
    "ignore_unknown",
]

log = logging.getLogger(__name__)

FRAME_TRACE_LEVEL = logging.INFO
"""The level at which ``logging_enable=True`` logs the client's frames on ``amqplink.frames``."""
RECEIVER_NAME = Symbol("com.microsoft:receiver-name")
"""The attach property naming a receiver (the SDK's ``CONSUMER_IDENTIFIER``)."""


def connection_properties(user_agent: str | None = None) -> dict[Symbol, str]:
    """The open properties the SDK sends, with amqplink's product and version."""
    if user_agent is not None and not isinstance(user_agent, str):
        raise TypeError(f"user_agent must be a str, not {type(user_agent).__name__}")
    framework = f"Python/{sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}"
    platform_str = platform.platform()
    agent = f"amqplink/{__version__} {framework} ({platform_str})"
    if user_agent:
        agent = f"{user_agent} {agent}"
    return {
        Symbol("product"): "amqplink",
        Symbol("version"): __version__,
        Symbol("framework"): framework,
        Symbol("platform"): platform_str,
        Symbol("user-agent"): agent,
    }


def check_socket_timeout(value: Any) -> float | None:
    """``socket_timeout`` as seconds (None: not given); ``ValueError`` unless a positive finite number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"socket_timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def client_identifier(kind: str, value: Any) -> str:
    """The handler's identifier: ``value``, or ``SBSender-<uuid4>`` / ``SBReceiver-<uuid4>``."""
    if value is None:
        return f"SB{kind.capitalize()}-{uuid.uuid4()}"
    if not isinstance(value, str) or not value:
        raise ValueError(f"client_identifier must be a non-empty str, not {value!r}")
    return value


def ignore_unknown(where: str, kwargs: Mapping[str, Any], known: Iterable[str]) -> None:
    """Log at DEBUG the keywords of ``kwargs`` not in ``known`` (ignored, as the SDK ignores them)."""
    unknown = sorted(set(kwargs).difference(known))
    if unknown:
        log.debug("%s: ignoring keyword(s) the client does not know: %s", where, ", ".join(unknown))
