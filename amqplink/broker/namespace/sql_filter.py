"""Service Bus SQL filters: compiled once per rule, evaluated per message.

"A SqlRuleFilter holds a SQL-like condition expression that is evaluated in the
broker against the arriving messages' user-defined properties and system
properties. All system properties ... must be prefixed with sys. in the condition
expression." The subset here: comparisons, AND/OR/NOT, [NOT] IN, [NOT] LIKE with
ESCAPE, IS [NOT] NULL, EXISTS, arithmetic, string/number/boolean/NULL constants,
``sys.``/``user.``/bare/``[delimited]`` property names (:mod:`.sql_lexer`,
:mod:`.sql_parser`, :mod:`.sql_eval`). A message is taken only when the condition
is true; false and unknown (a missing property) do not match.

Not supported: the functions ``newid()`` and ``property(name)``, ``@parameters``,
and ``SqlRuleAction``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqplink.broker.namespace.envelope import Envelope
from amqplink.broker.namespace.sql_lexer import MAX_SQL_LENGTH, SqlFilterError
from amqplink.broker.namespace.sql_parser import MAX_SQL_DEPTH, parse

__all__ = ["MAX_SQL_DEPTH", "MAX_SQL_LENGTH", "SqlFilter", "SqlFilterError"]


class SqlFilter:
    """A compiled SQL filter expression; :class:`SqlFilterError` (with the 1-based position) if bad."""

    __slots__ = ("_predicate", "expression")

    def __init__(self, expression: str) -> None:
        if not isinstance(expression, str):
            raise SqlFilterError(1, f"expected a string expression, not {type(expression).__name__}")
        self.expression = expression
        self._predicate: Callable[[Any], bool | None] = parse(expression)

    def evaluate(self, envelope: Envelope) -> bool | None:
        """True, False, or None when the condition is unknown."""
        return self._predicate(envelope)

    def matches(self, envelope: Envelope) -> bool:
        """Whether a subscription with this filter takes the message (true only, not unknown)."""
        return self._predicate(envelope) is True

    def __repr__(self) -> str:
        return f"SqlFilter({self.expression!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SqlFilter) and other.expression == self.expression

    def __hash__(self) -> int:
        return hash(self.expression)
