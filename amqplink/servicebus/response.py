"""Reading the status of a ``$cbs`` or ``$management`` response.

docs/protocol.md#management-operations: CBS answers with ``status-code``/
``status-description``; ``$management`` with ``statusCode``/``statusDescription``
(camelCase) and ``errorCondition``. Both spellings are read here, once, for both nodes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from amqplink.message import Message

__all__ = ["ResponseStatus", "read_status"]


class ResponseStatus(NamedTuple):
    """``code`` is None when the response carried no status at all (a malformed answer)."""

    code: int | None
    description: str | None
    condition: str | None

    @property
    def ok(self) -> bool:
        """A 2xx status."""
        return self.code is not None and 200 <= self.code < 300


def _first(props: dict[Any, Any], *names: str) -> Any:
    for name in names:
        value = props.get(name)
        if value is not None:
            return value
    return None


def read_status(response: Message) -> ResponseStatus:
    """The status code, description and error condition of ``response``."""
    props = response.application_properties or {}
    code = _first(props, "statusCode", "status-code")
    description = _first(props, "statusDescription", "status-description")
    condition = _first(props, "errorCondition", "error-condition")
    return ResponseStatus(
        int(code) if isinstance(code, int) and not isinstance(code, bool) else None,
        None if description is None else str(description),
        None if condition is None else str(condition),
    )
