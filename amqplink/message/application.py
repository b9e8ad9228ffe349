"""What an application-properties section may hold (3.2.5), said once: the encoder of
:class:`amqplink.message.Message` refuses what it does not allow, and the broker refuses
a sent message that carries it (``amqp:decode-error``, the property named).

    "The keys of this map are restricted to be of type string (which excludes the
    possibility of a null key) and the values are restricted to be of simple types only,
    that is, excluding map, list, and array types." (3.2.5)

A described value is simple when what it describes is (a described map, list or array is
one of those in another name).
"""

from __future__ import annotations

from typing import Any

from amqplink.codec.types import Array, Described

__all__ = ["application_property_error"]

_COMPOUND = (dict, list, tuple, Array)


def application_property_error(key: Any, value: Any) -> str | None:
    """Why ``key: value`` may not be an application property (3.2.5), or None if it may."""
    if not isinstance(key, str):
        return f"application property keys must be strings, not {type(key).__name__} ({key!r})"
    inner = value
    while isinstance(inner, Described):
        inner = inner.value
    if isinstance(inner, _COMPOUND):
        kind = "map" if isinstance(inner, dict) else "array" if isinstance(inner, Array) else "list"
        return f"application property {key!r} is a {kind}: values must be simple types (3.2.5: no map, list or array)"
    return None
